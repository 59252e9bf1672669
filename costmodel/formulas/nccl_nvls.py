"""NVLS all-reduce on one node: the pipeline fill NCCL's tuner leaves out (NCCL 2.26.2, ``git show v2.26.2-1:``).

The tuner prices NVLS as one latency plus S over one bandwidth (tuning.cc). The kernel
(src/device/all_reduce.h:388-455, single node) runs each channel's bytes as loops of ``heads`` chunks
through three warp groups in turn: scatter into the local NVLS buffer, ``multimem`` reduce and
broadcast on the chunk's owner, gather to the output. Three stages in a pipeline take two more loops'
time to fill and drain than their steady stream. The chunk shrinks with the channel's bytes
(calcCollChunking), so from 2 to 64 MiB a channel runs only 1 to 8 loops and the fill is a quarter to
twice the stream: the measured 8 x H100 logs run 15-33% slower there than the tuner's estimate.

Numbers and numpy arrays alike (``costmodel.mathops``); no constant here is fitted.
"""

from __future__ import annotations

from costmodel.mathops import ceil_div, maximum, minimum, where

#: scheduleCollTasksToPlan's least traffic per channel (enqueue.cc:497)
MIN_TRAFFIC_PER_CHANNEL = 16 * 1024
#: bytes of traffic per byte of an all-reduce (enqueue.cc:66-68)
ALL_REDUCE_TRAFFIC = 2
#: the largest NVLS chunk, comm->nvlsChunkSize (transport/nvls.cc:149, :367; enqueue.cc:1878-1880), below
#: the Simple step of 4 MiB / NCCL_STEPS = 512 KiB (init.cc:608)
NVLS_CHUNK = 128 * 1024
#: scatter, reduce + broadcast, gather: the single-node NVLS all-reduce's warp groups (all_reduce.h:393-397)
PIPELINE_STAGES = 3


def channels_used(n_bytes, max_channels):
    """(channels the planner gives one all-reduce of ``n_bytes``, bytes on the busiest): at least 16 KiB of
    traffic per channel, in cells of 8 KiB of data (scheduleCollTasksToPlan, enqueue.cc:505-597)."""
    traffic = maximum(MIN_TRAFFIC_PER_CHANNEL, ALL_REDUCE_TRAFFIC * n_bytes)
    per_channel_traffic = maximum(MIN_TRAFFIC_PER_CHANNEL, traffic // max_channels)  # enqueue.cc:530
    cell = ceil_div(ceil_div(MIN_TRAFFIC_PER_CHANNEL, ALL_REDUCE_TRAFFIC), 16) * 16  # enqueue.cc:569
    cells = maximum(ceil_div(n_bytes, cell), 1)
    cells_per_channel = minimum(cells, ceil_div(per_channel_traffic, cell * ALL_REDUCE_TRAFFIC))
    return minimum(max_channels, ceil_div(cells, cells_per_channel)), minimum(n_bytes, cells_per_channel * cell)


def chunk_bytes(channel_bytes, heads):
    """calcCollChunking for NVLS, run per channel on its bytes with concurrentOps = 1 x nHeads
    (enqueue.cc:623-631, 1884-1887): 128 KiB, halved to 64, 32 and 16 KiB below 64, 8 and 2 loops' worth."""
    c = where(channel_bytes < 64 * heads * NVLS_CHUNK, NVLS_CHUNK // 2, NVLS_CHUNK)
    c = where((channel_bytes < 8 * heads * c) & (c > 32768), 32768, c)
    return where((channel_bytes < 2 * heads * c) & (c > 16384), 16384, c)  # multiples of the 512 B grain


def fill_bytes(n_bytes, *, heads, max_channels):
    """Bytes whose time the pipeline's fill and drain add: (stages - 1) loops of ``heads`` chunks on each
    busy channel (a short channel's whole bytes)."""
    used, per_channel = channels_used(n_bytes, max_channels)
    return (PIPELINE_STAGES - 1) * minimum(per_channel, heads * chunk_bytes(per_channel, heads)) * used


def fill_us(n_bytes, *, heads, max_channels, bandwidth_gbs):
    """The fill's time in microseconds at the tuner's NVLS bandwidth (GB/s = 1e3 B/us, as tuning.cc's time)."""
    return fill_bytes(n_bytes, heads=heads, max_channels=max_channels) / (1e3 * bandwidth_gbs)
