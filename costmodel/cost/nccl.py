"""A collective's time as NCCL's tuner prices it: the fastest (algorithm, protocol) for each buffer.

For GPUs whose spec names an NCCL topology (``[nccl]`` in the hardware file), all-reduce,
all-gather, reduce-scatter, broadcast and reduce cost what ``formulas/nccl_tuner.py`` (NCCL
2.26.2's own model) says for the group: ring, tree or NVLS, with LL, LL128 or Simple, whichever it
estimates fastest at that size, as NCCL picks by default (``auto``), or the fastest protocol of
the one algorithm a log or layout names. Like the rest of the aggregator, one object serves three
uses: numbers (the tuner's choice), arrays (candidates priced once per distinct group shape, the
fastest taken per element), letters (an opaque ``t_NCCL`` that evaluates once numbers replace them).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field, replace

from costmodel.errors import CostModelError
from costmodel.formulas import nccl_nvls as nvls
from costmodel.formulas import nccl_topologies as nx
from costmodel.formulas import nccl_tuner as nt
from costmodel.mathops import above_one, family, maximum, where

#: cost4d's collective names -> NCCL's functions the tuner prices
TUNED = {"all-reduce": "all_reduce", "all-gather": "all_gather", "reduce-scatter": "reduce_scatter",
         "broadcast": "broadcast", "reduce": "reduce"}
#: topologies a spec may name: (one node, several nodes) as NCCL's search builds them
PRESETS = {"hgx-h100": (nx.H100_1NODE, nx.H100_2NODES), "aws-p5": (nx.H100_1NODE, nx.H100_2NODES_EFA),
           "hgx-a100": (nx.A100_1NODE, nx.A100_2NODES_IB), "aws-p4de": (nx.A100_1NODE, nx.A100_2NODES_EFA4)}
#: per-GPU bandwidth (GB/s) NCCL's topology gives point-to-point traffic (all-to-all, sends, gather,
#: scatter): (inside the node, out to the network), each the narrowest link of the path
P2P_GBS = {
    "hgx-h100": (370.8, 48.0),  # 18 NVLinks x SM90_NVLINK_BW 20.6 (topo.h:17, topo.cc:586-587); a 50 GB/s
                                # NIC behind PCIe Gen5 x16 = 48 GB/s (topo.cc:408-411, 476)
    "aws-p5": (370.8, 48.0),    # as hgx-h100: 4 x 12.5 GB/s EFA per GPU behind the same PCIe link (estimate)
    "hgx-a100": (240.0, 24.0),  # 12 NVLinks x SM80_NVLINK_BW 20 (topo.h:16); HDR 25 behind PCIe Gen4 24
    "aws-p4de": (240.0, 6.25),  # one 12.5 GB/s EFA NIC per 2 GPUs (aws-ofi-nccl p4de-24xl-topo.xml)
}
#: algorithm names in logs and calibrations -> the tuner's
ALGORITHM_NAMES = {"ring": "ring", "tree": "tree", "nvls": "nvls", "nvlstree": "nvls_tree", "pat": "pat",
                   "collnet": "collnet_direct", "collnetdirect": "collnet_direct", "collnetchain": "collnet_chain"}


def as_nccl_sees(preset: str, fast, slow):
    """The node's and the network's levels with the per-GPU bandwidth NCCL's topology gives them
    (P2P_GBS) in place of the datasheet's x efficiency: what point-to-point traffic gets."""
    inside, out = P2P_GBS[preset]
    return (fast.model_copy(update={"bandwidth_bytes_per_s": inside * 1e9, "efficiency": None}),
            slow.model_copy(update={"bandwidth_bytes_per_s": out * 1e9, "efficiency": None}))


