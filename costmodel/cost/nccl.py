"""A collective's time as NCCL's tuner prices it: the fastest (algorithm, protocol) for each buffer.

For GPUs whose spec names an NCCL topology (``[nccl]`` in the hardware file), all-reduce,
all-gather, reduce-scatter, broadcast and reduce cost what ``formulas/nccl_tuner.py`` (NCCL
2.26.2's own model) says for the group: ring, tree or NVLS, with LL, LL128 or Simple, whichever it
estimates fastest at that size, as NCCL picks by default (``auto``), or the fastest protocol of
the one algorithm a log or layout names. Like the rest of the aggregator, one object serves three
uses: numbers (the tuner's choice), arrays (candidates priced once per distinct group shape, the
fastest taken per element: ``nccl_arrays.py``), letters (an opaque ``t_NCCL`` that evaluates once
numbers replace them).
"""

from __future__ import annotations

import functools
import math
from dataclasses import field, replace

from costmodel.errors import CostModelError
from costmodel.cost.nccl_fills import Candidate, fills_us, nvls_heads, tree_fill_per_byte
from costmodel.formulas import nccl_topologies as nx
from costmodel.formulas import nccl_versions as nv
from costmodel.formulas import nccl_tuner as nt
from costmodel.mathops import above_one, family, maximum, where
from costmodel.record import record

#: cost4d's collective names -> NCCL's functions the tuner prices
TUNED = {"all-reduce": "all_reduce", "all-gather": "all_gather", "reduce-scatter": "reduce_scatter",
         "broadcast": "broadcast", "reduce": "reduce"}
#: NCCL_PROTO=simple, which aws-ofi-nccl sets when the EFA endpoint cannot deliver 128-byte stores in order
#: (v1.8.1 src/platform-aws.c configure_nccl_proto, called at :620-632 after the
#: FI_OPT_EFA_SENDRECV_IN_ORDER_ALIGNED_128_BYTES check at :553-556): p4de's 8 GPUs over 4 NICs take the SENDRECV
#: protocol (src/nccl_ofi_net.c:978-986), whose EFA device lacks that ordering (a p4d log in aws/aws-ofi-nccl#715:
#: "Setting NCCL_PROTO to simple"); p5's RDMA protocol is exempt (platform-aws.c:594-602)
SIMPLE_ONLY = frozenset({"Simple"})
#: topologies a spec may name (formulas/nccl_topologies.BUILDERS: the graphs NCCL's search builds for a
#: node's GPUs)
PRESETS = tuple(nx.BUILDERS)
#: what a system's NIC plugin sets in NCCL's environment
PLUGIN_ENV = {"aws-p4de": {"protocols_env": SIMPLE_ONLY}}
#: per-GPU bandwidth (GB/s) NCCL's topology gives point-to-point traffic (all-to-all, sends, gather,
#: scatter): (inside the node: the GPU's NVLink as the graphs count it, out to the network: the narrowest link of
#: the path, the NIC's share or the PCIe link it sits behind), from the presets' own figures
P2P_GBS = {preset: (one(8).nvlink_gbs, min(nx.NIC_BYTES_PER_S[preset], nx.NIC_PATH_LIMIT[preset]) / 1e9)
           for preset, (one, _) in nx.BUILDERS.items()}
#: algorithm names in logs and calibrations -> the tuner's
ALGORITHM_NAMES = {"ring": "ring", "tree": "tree", "nvls": "nvls", "nvlstree": "nvls_tree", "pat": "pat",
                   "collnet": "collnet_direct", "collnetdirect": "collnet_direct", "collnetchain": "collnet_chain"}


