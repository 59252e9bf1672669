"""Time of one collective: a latency term plus bytes over the effective bandwidth, per algorithm.

S is the full buffer (nccl-tests). B is the bandwidth one device sends at (GPU: per direction;
TPU ICI: W_ici M, bidirectional). alpha is the collective's fixed cost (launch and synchronisation).
Every time here is affine in S, t = alpha + beta S: each algorithm has a ``*_seconds_per_byte``
(beta) and a ``*_seconds`` that adds its latency, so many buffers on one group cost one beta.
"""

from __future__ import annotations

from costmodel.formulas.comms import nvls_factor, ring_factor
from costmodel.mathops import maximum


def ring_seconds_per_byte(*, ranks, bandwidth, passes):
    """Ring: beta = p (n - 1)/n / B, p = 1 for all-gather / reduce-scatter, 2 for all-reduce.

    Source: nccl-tests doc/PERFORMANCE.md (busbw = S/t x p (n-1)/n is the per-link rate a ring
    needs); Patarasuk and Yuan 2009 (bandwidth-optimal all-reduce). On a bidirectional torus axis
    (TPU) B is W_ici M: both directions of the ring carry half the data (Scaling Book, collectives).
    """
    return passes * ring_factor(group=ranks) / bandwidth


def ring_seconds(*, buffer_bytes, ranks, bandwidth, latency, passes):
    """Ring: alpha + p (n - 1)/n S / B."""
    return latency + buffer_bytes * ring_seconds_per_byte(ranks=ranks, bandwidth=bandwidth, passes=passes)


def nvls_seconds_per_byte(*, ranks, bandwidth):
    """NVLink SHARP all-reduce: beta = (n + 1)/n / B.

    The switch reduces: each GPU sends its whole buffer S once to be reduced (multimem.ld_reduce) and
    its reduced 1/n once to be multicast (multimem.st): S (1 + 1/n) out per GPU, whatever n is.
    Source: NVIDIA, 'NVLink SHARP' in the NCCL 2.17 release notes and the Hopper whitepaper
    (WP-10792-001, in-network reductions); busbw is no longer a wire rate (nccl-tests PERFORMANCE.md).
    """
    return nvls_factor(group=ranks) / bandwidth


def nvls_allreduce_seconds(*, buffer_bytes, ranks, bandwidth, latency):
    """NVLink SHARP all-reduce: alpha + (n + 1)/n S / B."""
    return latency + buffer_bytes * nvls_seconds_per_byte(ranks=ranks, bandwidth=bandwidth)


def p2p_seconds_per_byte(*, bandwidth):
    """Point-to-point send: the whole buffer once, beta = 1 / B (nccl-tests busbw factor 1)."""
    return 1 / bandwidth


def hierarchical_allreduce_per_byte(*, gpus_per_node, nodes, intra_bandwidth, inter_bandwidth):
    """Two-level all-reduce across nodes: reduce-scatter in the node, all-reduce of S/g between nodes
    (each GPU on its own NIC), all-gather in the node: beta = 2 (g-1)/g / B_in + 2 (N-1)/N / (g B_out).

    Source: the hierarchical scheme of Jia et al. 2018 (arXiv:1807.11205) and Horovod/NCCL's
    tree-of-rings; with g = 1 it is a flat ring between nodes. Latency: 2 alpha_in + alpha_out.
    """
    inside = ring_seconds_per_byte(ranks=gpus_per_node, bandwidth=intra_bandwidth, passes=1)
    across = ring_seconds_per_byte(ranks=nodes, bandwidth=inter_bandwidth, passes=2) / gpus_per_node
    return 2 * inside + across


def hierarchical_all_to_all_per_byte(*, gpus_per_node, nodes, intra_bandwidth, inter_bandwidth):
    """All-to-all across N nodes of g GPUs, each GPU on its own NIC: of the S bytes a rank sends (S / N g to each),
    (N - 1)/N go to ranks on other nodes through the NICs (NCCL's PXN may relay a message over NVLink to the GPU on
    the receiver's rail, but the node's g NICs still carry g such shares) and (g - 1)/(N g) to the others in its
    node over NVLink, at the same time: beta = max((N-1)/N / B_out, (g-1)/(N g) / B_in). The node-level share is
    the issue's "(n - 1)/n across the slowest level" with n the nodes: the ranks of the sender's own node are
    reached without it."""
    across = (nodes - 1) / nodes / inter_bandwidth
    inside = (gpus_per_node - 1) / (nodes * gpus_per_node) / intra_bandwidth
    return maximum(across, inside)


def hierarchical_gather_per_byte(*, gpus_per_node, nodes, intra_bandwidth, inter_bandwidth):
    """Two-level all-gather (or reduce-scatter) across nodes: the node-level ring over the NICs moves
    (N - 1)/N of S/g per GPU, the NVLink ring the rest: beta = (N-1)/N / (g B_out) + (g-1)/g / B_in.
    Latency: alpha_out + alpha_in."""
    across = ring_seconds_per_byte(ranks=nodes, bandwidth=inter_bandwidth, passes=1) / gpus_per_node
    inside = ring_seconds_per_byte(ranks=gpus_per_node, bandwidth=intra_bandwidth, passes=1)
    return across + inside
