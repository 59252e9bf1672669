"""Time of one collective: a latency term plus bytes over the effective bandwidth, per algorithm.

S is the full buffer (nccl-tests). B is the bandwidth one device sends at (GPU: per direction;
TPU ICI: W_ici M, bidirectional). alpha is the collective's fixed cost (launch and synchronisation).
"""

from __future__ import annotations


def ring_seconds(*, buffer_bytes, ranks, bandwidth, latency, passes):
    """Ring: alpha + p (n - 1)/n S / B, p = 1 for all-gather / reduce-scatter, 2 for all-reduce.

    Source: nccl-tests doc/PERFORMANCE.md (busbw = S/t x p (n-1)/n is the per-link rate a ring
    needs); Patarasuk and Yuan 2009 (bandwidth-optimal all-reduce). On a bidirectional torus axis
    (TPU) B is W_ici M: both directions of the ring carry half the data (Scaling Book, collectives).
    """
    return latency + passes * (ranks - 1) / ranks * buffer_bytes / bandwidth


def nvls_allreduce_seconds(*, buffer_bytes, ranks, bandwidth, latency):
    """NVLink SHARP all-reduce: alpha + (n + 1)/n S / B.

    The switch reduces: each GPU sends its whole buffer S once to be reduced (multimem.ld_reduce) and
    its reduced 1/n once to be multicast (multimem.st): S (1 + 1/n) out per GPU, whatever n is.
    Source: NVIDIA, 'NVLink SHARP' in the NCCL 2.17 release notes and the Hopper whitepaper
    (WP-10792-001, in-network reductions); busbw is no longer a wire rate (nccl-tests PERFORMANCE.md).
    """
    return latency + (ranks + 1) / ranks * buffer_bytes / bandwidth


def hierarchical_allreduce_seconds(*, buffer_bytes, gpus_per_node, nodes, intra_bandwidth, inter_bandwidth,
                                   intra_latency, inter_latency):
    """Two-level all-reduce across nodes: reduce-scatter in the node, all-reduce of S/g between nodes
    (each GPU on its own NIC), all-gather in the node.

    Source: the hierarchical scheme of Jia et al. 2018 (arXiv:1807.11205) and Horovod/NCCL's
    tree-of-rings; with g = 1 it is a flat ring between nodes.
    """
    inside = ring_seconds(buffer_bytes=buffer_bytes, ranks=gpus_per_node, bandwidth=intra_bandwidth,
                          latency=intra_latency, passes=1)
    across = ring_seconds(buffer_bytes=buffer_bytes / gpus_per_node, ranks=nodes, bandwidth=inter_bandwidth,
                          latency=inter_latency, passes=2)
    return 2 * inside + across


def hierarchical_gather_seconds(*, buffer_bytes, gpus_per_node, nodes, intra_bandwidth, inter_bandwidth,
                                intra_latency, inter_latency):
    """Two-level all-gather (or reduce-scatter) across nodes: the node-level ring over the NICs moves
    (N_nodes - 1)/N_nodes of S/g per GPU, the NVLink ring the rest: alpha's + both transfer terms."""
    across = ring_seconds(buffer_bytes=buffer_bytes / gpus_per_node, ranks=nodes, bandwidth=inter_bandwidth,
                          latency=inter_latency, passes=1)
    inside = ring_seconds(buffer_bytes=buffer_bytes, ranks=gpus_per_node, bandwidth=intra_bandwidth,
                          latency=intra_latency, passes=1)
    return across + inside
