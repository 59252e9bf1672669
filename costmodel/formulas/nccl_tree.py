"""Tree all-reduce with the Simple protocol: the pipeline fill NCCL's tuner leaves out (NCCL 2.26.2,
``git show v2.26.2-1:``; the tree kernel and its chunk are the same in 2.20.3).

The tuner prices a tree all-reduce as its latency (one message's trip, tuning.cc) plus S over the tree's
bandwidth: a pipeline of infinitely small pieces. The kernel moves each channel's bytes in chunks of one buffer
step (calcCollChunking: chunkSteps = 1 for trees, so a chunk is NCCL_BUFFSIZE / NCCL_STEPS = 4 MiB / 8 = 512 KiB;
aws-ofi-nccl sets NCCL_BUFFSIZE = 8 MiB on p4d, p4de and p5 from its v1.16, which doubles it: not the plugin of the
p4de log), and with the Simple protocol a chunk is one slice (ProtoSimple<1, 1> in all_reduce.h runTreeSplit;
prims_simple.h genericOp: a slice is posted to the next rank only once it is whole). Each hop therefore stores
and forwards a whole chunk: a chunk crosses the NVLink hops of the chains and the network hops of the tree over
nodes in turn (:func:`hops`), and only the slowest hop streams. So the first chunk of every channel takes its size
over every hop but the slowest on top of the tuner's time: from 1 to 16 MiB (one or a few chunks a channel) that is
a third of the time on 2 x 8 A100 over EFA.

A hop's speed is one channel's share: the GPU's NVLink (as NCCL's topology counts it) over the communicator's
channels, all of which move their first chunk at once; the network, the tree graph's channels x their network
speed over the same channels. LL and LL128 forward 8- and 128-byte lines as they arrive: no fill.

The tuner also scales a tree's bandwidth down at mid sizes (treeCorrectionFactor, tuning.cc: 0.5 to 0.7 from 1
to 16 MiB), an empirical factor for what its model misses there, which may be this fill in part: the time keeps
both, the factor as NCCL's estimate and the fill from the kernel's chunking. On 2 x 8 A100 the 4 MiB row is then
27% slow, the 2 and 8 MiB ones within 6%.

Numbers and numpy arrays alike (``costmodel.mathops``); no constant here is fitted.
"""

from __future__ import annotations

from costmodel.formulas.nccl_common import PATTERN_BALANCED_TREE, PATTERN_SPLIT_TREE, PATTERN_TREE, channels_used
from costmodel.mathops import minimum

#: NCCL_BUFFSIZE's default (DEFAULT_BUFFSIZE, 1 << 22: init.cc) over NCCL_STEPS (8, device.h): a tree chunk
TREE_CHUNK = (4 * 1024 * 1024) // 8


def depth(nodes: int) -> int:
    """Levels of NCCL's binary tree over ``nodes`` below its root: ceil(log2 N) (trees.cc ncclGetBtree: the root's
    one child is the highest power of two below N, and each rank's first child is rank - lowbit)."""
    return (max(nodes, 1) - 1).bit_length()


def joins(nodes: int, pattern: int) -> int:
    """Nodes on the tree's deepest path whose network child enters its chain one GPU below the GPU that sends to
    the parent: connect.cc (setTreeUp/Down's treeToChild0/1) puts child 0 on treeIntra[1] unless the pattern is
    NCCL_TOPO_PATTERN_TREE, child 1 there only in SPLIT_TREE; the deepest path descends through first children
    (rank - lowbit), the root's only child being its second."""
    levels = depth(nodes)
    return {PATTERN_TREE: 0, PATTERN_BALANCED_TREE: max(levels - 1, 0), PATTERN_SPLIT_TREE: levels}.get(pattern, 0)


def hops(ranks_per_node: int, nodes: int, pattern: int = PATTERN_TREE) -> tuple[int, int]:
    """(NVLink hops, network hops) a chunk crosses on the tree's longest path, up and back down: the leaf node's
    chain of ``ranks_per_node`` GPUs, ceil(log2 N) network levels, and one NVLink hop more at each :func:`joins`
    (the tuner's latency counts 2 ((p - 1) intra + log2i(N) inter), tuning.cc: the same trip at two nodes)."""
    return 2 * (ranks_per_node - 1 + joins(nodes, pattern)), 2 * depth(nodes)


def fill_us_per_byte(*, ranks_per_node: int, nodes: int, channels: int, nvlink_gbs: float, network_gbs: float,
                     pattern: int = PATTERN_TREE) -> float:
    """Microseconds a channel's first chunk adds per byte: its size over every hop's per-channel speed but the
    slowest's (GB/s = 1e3 B/us). ``nvlink_gbs``: one GPU's NVLink; ``network_gbs``: what the tree's graph
    sends over a node's network (its channels x network speed); both shared by ``channels``. 0 where a
    speed is unknown (0)."""
    intra, inter = hops(ranks_per_node, nodes, pattern)
    if nvlink_gbs <= 0 or (inter and network_gbs <= 0) or channels <= 0 or intra + inter <= 1:
        return 0.0
    per_hop = [channels / nvlink_gbs] * intra + [channels / network_gbs] * inter  # us per KB: 1 / (GB/s per channel)
    return (sum(per_hop) - max(per_hop)) / 1e3


def fill_us(n_bytes, *, per_byte_us, channels: int):
    """The fill's time in microseconds: each busy channel's first chunk (its whole bytes if it has less than one
    chunk; channels as NCCL's planner splits an all-reduce, formulas/nccl_common.channels_used) at ``per_byte_us``."""
    _, per_channel = channels_used(n_bytes, channels)
    return per_byte_us * minimum(per_channel, TREE_CHUNK)
