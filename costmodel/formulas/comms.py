"""Bytes a device sends in one collective, and the time that takes at a given bandwidth.

S is the full buffer as nccl-tests counts it (the gathered output for all-gather, the input for
reduce-scatter and all-reduce). Ring algorithms: each device sends (n - 1)/n S per pass.
"""

from __future__ import annotations


def ring_factor(*, group):
    """(n - 1)/n: the share of a buffer each of n devices sends per ring pass (0 for one device).

    Source: nccl-tests doc/PERFORMANCE.md (busbw = algbw (n-1)/n for all-gather and reduce-scatter).
    """
    return (group - 1) / group


def nvls_factor(*, group):
    """(n + 1)/n: what each GPU sends per byte of an NVLink SHARP all-reduce (S once to be reduced,
    S/n once to be multicast; see collective_time.nvls_seconds_per_byte)."""
    return (group + 1) / group


#: ring passes per collective: an all-reduce is a reduce-scatter and an all-gather; a gather or
#: scatter passes (n - 1)/n of the buffer through the root's link once
PASSES = {"all-reduce": 2, "all-gather": 1, "reduce-scatter": 1, "all-to-all": 1, "gather": 1, "scatter": 1}
#: collectives in which a link carries the whole buffer once: a pipelined chain (broadcast, reduce)
#: or one send
WHOLE = ("broadcast", "reduce", "send/recv")
#: every collective with a time model
MODELLED = tuple(PASSES) + WHOLE


def bus_factor(*, op: str, group):
    """nccl-tests' busbw / algbw: passes x (n - 1)/n for ring collectives, 1 for broadcast, reduce and
    send/recv: the rate each link must sustain for the collective to take S / algbw.

    Source: nccl-tests doc/PERFORMANCE.md ('Bus bandwidth' section, per collective) and its
    src/*.cu GetBw functions (gather and scatter: (n - 1)/n).
    """
    return PASSES[op] * ring_factor(group=group) if op in PASSES else 1


def allgather_bytes_sent(*, buffer_bytes, group):
    """All-gather: (n - 1)/n S (each device forwards the n - 1 shards it does not own).

    Source: nccl-tests doc/PERFORMANCE.md (busbw = algbw (n-1)/n); Scaling Book collectives chapter.
    """
    return buffer_bytes * ring_factor(group=group)


def reducescatter_bytes_sent(*, buffer_bytes, group):
    """Reduce-scatter: (n - 1)/n S, the mirror image of all-gather."""
    return buffer_bytes * ring_factor(group=group)


def allreduce_bytes_sent(*, buffer_bytes, group):
    """All-reduce = reduce-scatter + all-gather: 2 (n - 1)/n S.

    Source: nccl-tests doc/PERFORMANCE.md (busbw = algbw 2(n-1)/n).
    """
    return 2 * buffer_bytes * ring_factor(group=group)


def alltoall_bytes_sent(*, buffer_bytes, group):
    """All-to-all: (n - 1)/n S (keeps its own 1/n, sends the rest)."""
    return buffer_bytes * ring_factor(group=group)


def sendrecv_bytes_sent(*, buffer_bytes, group):
    """Point-to-point send: the whole buffer S (nccl-tests busbw factor 1). ``group`` is unused; it
    is there so every entry of BYTES_SENT takes the same arguments."""
    del group
    return buffer_bytes


def transfer_seconds(*, bytes_sent, bandwidth):
    """Bandwidth-bound time: bytes sent / egress bandwidth of the axis (no latency term yet).

    On a bidirectional ring (TPU ICI) the egress bandwidth is W_ici M for an axis spanning M torus
    axes, which gives the Scaling Book's all-gather time V / (W_ici M) for large n.
    """
    return bytes_sent / bandwidth


BYTES_SENT = {
    "all-gather": allgather_bytes_sent,
    "reduce-scatter": reducescatter_bytes_sent,
    "all-reduce": allreduce_bytes_sent,
    "all-to-all": alltoall_bytes_sent,
    "send/recv": sendrecv_bytes_sent,
}
