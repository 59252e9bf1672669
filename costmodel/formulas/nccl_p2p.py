"""How NCCL (v2.26.2-1) runs send/recv: the protocol and the channels one p2p op takes. NCCL has no cost table
for p2p work (formulas/nccl_tuner.py prices the collectives); these are its enqueue rules, transcribed.

Line numbers cite ``git show v2.26.2-1:<file>`` of github.com/NVIDIA/nccl.
"""

from __future__ import annotations

# NCCL_P2P_LL_THRESHOLD default, enqueue.cc:740
P2P_LL_THRESHOLD_BYTES = 16384


def p2p_protocol(*, n_bytes, n_channels_max, ll_threshold_bytes=P2P_LL_THRESHOLD_BYTES):
    """Send/recv protocol: LL up to nChannelsMax x NCCL_P2P_LL_THRESHOLD bytes, else Simple (LL128 is
    never used for p2p) (enqueue.cc:740, 779, 792-793; nChannelsMax = p2pnChannelsPerPeer, :988)."""
    return "LL" if n_bytes <= n_channels_max * ll_threshold_bytes else "Simple"


def p2p_op_channels(*, n_bytes, n_channels_min, n_channels_max, step_bytes, n_nodes):
    """Channels one send (or recv) is split over: parts of [step/8, 32 step] bytes on one node,
    [step/2, step] across nodes, doubling from nChannelsMin up to nChannelsMax (enqueue.cc:848-858;
    step = p2pChunkSize for Simple: 512 KiB on all-NVLink nodes, 128 KiB across nodes, init.cc:613-627)."""
    if n_bytes == 0:
        return 1
    min_part = step_bytes // 2 if n_nodes > 1 else step_bytes // 8
    max_part = step_bytes if n_nodes > 1 else step_bytes * 32
    channels = min(n_channels_min, -(-n_bytes // min_part))
    part = max(min_part, -(-n_bytes // channels))
    while part > max_part and channels <= n_channels_max // 2:
        channels *= 2
        part = -(-n_bytes // channels)
    return channels