def preset_of(hardware) -> str:
    """The NCCL topology a GPU spec names; where its scale-out level's bandwidth differs from the one that topology's
    graphs were derived for (a variant with other NICs: ``extends`` with its own network level), the same graphs with
    the network's speeds scaled to it (formulas/nccl_topologies.with_nic), registered once under a name that says so."""
    preset = hardware.nccl.topology
    if len(hardware.network) < 2:
        return preset
    limit, level = nx.NIC_PATH_LIMIT[preset], hardware.network[-1]
    nic, derived = min(level.bandwidth_bytes_per_s, limit), min(nx.NIC_BYTES_PER_S[preset], limit)
    if nic == derived:  # the same path (a faster NIC behind the same PCIe link carries no more)
        return preset
    if nic > derived:
        raise CostModelError(f"{hardware.name}: its {level.name} level ({level.bandwidth_bytes_per_s / 1e9:g} GB/s a GPU) "
                             f"is faster than the {derived / 1e9:g} GB/s NCCL's {preset} graphs were derived for; "
                             "cost4d scales them down only (set [nccl] topology for another system, or drop [nccl] for "
                             "the datasheet model)")
    ratio = nic / derived
    name = f"{preset}, NIC {nic / 1e9:.15g} GB/s a GPU"
    if name not in nx.BUILDERS:
        nx.BUILDERS[name] = nx.with_nic(nx.BUILDERS[preset], ratio)
        inside, out = P2P_GBS[preset]
        P2P_GBS[name] = (inside, out * ratio)
        PLUGIN_ENV.setdefault(name, PLUGIN_ENV.get(preset, {}))
    return name


def as_nccl_sees(preset: str, fast, slow):
    """The node's and the network's levels with the per-GPU bandwidth NCCL's topology gives them
    (P2P_GBS) in place of the datasheet's x efficiency: what point-to-point traffic gets."""
    inside, out = P2P_GBS[preset]
    return (fast.model_copy(update={"bandwidth_bytes_per_s": inside * 1e9, "efficiency": None}),
            slow.model_copy(update={"bandwidth_bytes_per_s": out * 1e9, "efficiency": None}))


def topology(preset: str, nodes: int, per_node: int, version: tuple = nv.TRANSCRIBED) -> nt.Topology:
    """The communicator NCCL builds for ``nodes`` x ``per_node`` GPUs of a preset system
    (formulas/nccl_topologies.BUILDERS), with what its NIC plugin sets. ``version``: the NCCL release whose
    tuner decides (formulas/nccl_versions.py)."""
    one, many = nx.BUILDERS[preset]
    topo = one(per_node) if nodes == 1 else many(nodes, per_node)
    return replace(topo, version=version, **PLUGIN_ENV.get(preset, {}))  # a variant's: its base's (preset_of)


def restricted(topo: nt.Topology, algorithm: str) -> nt.Topology:
    """The topology with NCCL_ALGO set to ``algorithm`` ('auto': NCCL's own choice among all)."""
    if algorithm == "auto":
        return topo
    return replace(topo, algorithms_env=frozenset({ALGORITHM_NAMES.get(algorithm, algorithm)}))


def timing(topo: nt.Topology, hop_us: float | None) -> nt.Topology:
    """The topology the chosen algorithm's time is read from: the newest tuner's costs (a later release
    re-estimated what the same algorithm takes: tree Simple's 28 us a hop became 4, a ring all-reduce's
    2 N network steps 2 (N - 1); formulas/nccl_versions.py) and the measured network hop. The release the
    system runs picks the algorithm; its old estimates steered the pick, they did not time the kernel."""
    return with_hop(replace(topo, version=nv.TRANSCRIBED) if topo.version != nv.TRANSCRIBED else topo, hop_us)


def with_hop(topo: nt.Topology, hop_us: float | None) -> nt.Topology:
    """The topology with each network hop taking ``hop_us`` (measured) instead of the latency the NIC
    plugin declares: NCCL chooses with the declared one, the wire takes the measured one."""
    if hop_us is None:
        return topo
    return replace(topo, **{name: replace(getattr(topo, name), latency_inter_us=hop_us)
                            for name in ("ring", "tree", "nvls", "collnet_direct", "collnet_chain")})


def choice(preset: str, op: str, buffer_bytes: float, nodes: int, per_node: int, algorithm: str = "auto",
           hop_us: float | None = None, version: tuple = nv.TRANSCRIBED):
    """(algorithm, protocol, seconds) NCCL's tuner (of release ``version``) picks for one buffer (one rank:
    free), timed as :func:`timing` says (with a measured network ``hop_us``)."""
    return _choice(preset, op, int(buffer_bytes), int(nodes), int(per_node), algorithm, hop_us, version)


