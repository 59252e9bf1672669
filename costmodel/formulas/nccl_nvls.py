"""NVLS and NVLS-tree all-reduce: the pipeline fill NCCL's tuner leaves out (NCCL 2.26.2, ``git show v2.26.2-1:``).

The tuner prices NVLS as one latency plus S over one bandwidth (tuning.cc). The kernel
(src/device/all_reduce.h:388-455, single node) runs each channel's bytes as loops of ``heads`` chunks
through three warp groups in turn: scatter into the local NVLS buffer, ``multimem`` reduce and
broadcast on the chunk's owner, gather to the output. Three stages in a pipeline take two more loops'
time to fill and drain than their steady stream. The chunk shrinks with the channel's bytes
(calcCollChunking), so from 2 to 64 MiB a channel runs only 1 to 8 loops and the fill is a quarter to
twice the stream: the measured 8 x H100 logs run 15-33% slower there than the tuner's estimate.

Across nodes NVLS-tree (all_reduce.h:521-626) adds a stage: a leaf node's ranks scatter, reduce and send
up the network tree, receive and broadcast, and gather: four warp groups, three loops of fill. The
planner splits it like NVLS (enqueue.cc:371-376: it counts as NVLS), with its own chunk rule.

Numbers and numpy arrays alike (``costmodel.mathops``); no constant here is fitted.
"""

from __future__ import annotations

from costmodel.formulas.nccl_common import channels_used
from costmodel.mathops import minimum, where

#: the largest NVLS chunk, comm->nvlsChunkSize (transport/nvls.cc:149, :367; enqueue.cc:1878-1880), below
#: the Simple step of 4 MiB / NCCL_STEPS = 512 KiB (init.cc:608)
NVLS_CHUNK = 128 * 1024
#: scatter, reduce + broadcast, gather: the single-node NVLS all-reduce's warp groups (all_reduce.h:393-397)
PIPELINE_STAGES = 3
#: NVLS-tree on a leaf node: scatter, reduce + send up, receive + broadcast, gather (all_reduce.h:531-535)
TREE_PIPELINE_STAGES = 4


def chunk_bytes(channel_bytes, heads):
    """calcCollChunking for NVLS, run per channel on its bytes with concurrentOps = 1 x nHeads
    (enqueue.cc:623-631, 1884-1887): 128 KiB, halved to 64, 32 and 16 KiB below 64, 8 and 2 loops' worth."""
    c = where(channel_bytes < 64 * heads * NVLS_CHUNK, NVLS_CHUNK // 2, NVLS_CHUNK)
    c = where((channel_bytes < 8 * heads * c) & (c > 32768), 32768, c)
    return where((channel_bytes < 2 * heads * c) & (c > 16384), 16384, c)  # multiples of the 512 B grain


def tree_chunk_bytes(channel_bytes, heads, nodes):
    """calcCollChunking for NVLS-tree (enqueue.cc:1888-1899): 128 KiB, 64 KiB on 4 or more nodes
    (NCCL_NVLSTREE_MAX_CHUNKSIZE unset, :1813, :1894-1895), halved to 64 and 32 KiB below 4 and 1 loops'
    worth (its 256 and 128 KiB steps cannot apply from there)."""
    c = where(nodes >= 4, NVLS_CHUNK // 2, NVLS_CHUNK)
    c = where((channel_bytes < 4 * heads * c) & (c > 65536), 65536, c)
    return where((channel_bytes < heads * c) & (c > 32768), 32768, c)


def fill_bytes(n_bytes, *, heads, max_channels, nodes=1):
    """Bytes whose time the pipeline's fill and drain add: (stages - 1) loops of ``heads`` chunks on each
    busy channel (a short channel's whole bytes); NVLS on one node, NVLS-tree on ``nodes`` > 1."""
    used, per_channel = channels_used(n_bytes, max_channels)
    tree = nodes > 1
    chunk = where(tree, tree_chunk_bytes(per_channel, heads, nodes), chunk_bytes(per_channel, heads))
    stages = where(tree, TREE_PIPELINE_STAGES, PIPELINE_STAGES)
    return (stages - 1) * minimum(per_channel, heads * chunk) * used


def fill_us(n_bytes, *, heads, max_channels, bandwidth_gbs, nodes=1):
    """The fill's time in microseconds at the tuner's bandwidth (GB/s = 1e3 B/us, as tuning.cc's time)."""
    return fill_bytes(n_bytes, heads=heads, max_channels=max_channels, nodes=nodes) / (1e3 * bandwidth_gbs)
