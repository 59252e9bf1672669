"""What the kernel adds to NCCL's tuner time for one pick: the pipeline fills (formulas/nccl_nvls.py for NVLS and
NVLS-tree all-reduces, formulas/nccl_tree.py for Simple tree ones), and the record of one candidate (algorithm,
protocol) the tuner weighs. One function prices the fills for numbers (``nccl.choice``) and arrays
(``nccl_arrays.array_seconds``) alike."""

from __future__ import annotations

from typing import NamedTuple

from costmodel.formulas import nccl_nvls as nvls
from costmodel.formulas import nccl_tree as tree
from costmodel.formulas import nccl_tuner as nt
from costmodel.mathops import maximum, where


class Candidate(NamedTuple):
    """One (algorithm, protocol) the tuner would consider for an op on a group: what picks it, what times it and
    what its kernel adds."""

    latency_us: float  # the tuner's latency (the release that decides)
    bandwidth_gbs: float  # its bandwidth
    tree_protocol: str | None  # the protocol whose treeCorrectionFactor row applies (a tree all-reduce), else None
    plateau_bytes: int  # where the ring's Simple latency takes x 1.4 (0: never)
    timed_latency_us: float  # the latency the time takes (the newest costs, the measured hop)
    timed_bandwidth_gbs: float  # the bandwidth the time takes
    nvls_heads: int  # NVLS heads where an NVLS or NVLS-tree all-reduce adds its fill, else 0
    nvls_channels: int
    nodes: int
    algorithm: int  # its index in nccl_tuner.ALGORITHMS
    tree_fill_us_per_byte: float  # a Simple tree all-reduce's fill per byte of a channel's first chunk, else 0
    channels: int  # the communicator's channels (comm->nChannels)


def nvls_heads(coll: str, algo: str, topo: nt.Topology) -> int:
    """The NVLS heads (one per GPU of the node, graph/connect.cc:241-258) where the time adds the pipeline
    fill of an NVLS all-reduce (one node) or NVLS-tree one (several; formulas/nccl_nvls.py), else 0: the
    tuner's time stands."""
    nvls_here = (algo == "nvls" and topo.n_nodes == 1) or (algo == "nvls_tree" and topo.n_nodes > 1)
    return topo.max_local_ranks if nvls_here and coll == "all_reduce" else 0


def tree_fill_per_byte(coll: str, algo: str, proto: str, topo: nt.Topology) -> float:
    """Microseconds per byte of a channel's first chunk that a tree all-reduce with the Simple protocol adds to
    the tuner's time (formulas/nccl_tree.py), else 0: the tuner's time stands."""
    if (coll, algo, proto) != ("all_reduce", "tree", "Simple"):
        return 0.0
    return tree.fill_us_per_byte(ranks_per_node=topo.n_ranks // topo.n_nodes, nodes=topo.n_nodes,
                                 channels=topo.coll_channels, nvlink_gbs=topo.nvlink_gbs,
                                 network_gbs=topo.tree.n_channels * topo.tree.bw_inter_gbs, pattern=topo.tree.pattern)


def fills_us(n_bytes, pick):
    """Microseconds the pick's kernel adds to the tuner's time for ``n_bytes``: the NVLS fill where it has heads,
    the Simple tree's where it has a fill per byte, else 0. ``pick``: a :class:`Candidate`, of numbers or of arrays
    (one element per layout)."""
    heads, per_byte, out = pick.nvls_heads, pick.tree_fill_us_per_byte, 0.0
    if _any(heads):  # each fill is priced only where some pick has it (a sweep's arrays mostly have neither)
        fill = nvls.fill_us(n_bytes, heads=maximum(heads, 1), max_channels=maximum(pick.nvls_channels, 1),
                            bandwidth_gbs=pick.timed_bandwidth_gbs, nodes=pick.nodes)
        out = out + where(heads > 0, fill, 0.0)
    if _any(per_byte):
        out = out + tree.fill_us(n_bytes, per_byte_us=per_byte, channels=maximum(pick.channels, 1))
    return out


def _any(values) -> bool:
    """Whether a number, or any element of an array, is non-zero."""
    return bool(values.any()) if hasattr(values, "any") else bool(values)