@functools.lru_cache(maxsize=65536)  # a long log asks for the same few sizes and groups again and again
def _choice(preset: str, op: str, buffer_bytes: int, nodes: int, per_node: int, algorithm: str, hop_us, version):
    if nodes * per_node <= 1:
        return "none", "none", 0.0
    topo = restricted(topology(preset, nodes, per_node, version), algorithm)
    try:  # without NCCL's one-hour sentinel, so huge buffers price like the array path
        algo, proto, seconds = nt.choose(TUNED[op], buffer_bytes, topo, cap_us=math.inf)
    except ValueError:
        raise CostModelError(f"NCCL has no {algorithm} algorithm for {op} on {nodes} x {per_node} GPUs "
                             "(its tuner disables it there)") from None
    timed = timing(topo, hop_us if nodes > 1 else None)
    if timed is not topo:
        seconds = 1e-6 * nt.algo_time_us(coll=TUNED[op], algo=algo, proto=proto, n_bytes=buffer_bytes, topo=timed)
    return algo, proto, seconds + 1e-6 * fills_us(buffer_bytes, candidate(TUNED[op], algo, proto, topo, timed))


def candidates(preset: str, op: str, nodes: int, per_node: int, algorithm: str, hop_us=None,
               version: tuple = nv.TRANSCRIBED) -> list[Candidate]:
    """Every (algorithm, protocol) the tuner would consider (:func:`candidate`): NCCL's estimate = latency (x 1.4
    past the plateau) + S / (1000 B x correction) picks one; its time takes the timed latency and bandwidth
    (:func:`timing`) and what its kernel adds (nccl_fills.fills_us)."""
    topo = restricted(topology(preset, nodes, per_node, version), algorithm)
    timed = timing(topo, hop_us)
    coll = TUNED[op]
    return [candidate(coll, algo, proto, topo, timed) for algo in nt.ALGORITHMS
            if nt.is_candidate(coll=coll, algo=algo, topo=topo) for proto in nt.PROTOCOLS
            if nt.tuned_bandwidth_gbs(coll=coll, algo=algo, proto=proto, topo=topo) > 0]


def candidate(coll: str, algo: str, proto: str, topo: nt.Topology, timed: nt.Topology) -> Candidate:
    """One (algorithm, protocol) on ``topo`` (the release that decides), timed on ``timed`` (:func:`timing`)."""
    bandwidth = nt.tuned_bandwidth_gbs(coll=coll, algo=algo, proto=proto, topo=topo)
    plateau = algo == "ring" and proto == "Simple" and topo.n_nodes > 1 and coll == "all_reduce"
    return Candidate(nt.latency_us(coll=coll, algo=algo, proto=proto, topo=topo), bandwidth,
                     proto if algo == "tree" and coll == "all_reduce" else None,
                     64 * topo.coll_channels * topo.n_ranks if plateau else 0,
                     nt.latency_us(coll=coll, algo=algo, proto=proto, topo=timed),
                     nt.tuned_bandwidth_gbs(coll=coll, algo=algo, proto=proto, topo=timed) or bandwidth,
                     nvls_heads(coll, algo, topo), topo.nvls_channels, topo.n_nodes, nt.ALGORITHMS.index(algo),
                     tree_fill_per_byte(coll, algo, proto, timed), topo.coll_channels)


def tuned_cost(hardware, op: str, nodes, per_node, algorithm: str = "auto", memo: dict | None = None) -> "TunedCost":
    """NCCL's tuner for ``op`` on a spec's system: its topology preset, NCCL release, launch floor and
    measured hop (``memo``: the placement's, :attr:`TunedCost.memo`)."""
    spec = hardware.nccl
    hop = None if spec.network_latency_s is None else spec.network_latency_s * 1e6
    return TunedCost(preset_of(hardware), op, nodes, per_node, algorithm, spec.launch_s or 0.0, hop_us=hop, memo=memo,
                     version=nv.parse(spec.version))