def topology(preset: str, nodes: int, per_node: int) -> nt.Topology:
    """The communicator NCCL builds for ``nodes`` x ``per_node`` GPUs of a preset system. The search
    was derived for 8 GPUs per node; a group with fewer GPUs per node keeps the channels and gets
    per_node/8 of the per-node network bandwidth (each GPU brings its own NIC) (an estimate). The
    multi-node graph's intra-node bandwidth, which the tuner uses on two nodes (its search found it on
    rings through the NICs), is scaled alike: one GPU per node must not get the whole node's network."""
    one, many = PRESETS[preset]
    if nodes == 1:
        return replace(one, n_ranks=per_node, max_local_ranks=per_node)
    share = min(1.0, per_node / 8)
    scaled = {name: replace(getattr(many, name), bw_inter_gbs=getattr(many, name).bw_inter_gbs * share,
                            bw_intra_gbs=getattr(many, name).bw_intra_gbs * share)
              for name in ("ring", "tree", "nvls")}
    return replace(many, n_nodes=nodes, n_ranks=nodes * per_node, max_local_ranks=per_node, **scaled)


def restricted(topo: nt.Topology, algorithm: str) -> nt.Topology:
    """The topology with NCCL_ALGO set to ``algorithm`` ('auto': NCCL's own choice among all)."""
    if algorithm == "auto":
        return topo
    return replace(topo, algorithms_env=frozenset({ALGORITHM_NAMES.get(algorithm, algorithm)}))


def with_hop(topo: nt.Topology, hop_us: float | None) -> nt.Topology:
    """The topology with each network hop taking ``hop_us`` (measured) instead of the latency the NIC
    plugin declares: NCCL chooses with the declared one, the wire takes the measured one."""
    if hop_us is None:
        return topo
    return replace(topo, **{name: replace(getattr(topo, name), latency_inter_us=hop_us)
                            for name in ("ring", "tree", "nvls", "collnet_direct", "collnet_chain")})


def choice(preset: str, op: str, buffer_bytes: float, nodes: int, per_node: int, algorithm: str = "auto",
           hop_us: float | None = None):
    """(algorithm, protocol, seconds) NCCL's tuner picks for one buffer (one rank: free); with a measured
    network ``hop_us``, the pick timed with it."""
    return _choice(preset, op, int(buffer_bytes), int(nodes), int(per_node), algorithm, hop_us)


@functools.lru_cache(maxsize=65536)  # a long log asks for the same few sizes and groups again and again
def _choice(preset: str, op: str, buffer_bytes: int, nodes: int, per_node: int, algorithm: str, hop_us):
    if nodes * per_node <= 1:
        return "none", "none", 0.0
    topo = restricted(topology(preset, nodes, per_node), algorithm)
    try:  # without NCCL's one-hour sentinel, so huge buffers price like the array path
        algo, proto, seconds = nt.choose(TUNED[op], buffer_bytes, topo, cap_us=math.inf)
    except ValueError:
        raise CostModelError(f"NCCL has no {algorithm} algorithm for {op} on {nodes} x {per_node} GPUs "
                             "(its tuner disables it there)") from None
    heads = nvls_heads(TUNED[op], algo, topo)
    if heads:
        return algo, proto, seconds + 1e-6 * nvls.fill_us(
            buffer_bytes, heads=heads, max_channels=topo.nvls_channels,
            bandwidth_gbs=nt.tuned_bandwidth_gbs(coll=TUNED[op], algo=algo, proto=proto, topo=topo))
    if hop_us is None or nodes == 1:
        return algo, proto, seconds
    return algo, proto, 1e-6 * nt.algo_time_us(coll=TUNED[op], algo=algo, proto=proto, n_bytes=buffer_bytes,
                                               topo=with_hop(topo, hop_us))


def nvls_heads(coll: str, algo: str, topo: nt.Topology) -> int:
    """The NVLS heads (one per GPU of the node, graph/connect.cc:241-258) where the time adds the NVLS
    all-reduce's pipeline fill (formulas/nccl_nvls.py: one node), else 0: the tuner's time stands."""
    return topo.n_ranks if algo == "nvls" and coll == "all_reduce" and topo.n_nodes == 1 else 0


