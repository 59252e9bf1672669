"""Tree all-reduce with the Simple protocol: the pipeline fill NCCL's tuner leaves out (NCCL 2.20.3 to 2.26.2,
``git show v2.26.2-1:``; the lines cited are the same code in both).

The tuner prices a tree all-reduce as its latency (one message's trip: 2 ((p - 1) intra + log2 N inter) hops,
tuning.cc) plus S over the tree's bandwidth: a pipeline of infinitely small pieces. The kernel moves each
channel's bytes in chunks of one buffer step (calcCollChunking: chunkSteps = 1 for trees, so a chunk is
NCCL_BUFFSIZE / NCCL_STEPS = 4 MiB / 8 = 512 KiB), and with the Simple protocol a chunk is one slice
(ProtoSimple<1, 1> in all_reduce.h runTreeSplit; prims_simple.h genericOp: a slice is posted to the next rank
only once it is whole). Each hop therefore stores and forwards a whole chunk: a chunk crosses the
2 (p - 1) NVLink hops of the two chains (up the leaf node's chain, down it again) and the 2 log2 N network hops in
turn, and only the slowest hop streams. So the first chunk of every channel takes its size over every hop but the
slowest on top of the tuner's time: from 1 to 16 MiB (one or a few chunks a channel) that is a third of the time
on 2 x 8 A100 over EFA.

A hop's speed is one channel's share: the GPU's NVLink (as NCCL's topology counts it) over the communicator's
channels, all of which move their first chunk at once; the network, the tree graph's channels x their network
speed over the same channels. LL and LL128 forward 8- and 128-byte lines as they arrive: no fill.

Numbers and numpy arrays alike (``costmodel.mathops``); no constant here is fitted.
"""

from __future__ import annotations

from costmodel.formulas.nccl_nvls import channels_used
from costmodel.mathops import minimum

#: NCCL_BUFFSIZE's default (DEFAULT_BUFFSIZE, 1 << 22: init.cc) over NCCL_STEPS (8, device.h): a tree chunk
TREE_CHUNK = (4 * 1024 * 1024) // 8


def hops(ranks_per_node: int, nodes: int) -> tuple[int, int]:
    """(NVLink hops, network hops) a chunk crosses, up and back down: the chains of ``ranks_per_node`` GPUs and
    a binary tree over ``nodes`` (the trip the tuner's tree latency counts, tuning.cc: 2 ((p - 1) intra + log2i(N)
    inter))."""
    return 2 * (ranks_per_node - 1), 2 * (max(nodes, 1).bit_length() - 1)


def fill_us_per_byte(*, ranks_per_node: int, nodes: int, channels: int, nvlink_gbs: float, network_gbs: float) -> float:
    """Microseconds a channel's first chunk adds per byte: its size over every hop's per-channel speed but the
    slowest's (GB/s = 1e3 B/us). ``nvlink_gbs``: one GPU's NVLink; ``network_gbs``: what the tree's graph
    sends over a node's network (its channels x network speed); both shared by ``channels``. 0 where a
    speed is unknown (0)."""
    intra, inter = hops(ranks_per_node, nodes)
    if nvlink_gbs <= 0 or (inter and network_gbs <= 0) or channels <= 0 or intra + inter <= 1:
        return 0.0
    per_hop = [channels / nvlink_gbs] * intra + [channels / network_gbs] * inter  # us per KB: 1 / (GB/s per channel)
    return (sum(per_hop) - max(per_hop)) / 1e3


def fill_us(n_bytes, *, per_byte_us, channels: int):
    """The fill's time in microseconds: each busy channel's first chunk (its whole bytes if it has less than one
    chunk; channels as NCCL's planner splits an all-reduce, formulas/nccl_nvls.channels_used) at ``per_byte_us``."""
    _, per_channel = channels_used(n_bytes, channels)
    return per_byte_us * minimum(per_channel, TREE_CHUNK)