@record
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
    version: tuple = nv.TRANSCRIBED  # the NCCL release whose tuner decides
    #: calibrations of the algorithms NCCL may pick, ((tuner's algorithm name, offset, scale), ...): where the pick
    #: has one, it prices the pick in place of offset and scale (an 'auto' run fitted per algorithm)
    by_algorithm: tuple = ()
    #: arrays: what pricing indexes once per group for every op on it (placement.Placement.memo: its distinct
    #: group shapes, each buffer's distinct sizes among them); None: this cost's own
    memo: dict | None = field(default=None, compare=False, repr=False)

    def fit_for(self, algo: str) -> tuple:
        """(offset, scale) that price a pick of ``algo``: its own calibration, else the cost's."""
        return next(((o, s) for name, o, s in self.by_algorithm if name == algo), (self.offset, self.scale))

    def seconds(self, buffer_bytes):
        kind = family(buffer_bytes, self.nodes, self.per_node)
        if kind == "number":
            algo, _, tuned = choice(self.preset, self.op, buffer_bytes, self.nodes, self.per_node, self.algorithm,
                                    self.hop_us, self.version)
            offset, scale = self.fit_for(algo)
            return offset + scale * max(tuned, self.launch) if self.nodes * self.per_node > 1 else 0.0
        if kind == "numpy":
            from costmodel.cost.nccl_arrays import array_seconds  # imported here: the numbers path never loads it

            return array_seconds(self, buffer_bytes)
        if self.by_algorithm:  # each pick's fit applies once the letters are numbers
            return nccl_seconds(self.preset, self.op, self.algorithm, buffer_bytes, self.nodes, self.per_node,
                                self.hop_us, self.version, fitted=(self.offset, self.scale, self.launch,
                                                                   self.by_algorithm))
        tuned = nccl_seconds(self.preset, self.op, self.algorithm, buffer_bytes, self.nodes, self.per_node,
                             self.hop_us, self.version)
        tuned = maximum(tuned, self.launch) if self.launch else tuned
        return self.offset + self.scale * tuned if (self.offset, self.scale) != (0.0, 1.0) else tuned


@record
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


def nccl_seconds(preset: str, op: str, algorithm: str, buffer_bytes, nodes, per_node, hop_us=None,
                 version: tuple = nv.TRANSCRIBED, fitted: tuple | None = None):
    """t_NCCL_<op>(S, N, g): an opaque function of letters that becomes the tuner's number once they are
    numbers (substitution), or its array once they are arrays (lambdify); ``fitted`` (offset, scale, launch,
    by_algorithm): the calibrated time of :class:`TunedCost` with those, each pick's fit applied."""
    return _function(preset, op, algorithm, hop_us, version, fitted)(buffer_bytes, nodes, per_node)


_FUNCTIONS: dict = {}


def _function(preset: str, op: str, algorithm: str, hop_us=None, version: tuple = nv.TRANSCRIBED, fitted=None):
    """One sympy Function class per (preset, op, algorithm, hop, release, calibration), made once (sympy compares
    by class)."""
    key = (preset, op, algorithm, hop_us, version, fitted)
    if key not in _FUNCTIONS:
        import sympy

        offset, scale, launch, picks = fitted or (0.0, 1.0, 0.0, ())

        def cost(n, g):
            return TunedCost(preset, op, n, g, algorithm, launch, offset, scale, hop_us, version, picks)

        def evaluate(cls, size, n, g):
            if not all(arg.is_number for arg in (size, n, g)):
                return None
            if fitted is None:
                return sympy.Float(choice(preset, op, float(size), int(n), int(g), algorithm, hop_us, version)[2])
            return sympy.Float(cost(int(n), int(g)).seconds(float(size)))

        name = f"t_NCCL_{op.replace('-', '_')}" + ("" if algorithm == "auto" else f"_{algorithm}") + (
            "_fitted" if fitted else "")
        _FUNCTIONS[key] = type(name, (sympy.Function,), {
            "eval": classmethod(evaluate), "_imp_": staticmethod(lambda size, n, g: cost(n, g).seconds(size))})
    return _FUNCTIONS[key]