def candidates(preset: str, op: str, nodes: int, per_node: int, algorithm: str, hop_us=None) -> list[tuple]:
    """(latency us, bandwidth GB/s, tree-corrected, plateau bytes or 0, timed latency us, NVLS heads or 0,
    NVLS channels) of every (algorithm, protocol) the tuner would consider: NCCL's estimate = latency (x 1.4 past the
    plateau) + S / (1000 B x correction) picks one; the timed latency (a measured network hop) replaces
    the latency in its time, and NVLS heads add the pipeline fill."""
    topo = restricted(topology(preset, nodes, per_node), algorithm)
    timed = with_hop(topo, hop_us)
    coll, out = TUNED[op], []
    for algo in nt.ALGORITHMS:
        if not nt.is_candidate(coll=coll, algo=algo, topo=topo):
            continue
        for proto in nt.PROTOCOLS:
            bandwidth = nt.tuned_bandwidth_gbs(coll=coll, algo=algo, proto=proto, topo=topo)
            if bandwidth > 0:
                plateau = (algo == "ring" and proto == "Simple" and topo.n_nodes > 1 and coll == "all_reduce")
                out.append((nt.latency_us(coll=coll, algo=algo, proto=proto, topo=topo), bandwidth,
                            proto if algo == "tree" and coll == "all_reduce" else None,
                            64 * topo.coll_channels * topo.n_ranks if plateau else 0,
                            nt.latency_us(coll=coll, algo=algo, proto=proto, topo=timed),
                            nvls_heads(coll, algo, topo), topo.nvls_channels))
    return out


def tuned_cost(hardware, op: str, nodes, per_node, algorithm: str = "auto", memo: dict | None = None) -> "TunedCost":
    """NCCL's tuner for ``op`` on a spec's system: its topology preset, launch floor and measured hop
    (``memo``: the placement's, :attr:`TunedCost.memo`)."""
    spec = hardware.nccl
    hop = None if spec.network_latency_s is None else spec.network_latency_s * 1e6
    return TunedCost(spec.topology, op, nodes, per_node, algorithm, spec.launch_s or 0.0, hop_us=hop, memo=memo)


@dataclass(frozen=True)
class TunedCost:
    """What ``network.link_cost`` returns for a tuned collective: ``seconds(S)`` for any family."""

    preset: str
    op: str
    nodes: object
    per_node: object
    algorithm: str = "auto"
    launch: float = 0.0  # no collective over 2 or more ranks takes less (the spec's launch_s)
    offset: float = 0.0  # a calibration of model nccl: t = offset + scale x the tuner's time
    scale: float = 1.0
    hop_us: float | None = None  # a measured network hop, where it differs from the declared one
    #: arrays: what pricing indexes once per group for every op on it (network.Placement.memo: its distinct
    #: group shapes, each buffer's distinct sizes among them); None: this cost's own
    memo: dict | None = field(default=None, compare=False, repr=False)

    def combos(self, buffer_bytes, shape: tuple):
        """(groups: (nodes, GPUs per node, free) of each distinct group of an array; of each distinct (group,
        whole bytes) its group's index and its bytes; each element's index among those), once per group and
        buffer for every op on them: the rows of a step price one buffer with several ops."""
        memo = self.memo if self.memo is not None else self.__dict__.setdefault("_own_memo", {})  # frozen: a __dict__ still
        groups = _once(memo, ("groups", shape), (self.nodes, self.per_node),
                       lambda: _group_index(self.nodes, self.per_node, shape))
        return _once(memo, ("combos", shape), (buffer_bytes, self.nodes, self.per_node),
                     lambda: _combo_index(groups, buffer_bytes, shape))

    def seconds(self, buffer_bytes):
        kind = family(buffer_bytes, self.nodes, self.per_node)
        if kind == "number":
            tuned = choice(self.preset, self.op, buffer_bytes, self.nodes, self.per_node, self.algorithm,
                           self.hop_us)[2]
            return self.offset + self.scale * max(tuned, self.launch) if self.nodes * self.per_node > 1 else 0.0
        if kind == "numpy":
            return _array_seconds(self, buffer_bytes)
        tuned = nccl_seconds(self.preset, self.op, self.algorithm, buffer_bytes, self.nodes, self.per_node,
                             self.hop_us)
        tuned = maximum(tuned, self.launch) if self.launch else tuned
        return self.offset + self.scale * tuned if (self.offset, self.scale) != (0.0, 1.0) else tuned


@dataclass(frozen=True)
class Calibrated:
    """NCCL's tuner with fitted costs (network.LinkCost, or None) for groups inside one node and across
    nodes: a calibration prices the groups of its level, the tuner the others."""

    tuned: TunedCost
    domains: object
    ranks: object
    inside: object = None
    across: object = None

    def seconds(self, buffer_bytes):
        inside = (self.inside or self.tuned).seconds(buffer_bytes)
        across = (self.across or self.tuned).seconds(buffer_bytes)
        return where(above_one(self.ranks), where(self.domains > 1, across, inside), 0.0)


def _once(memo: dict, key: tuple, held: tuple, compute):
    """compute(), once per ``key`` and objects ``held`` (by identity: the memo keeps them, so that no id
    is reused meanwhile)."""
    key = (*key, *map(id, held))
    hit = memo.get(key)
    if hit is None or any(a is not b for a, b in zip(hit[0], held)):
        hit = memo[key] = held, compute()
    return hit[1]


def _group_index(nodes, per_node, shape: tuple):
    """((nodes, GPUs per node, free) of each distinct group, each element's index among them): the counts as
    the numbers path's int(), ``free`` where the group has one rank (nothing to send)."""
    import numpy as np

    nodes, per_node = (np.broadcast_to(np.asarray(v), shape).ravel() for v in (nodes, per_node))
    free = nodes * per_node <= 1
    nodes, per_node = nodes.astype(np.int64), per_node.astype(np.int64)
    wide = int(per_node.max()) + 1 if per_node.size else 1  # a key per group: small integers, no sort
    keys, at = distinct((nodes * wide + per_node) * 2 + free)
    return tuple((int(k) // 2 // wide, int(k) // 2 % wide, bool(k % 2)) for k in keys), at


def _combo_index(indexed_groups: tuple, buffer_bytes, shape: tuple):
    """(groups, the group index and whole bytes of each distinct (group, size), each element's index among them)."""
    import numpy as np

    groups, at = indexed_groups
    if np.ndim(buffer_bytes) == 0:  # one size for every layout: a combination per group
        return groups, np.arange(len(groups)), np.full(len(groups), np.floor(float(buffer_bytes))), at
    whole = np.floor(np.broadcast_to(np.asarray(buffer_bytes, dtype=float), shape).ravel())  # as int(S)
    sizes, size_at = distinct(whole)
    combos, back = distinct(at * len(sizes) + size_at)
    return groups, combos // len(sizes), sizes[combos % len(sizes)], back


def distinct(values):
    """(the distinct values, sorted, and each element's index among them) of a 1-d array that repeats few
    values. Small non-negative integers (group keys, index pairs) are marked in a table; others go through
    numpy's hash-based unique (2.3 and later; sorting before) and a binary search. numpy's own index
    (unique's return_inverse) argsorts the whole array, several times slower on such arrays."""
    import numpy as np

    if values.dtype.kind in "iu" and values.size and 0 <= values.min() and values.max() < 4 * values.size:
        seen = np.zeros(int(values.max()) + 1, dtype=bool)
        seen[values] = True
        return np.flatnonzero(seen), (np.cumsum(seen) - 1)[values]
    found = np.unique(values)
    return found, np.searchsorted(found, values)


def _array_seconds(cost: TunedCost, buffer_bytes):
    """One element per layout: candidates priced once per distinct (nodes, GPUs per node), laid out as
    K slots (unused slots infinite), the fastest slot taken once per distinct (group, size) and
    spread back: a sweep repeats few groups and sizes."""
    import numpy as np

    shape = np.broadcast_shapes(np.shape(buffer_bytes), np.shape(cost.nodes), np.shape(cost.per_node))
    groups, group, s, back = cost.combos(buffer_bytes, shape)
    table = _slots(cost.preset, cost.op, cost.algorithm, tuple((n, g) for n, g, _ in groups), cost.hop_us)
    latency, bandwidth, tree, plateau, timed, heads, channels = (column[:, group] for column in table)  # K x distinct (group, size)
    past = (plateau > 0) & (s >= plateau)
    factors = np.asarray(nt.TREE_CORRECTION_FACTOR + ((1.0,) * len(nt.TREE_CORRECTION_FACTOR[0]),))
    bucket = np.floor(np.log2(np.maximum(np.floor(s / 64), 0.5))).astype(int)
    inside = (bucket >= 0) & (bucket < factors.shape[1])
    correction = np.where(inside, factors[tree, np.clip(bucket, 0, factors.shape[1] - 1)], 1.0)
    transfer = s / (1000 * bandwidth * correction)
    pick = np.argmin(np.where(past, latency * 1.4, latency) + transfer, axis=0)  # NCCL's choice
    picked = (pick, np.arange(pick.size))  # its slot in each column
    chosen = (np.where(past, timed * 1.4, timed) + transfer)[picked]
    picked_heads, picked_channels, picked_bandwidth = heads[picked], channels[picked], bandwidth[picked]
    if picked_heads.any():
        fill = nvls.fill_us(s, heads=np.maximum(picked_heads, 1), max_channels=np.maximum(picked_channels, 1),
                            bandwidth_gbs=picked_bandwidth)
        chosen = chosen + np.where(picked_heads > 0, fill, 0.0)
    free = np.array([one for _, _, one in groups], dtype=bool)[group]
    priced = np.where(free, 0.0, cost.offset + cost.scale * np.maximum(chosen * 1e-6, cost.launch))
    return priced[back].reshape(shape)


@functools.lru_cache(maxsize=256)
def _slots(preset: str, op: str, algorithm: str, pairs: tuple, hop_us=None) -> tuple:
    """(latency, bandwidth, tree-protocol row, plateau bytes, timed latency, NVLS heads, NVLS channels), each
    K x pairs: K candidate slots per (nodes, GPUs per node); an unused slot has infinite latency. Tree row 3
    is 'no correction'."""
    import numpy as np

    found = [candidates(preset, op, int(n), int(g), algorithm, hop_us if n > 1 else None) if n * g > 1 else []
             for n, g in pairs]
    k = max(1, max(len(c) for c in found))
    latency, bandwidth = np.full((k, len(pairs)), np.inf), np.ones((k, len(pairs)))
    tree, plateau, timed = np.full((k, len(pairs)), len(nt.PROTOCOLS)), np.zeros((k, len(pairs))), np.full(
        (k, len(pairs)), np.inf)
    heads, channels = np.zeros((k, len(pairs)), dtype=int), np.zeros((k, len(pairs)), dtype=int)
    for j, rows in enumerate(found):
        for i, (lat, bw, tree_proto, plat, lat_timed, head_count, channel_count) in enumerate(rows):
            latency[i, j], bandwidth[i, j], plateau[i, j], timed[i, j] = lat, bw, plat, lat_timed
            heads[i, j], channels[i, j] = head_count, channel_count
            tree[i, j] = nt.PROTOCOLS.index(tree_proto) if tree_proto else len(nt.PROTOCOLS)
    return latency, bandwidth, tree.astype(int), plateau, timed, heads, channels


def nccl_seconds(preset: str, op: str, algorithm: str, buffer_bytes, nodes, per_node, hop_us=None):
    """t_NCCL_<op>(S, N, g): an opaque function of letters that becomes the tuner's number once they are
    numbers (substitution), or its array once they are arrays (lambdify)."""
    return _function(preset, op, algorithm, hop_us)(buffer_bytes, nodes, per_node)


_FUNCTIONS: dict = {}


def _function(preset: str, op: str, algorithm: str, hop_us=None):
    """One sympy Function class per (preset, op, algorithm, hop), made once (sympy compares by class)."""
    key = (preset, op, algorithm, hop_us)
    if key not in _FUNCTIONS:
        import sympy

        def evaluate(cls, size, n, g):
            if all(arg.is_number for arg in (size, n, g)):
                return sympy.Float(choice(preset, op, float(size), int(n), int(g), algorithm, hop_us)[2])
            return None

        name = f"t_NCCL_{op.replace('-', '_')}" + ("" if algorithm == "auto" else f"_{algorithm}")
        _FUNCTIONS[key] = type(name, (sympy.Function,), {
            "eval": classmethod(evaluate),
            "_imp_": staticmethod(lambda size, n, g: TunedCost(preset, op, n, g, algorithm, hop_us=hop_us).seconds(size))})
    return _FUNCTIONS[key]
