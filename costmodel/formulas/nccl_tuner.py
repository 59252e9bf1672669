"""NCCL's own collective-time model (NCCL v2.26.2-1), transcribed: which algorithm and protocol it
picks for an op, a size and a topology, and the time it estimates.

NCCL fills two tables once per communicator in ``ncclTopoTuneModel`` (src/graph/tuning.cc):
a latency L[coll][algo][proto] in us and a bandwidth B[coll][algo][proto] in GB/s (1e9 B/s), both
from the outputs of its topology search (one ``ncclTopoGraph`` per algorithm). For each op it then
estimates ``t = L * latCount + S / (1000 B)`` us for every enabled pair (``ncclTopoGetAlgoTime``) and
runs the cheapest (``topoGetAlgoInfo``, src/enqueue.cc). S is ``nBytes``: the full buffer as
nccl-tests prints it (the gathered output for all-gather, the input for reduce-scatter).

Units follow NCCL inside (us, GB/s, bytes); :func:`choose` converts its time to seconds at the edge.
NCCL stores L and B as 32-bit floats; this module computes in doubles (differences ~1e-7 relative,
which could only flip a choice at an exact tie).

Send/recv and all-to-all are not in this model: NCCL runs them as p2p work on p2p channels with no
cost table (formulas/nccl_p2p.py transcribes how it splits and which protocol it takes).

Line numbers cite ``git show v2.26.2-1:<file>`` of github.com/NVIDIA/nccl. A topology's ``version`` (a release
from 2.19 on) applies the older releases' rules where they differ (formulas/nccl_versions.py).
"""

from __future__ import annotations

from costmodel.formulas import nccl_versions as nv
from costmodel.record import record

NCCL_VERSION = "2.26.2-1"

# ncclFunc_t order, src/include/nccl_common.h:43-47 (NCCL_NUM_FUNCTIONS = 5 tuned collectives)
COLLECTIVES = ("broadcast", "reduce", "all_gather", "reduce_scatter", "all_reduce")
# NCCL_ALGO_* = 0..6, src/include/nccl_common.h:56-62; ties go to the lower index (enqueue.cc:1700-1709)
ALGORITHMS = ("tree", "ring", "collnet_direct", "collnet_chain", "nvls", "nvls_tree", "pat")
# NCCL_PROTO_* = 0..2, src/include/nccl_common.h:66-68
PROTOCOLS = ("LL", "LL128", "Simple")

# Path types, src/graph/topo.h:58-93 (LINK_NVL == PATH_NVL == 1, topo.h:45)
PATH_LOC, PATH_NVL, PATH_NVB, PATH_C2C, PATH_PIX, PATH_PXB, PATH_PXN, PATH_PHB, PATH_SYS = range(9)
# Search patterns, src/include/graph.h:82-86
PATTERN_BALANCED_TREE, PATTERN_SPLIT_TREE, PATTERN_TREE, PATTERN_RING, PATTERN_NVLS = 1, 2, 3, 4, 5

# baseLat[algo][proto] in us, tuning.cc:120-123 (PAT, index 6, is zero-initialised)
BASE_LAT_US = {
    "tree": (6.8, 14.0, 8.4), "ring": (6.6, 14.0, 8.4),
    "collnet_direct": (0.0, 0.0, 0.0), "collnet_chain": (0.0, 0.0, 0.0),
    "nvls": (0.0, 0.0, 0.0), "nvls_tree": (0.0, 0.0, 0.0), "pat": (0.0, 0.0, 0.0),
}
# hwLat[hw][algo][proto] in us, tuning.cc:129-142 (PAT row not listed: zero)
HW_LAT_US = {
    "nvlink": {"tree": (0.6, 1.25, 4.0), "ring": (0.6, 1.9, 3.4), "collnet_direct": (0.0, 0.0, 3.7),
               "collnet_chain": (0.0, 0.0, 2.8), "nvls": (0.0, 0.0, 25.0), "nvls_tree": (0.0, 0.0, 25.0),
               "pat": (0.0, 0.0, 0.0)},
    "pci": {"tree": (1.0, 1.9, 4.0), "ring": (1.0, 2.5, 5.7), "collnet_direct": (0.0, 0.0, 3.7),
            "collnet_chain": (0.0, 0.0, 2.8), "nvls": (0.0, 0.0, 0.0), "nvls_tree": (0.0, 0.0, 0.0),
            "pat": (0.0, 0.0, 0.0)},
    "net": {"tree": (5.0, 8.5, 14.0), "ring": (2.7, 4.0, 14.0), "collnet_direct": (0.0, 0.0, 31.0),
            "collnet_chain": (0.0, 0.0, 30.0), "nvls": (0.0, 0.0, 18.0), "nvls_tree": (0.0, 0.0, 14.0),
            "pat": (0.0, 0.0, 0.0)},
}
# Rows: Volta, Ampere, Hopper, Blackwell (tuning.cc:145-148); columns: 1 node, 2 nodes, >2 nodes.
# llMaxBws, tuning.cc:151-156 (multi-node rows are picked by CPU vendor: 0 Intel, 1 AMD/mixed)
LL_MAX_BWS_GBS = ((39.0, 39.0, 20.4), (87.7, 22.5, 19.0), (141.0, 45.0, 35.0), (2 * 141.0, 2 * 45.0, 2 * 35.0))
# perChMaxRingLL128Bws, tuning.cc:158-163
PER_CH_MAX_RING_LL128_BWS_GBS = ((20.0, 20.0, 20.0), (20.0, 20.0, 20.0), (36.7, 36.7, 36.7),
                                 (2 * 36.7, 2 * 36.7, 2 * 36.7))
# perChMaxTreeLL128Bws, tuning.cc:164-169
PER_CH_MAX_TREE_LL128_BWS_GBS = ((20.0, 20.0, 20.0), (20.0, 20.0, 20.0), (36.7, 36.7, 29.0),
                                 (2 * 36.7, 2 * 36.7, 2 * 29.0))
# perChMaxTreeBws, tuning.cc:170-175
PER_CH_MAX_TREE_BWS_GBS = ((26.5, 18.5, 10.0), (24.0, 23.6, 17.8), (38.7, 41.4, 36.0),
                           (2 * 38.7, 2 * 41.4, 2 * 36.0))
# treeCorrectionFactor[proto][log2(S/64)], powers of two 64 B .. 256 MiB, tuning.cc:524-528
TREE_CORRECTION_FACTOR = (
    (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0),
    (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0),
    (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9),
)
# NCCL_MAX_DEV_WORK_BATCH_COLLS = 1024 B / sizeof(ncclDevWorkColl) (device.h:340-341); 96 B is our
# reading of the struct at device.h:256-284 (only matters for non-ring algos with numPipeOps > 1)
MAX_DEV_WORK_BATCH_COLLS = 1024 // 96


@record
class Graph:
    """One ncclTopoGraph as the tuner reads it: the search output (search.cc ncclTopoCompute),
    min/max-reduced over ranks (init.cc:993-1004). ``Graph()`` is a search that was not run
    (init.cc:837-880 memset the graphs to 0, so nChannels = 0 and the algorithm gets no bandwidth)."""

    n_channels: int = 0
    bw_intra_gbs: float = 0.0  # GB/s per channel inside a node
    bw_inter_gbs: float = 0.0  # GB/s per channel across nodes
    type_intra: int = PATH_LOC
    type_inter: int = PATH_LOC
    latency_inter_us: float = 0.0  # net.latency of the NIC; the IB and socket plugins report 0
    same_channels: bool = False
    pattern: int = 0


@record
class Topology:
    """The communicator fields ncclTopoTuneModel and the selection read (comm->..., graphs[...])."""

    n_nodes: int
    n_ranks: int
    ring: Graph
    tree: Graph
    nvls: Graph = Graph()
    collnet_direct: Graph = Graph()
    collnet_chain: Graph = Graph()
    min_comp_cap: int = 90
    max_comp_cap: int = 90
    coll_channels: int = 1  # comm->nChannels after ncclTopoPostset (channel duplication)
    nvls_channels: int = 0
    nvls_support: bool = False
    collnet_support: bool = False
    max_tree_pattern: int = PATTERN_BALANCED_TREE
    cpu_arch: str = "x86"  # x86, power, arm, mixed
    cpu_vendor: str = "intel"  # intel, amd, zhaoxin, mixed
    nvs_count: int = 0
    max_local_ranks: int = 1
    net_device_host: bool = True  # netDeviceType == NCCL_NET_DEVICE_HOST (no device offload)
    collnet_heads: int = 0  # comm->collNetHeadsNum
    collnet_plugin_ag_rs: bool = False  # collnet plugin has iallgather and ireducescatter
    cudart_version: int = 12080  # only 11080 changes anything (tuning.cc:435)
    net_overhead_param_ns: int = -2  # NCCL_NET_OVERHEAD, -2 = unset
    pat_enable_param: int = 2  # NCCL_PAT_ENABLE
    algorithms_env: frozenset | None = None  # NCCL_ALGO as a set of names (no per-function prefixes)
    protocols_env: frozenset | None = None  # NCCL_PROTO likewise; listing LL128 forces it on
    version: tuple = nv.TRANSCRIBED  # the NCCL release, (major, minor, patch): older ones differ (nccl_versions)

    def graph(self, algo: str) -> Graph:
        """graphs[] = {tree, ring, collnetDirect, collnetChain, nvls, nvls, tree} (init.cc:675)."""
        return {"tree": self.tree, "ring": self.ring, "collnet_direct": self.collnet_direct,
                "collnet_chain": self.collnet_chain, "nvls": self.nvls, "nvls_tree": self.nvls,
                "pat": self.tree}[algo]


def log2i(n):
    """floor(log2 n), -1 for 0 (log2i, src/include/utils.h:42 -> log2Down, bitops.h:118-147)."""
    return n.bit_length() - 1


def comp_cap_index(comp_cap):
    """Row of the per-arch tables: 0 Volta, 1 Ampere, 2 Hopper, 3 Blackwell (tuning.cc:216)."""
    return 3 if comp_cap >= 100 else 2 if comp_cap >= 90 else 1 if comp_cap >= 80 else 0


def node_index(n_nodes):
    """Column of the per-arch tables: 1 node, 2 nodes, more (tuning.cc:217)."""
    return n_nodes - 1 if n_nodes <= 2 else 2


def ll_max_bw_gbs(*, n_nodes, comp_cap, cpu_vendor, version=nv.TRANSCRIBED):
    """llMaxBw: GPU row on one node, CPU-vendor row on several (tuning.cc:218-221); before 2.21.5 Hopper
    read Ampere's row, before 2.24.3 mixed vendors the Intel one (nccl_versions)."""
    amd = cpu_vendor == "amd" or (cpu_vendor == "mixed" and version >= nv.MIXED_CPUS)
    row = comp_cap_index(comp_cap) if n_nodes == 1 else (1 if amd else 0)
    if row == 2 and version < nv.LL_HALF:
        return nv.OLD_LL_MAX_HOPPER[node_index(n_nodes)]
    return LL_MAX_BWS_GBS[row][node_index(n_nodes)]


def n_steps(*, coll, n_ranks):
    """Ring steps: 2 (n-1) for all-reduce, n-1 for all-gather/reduce-scatter, n else (tuning.cc:234-236)."""
    if coll == "all_reduce":
        return 2 * (n_ranks - 1)
    return n_ranks - 1 if coll in ("all_gather", "reduce_scatter") else n_ranks


def pat_enabled(topo: Topology):
    """ncclPatEnable: SM60+, and by default only with one GPU per node and host networking
    (tuning.cc:177-185)."""
    if topo.min_comp_cap < 60:
        return False
    if topo.pat_enable_param != 2:
        return bool(topo.pat_enable_param)
    return topo.n_nodes == topo.n_ranks and topo.net_device_host


def is_modelled(*, coll, algo, proto, topo: Topology):
    """Whether ncclTopoTuneModel fills this entry at all (else it stays 0 = unusable):
    broadcast/reduce ring only; all-gather/reduce-scatter ring, PAT, NVLS, CollNet Direct;
    all-reduce all but PAT; NVLS algos Simple only; PAT Simple only when enabled (tuning.cc:239-248)."""
    if coll in ("broadcast", "reduce") and algo != "ring":
        return False
    if coll in ("all_gather", "reduce_scatter") and algo not in ("pat", "ring", "nvls", "collnet_direct"):
        return False
    if algo == "pat" and (coll == "all_reduce" or topo.version < nv.RING_STEPS):  # no PAT before 2.23.4
        return False
    if algo in ("nvls", "nvls_tree") and proto != "Simple":
        return False
    return not (algo == "pat" and (proto != "Simple" or not pat_enabled(topo)))


def graph_bw_gbs(*, algo, n_nodes, graph: Graph):
    """Per-channel bandwidth the tuner uses: bwIntra on <= 2 nodes or for CollNet, else bwInter;
    NVLS min(intra, inter); NVLS tree min(intra, inter, or inter/2 beyond 2 nodes) (tuning.cc:249-252)."""
    if algo == "nvls":
        return min(graph.bw_intra_gbs, graph.bw_inter_gbs)
    if algo == "nvls_tree":
        return min(graph.bw_intra_gbs, graph.bw_inter_gbs if n_nodes <= 2 else graph.bw_inter_gbs / 2)
    collnet = algo in ("collnet_direct", "collnet_chain")
    return graph.bw_intra_gbs if n_nodes <= 2 or collnet else graph.bw_inter_gbs


def collnet_direct_bus_gbs(*, coll, bus_gbs, bw_gbs, n_channels, topo: Topology):
    """CollNet Direct, Simple: AG/RS ppn B scaled 0.95 (1 ppn) .. 0.85 (8 ppn), 0 without a 1:1
    GPU:NIC plugin path; all-reduce B / (f - (f-1)/2), f = ppn / nChannels, x .85 on SM90+
    (tuning.cc:265-287)."""
    ppn = topo.n_ranks / topo.n_nodes
    if coll in ("all_gather", "reduce_scatter"):
        if topo.n_nodes > 1 and (not topo.collnet_plugin_ag_rs or ppn > topo.collnet_heads):
            return 0.0
        w = (ppn - 1) / (8 - 1)
        return ppn * bw_gbs * (w * 0.85 + (1 - w) * 0.95)
    factor = ppn / n_channels
    factor -= (factor - 1) / 2
    return bus_gbs / factor * (.85 if topo.min_comp_cap >= 90 else 1.0)


def bus_bandwidth_gbs(*, coll, algo, proto, topo: Topology):
    """busBw = nChannels x bw, then NCCL's per-protocol caps and efficiencies (tuning.cc:253-287).

    Ring LL: min(llMaxBw, B/2). Ring LL128: min(.92 B, nCh x perChMaxRingLL128). Tree all-reduce:
    min(.92 B, nCh x perChMaxTree), then LL: min(B/3.8, llMaxBw); LL128: min(B x (7/9 on one node,
    120/128 else), nCh x perChMaxTreeLL128); x .85 if any node's tree search fell back to
    NCCL_TOPO_PATTERN_TREE. PAT x .75. CollNet: Simple only.
    """
    g = topo.graph(algo)
    n, cc, ch = topo.n_nodes, topo.min_comp_cap, g.n_channels
    row, col = comp_cap_index(cc), node_index(n)
    ll_max = ll_max_bw_gbs(n_nodes=n, comp_cap=cc, cpu_vendor=topo.cpu_vendor, version=topo.version)
    bw = graph_bw_gbs(algo=algo, n_nodes=n, graph=g)
    bus = ch * bw
    if algo == "ring" and proto == "LL":
        bus = min(ll_max, bus * ring_ll_fraction(coll=coll, n_nodes=n, version=topo.version))
    if algo == "ring" and proto == "LL128":
        kept = 0.7 if topo.version < nv.RING_STEPS and topo.n_ranks / n < 2 else 0.92
        bus = min(bus * kept, ch * PER_CH_MAX_RING_LL128_BWS_GBS[row][col])
    if algo == "tree" and coll == "all_reduce":
        bus = min(bus * .92, ch * PER_CH_MAX_TREE_BWS_GBS[row][col])
    if algo == "tree" and proto == "LL":
        bus = min(bus * 1.0 / 3.8, ll_max)
    if algo == "tree" and proto == "LL128":
        cap = ch * PER_CH_MAX_TREE_LL128_BWS_GBS[row][col]
        bus = min(bus * (7.0 / 9.0 if n == 1 else 120.0 / 128.0), cap)
    if algo == "tree" and topo.max_tree_pattern == PATTERN_TREE:
        bus *= .85
    if algo == "pat":
        bus *= .75
    if algo in ("collnet_direct", "collnet_chain") and proto != "Simple":
        return 0.0
    if algo == "collnet_direct":
        bus = collnet_direct_bus_gbs(coll=coll, bus_gbs=bus, bw_gbs=bw, n_channels=ch, topo=topo)
    return bus


def ring_ll_fraction(*, coll, n_nodes, version=nv.TRANSCRIBED):
    """What the ring's LL protocol keeps of the graph's bandwidth: 1/2 (tuning.cc:256); before 2.21.5 1/4,
    or 1/3 for one node's all-gather, reduce-scatter and broadcast (nccl_versions.LL_HALF)."""
    if version >= nv.LL_HALF:
        return .5
    return 1.0 / 4.0 if n_nodes > 1 or coll in ("all_reduce", "reduce") else 1.0 / 3.0


def algorithm_bandwidth_gbs(*, coll, algo, proto, topo: Topology):
    """Bus to algorithm bandwidth: ring x n / nsteps, NVLS algos x 5/6, others x 1/2; none for
    non-ring all-gather/reduce-scatter (tuning.cc:289-296)."""
    bus = bus_bandwidth_gbs(coll=coll, algo=algo, proto=proto, topo=topo)
    if algo != "ring" and coll in ("all_gather", "reduce_scatter"):
        return bus
    if algo == "ring":
        return bus * (1.0 * topo.n_ranks) / n_steps(coll=coll, n_ranks=topo.n_ranks)
    return bus * (5.0 / 6.0 if algo in ("nvls", "nvls_tree") else .5)


def algo_enabled(*, algo, topo: Topology):
    """algoEnable: NCCL_ALGO, then off: NVLS tree on one node; CollNet algos (and NVLS across nodes)
    without CollNet; CollNet Direct without an NVSwitch (tuning.cc:355-363, 408-421)."""
    if topo.algorithms_env is not None and algo not in topo.algorithms_env:
        return False
    if topo.n_nodes == 1 and algo == "nvls_tree":
        return False
    if not topo.collnet_support and (algo in ("collnet_direct", "collnet_chain")
                                     or (algo == "nvls" and topo.n_nodes > 1)):
        return False
    return not (topo.nvs_count == 0 and algo == "collnet_direct")


def ll128_default_enabled(*, coll, algo, topo: Topology):
    """LL128 on by default only for typeInter <= PXB (<= PXN on SM90+), typeIntra <= NVB, one
    compute capability among 70/80/90/100/120, and not CUDA 11.8 ring all-reduce on 2 SM90 ranks
    (tuning.cc:426-440)."""
    g, cc = topo.graph(algo), topo.min_comp_cap
    ok = g.type_inter <= PATH_PXB or (cc >= 90 and g.type_inter <= PATH_PXN)
    ok = ok and g.type_intra <= PATH_NVB and topo.min_comp_cap == topo.max_comp_cap
    if cc == 90:
        return ok and not (topo.cudart_version == 11080 and coll == "all_reduce" and algo == "ring"
                           and topo.n_ranks == 2)
    return ok and cc in (70, 80, 100, 120)


def proto_enabled(*, coll, algo, proto, topo: Topology):
    """protoEnable: NCCL_PROTO if set (a listed LL128 skips the default check), else all with LL128
    = 2, meaning 'decide by ll128_default_enabled' (tuning.cc:356-369, 424-441)."""
    if topo.protocols_env is not None:
        return proto in topo.protocols_env
    return proto != "LL128" or ll128_default_enabled(coll=coll, algo=algo, topo=topo)


def tuned_bandwidth_gbs(*, coll, algo, proto, topo: Topology):
    """comm->bandwidths[coll][algo][proto]: 0 where not modelled or disabled (tuning.cc:297, 442-443)."""
    if topo.n_ranks <= 1 or not is_modelled(coll=coll, algo=algo, proto=proto, topo=topo):
        return 0.0
    if not algo_enabled(algo=algo, topo=topo):
        return 0.0
    if not proto_enabled(coll=coll, algo=algo, proto=proto, topo=topo):
        return 0.0
    return algorithm_bandwidth_gbs(coll=coll, algo=algo, proto=proto, topo=topo)


def intra_hw(graph: Graph):
    """intraHw: NVLink if the graph's typeIntra is LINK_NVL, else PCI (tuning.cc:230)."""
    return "nvlink" if graph.type_intra == PATH_NVL else "pci"


def hw_lat_us(*, hw, algo, proto, cpu_arch, version=nv.TRANSCRIBED):
    """hwLat, with PCI Tree/Simple set to PCI Ring/Simple on POWER CPUs (tuning.cc:129-142, 226); before
    2.23.4 tree Simple took 28 us per hop everywhere, before 2.21.5 NVLS 23 us on NVLink (nccl_versions)."""
    if cpu_arch == "power" and hw == "pci" and algo == "tree" and proto == "Simple":
        algo = "ring"
    if algo == "tree" and proto == "Simple" and version < nv.RING_STEPS:
        return nv.OLD_TREE_SIMPLE_HW_US
    if algo in ("nvls", "nvls_tree") and hw == "nvlink" and version < nv.LL_HALF:
        return nv.OLD_NVLS_NVLINK_US
    return HW_LAT_US[hw][algo][PROTOCOLS.index(proto)]


def base_lat_us(*, algo, proto, version=nv.TRANSCRIBED):
    """baseLat (tuning.cc:120-123); before 2.23.4 tree Simple had none (nccl_versions)."""
    if algo == "tree" and proto == "Simple" and version < nv.RING_STEPS:
        return nv.OLD_TREE_SIMPLE_BASE_US
    return BASE_LAT_US[algo][PROTOCOLS.index(proto)]


def net_overhead_us(topo: Topology):
    """getNetOverhead: NCCL_NET_OVERHEAD ns if set, 2 us on AMD x86, else 1 us (tuning.cc:188-195)."""
    if topo.net_overhead_param_ns != -2:
        return topo.net_overhead_param_ns * .001
    return 2.0 if topo.cpu_arch == "x86" and topo.cpu_vendor == "amd" else 1.0


def inter_lat_us(*, algo, proto, topo: Topology):
    """interLat: the NET hwLat (the Tree row at 1 rank per node, from 2.23.4) + latencyInter, twice for
    Simple (the flush) (tuning.cc:300-304)."""
    g = topo.graph(algo)
    ppn = topo.n_ranks / topo.n_nodes
    row = "tree" if ppn == 1 and topo.version >= nv.RING_STEPS else algo
    lat = hw_lat_us(hw="net", algo=row, proto=proto, cpu_arch=topo.cpu_arch, version=topo.version)
    return lat + g.latency_inter_us * (2 if proto == "Simple" else 1)


def ring_all_reduce_network_steps(n_nodes, version=nv.TRANSCRIBED):
    """Network crossings of a ring all-reduce over N > 1 nodes: 2 (N - 1) (tuning.cc:323-324); 2 N before
    2.23.4 (v2.20.3 tuning.cc:162; nccl_versions.RING_STEPS)."""
    return 2 * (n_nodes - 1) if version >= nv.RING_STEPS else 2 * n_nodes


def ring_latency_us(*, coll, proto, topo: Topology):
    """Ring: base + (nsteps - k) max(intraLat, netOverhead) + k interLat, k network steps (all-reduce:
    :func:`ring_all_reduce_network_steps`; N-1 otherwise), netOverhead x3 for Simple on N > 1;
    broadcast/reduce: base + lat (sameChannels) or base + nsteps lat (tuning.cc:306-325)."""
    g, n = topo.ring, topo.n_nodes
    base = base_lat_us(algo="ring", proto=proto, version=topo.version)
    steps = n_steps(coll=coll, n_ranks=topo.n_ranks)
    hw = intra_hw(g) if n == 1 else "net"
    if coll in ("broadcast", "reduce"):
        if g.same_channels:
            return base + hw_lat_us(hw=hw, algo="ring", proto=proto, cpu_arch=topo.cpu_arch, version=topo.version)
        chunk_algo = "tree" if proto == "Simple" else "ring"
        return base + steps * hw_lat_us(hw=hw, algo=chunk_algo, proto=proto, cpu_arch=topo.cpu_arch,
                                        version=topo.version)
    overhead = 0.0 if n == 1 else net_overhead_us(topo) * (3 if proto == "Simple" else 1)
    intra = max(hw_lat_us(hw=intra_hw(g), algo="ring", proto=proto, cpu_arch=topo.cpu_arch, version=topo.version),
                overhead)
    k = 0 if n == 1 else (ring_all_reduce_network_steps(n, topo.version) if coll == "all_reduce" else n - 1)
    return base + (steps - k) * intra + k * inter_lat_us(algo="ring", proto=proto, topo=topo)


def latency_us(*, coll, algo, proto, topo: Topology):
    """comm->latencies[coll][algo][proto] in us (tuning.cc:298-347), p = ranks per node (int):

    tree all-reduce: base + 2 ((p-1) intra + log2 N inter); CollNet Direct: 2 (min(1, p-1) intra
    + 0.4 (p-1)) + inter; CollNet Chain: 2 (p-1) intra + inter; NVLS: intra (+ inter if N > 1);
    NVLS tree: intra + 2 log2 N inter; PAT: 8 + log2 N inter/3.5 + 2.8 n.
    """
    if algo == "ring":
        return ring_latency_us(coll=coll, proto=proto, topo=topo)
    n, p = topo.n_nodes, topo.n_ranks // topo.n_nodes
    base = base_lat_us(algo=algo, proto=proto, version=topo.version)
    intra = hw_lat_us(hw=intra_hw(topo.graph(algo)), algo=algo, proto=proto, cpu_arch=topo.cpu_arch,
                      version=topo.version)
    inter = inter_lat_us(algo=algo, proto=proto, topo=topo)
    if algo == "tree":
        return base + (2 * ((p - 1) * intra + log2i(n) * inter) if coll == "all_reduce" else 0.0)
    if algo == "collnet_direct":
        return base + 2 * (min(1, p - 1) * intra + (p - 1) * 0.4) + inter
    if algo == "collnet_chain":
        return base + 2 * (p - 1) * intra + inter
    if algo == "nvls":
        return intra + (inter if n > 1 else 0.0)
    if algo == "nvls_tree":
        return base + intra + 2 * log2i(n) * inter
    if coll in ("all_gather", "reduce_scatter"):  # PAT
        return 8 + log2i(n) * (inter / 3.5) + topo.n_ranks * 2.8
    return base


def tree_correction_factor(*, proto, n_bytes):
    """treeCorrectionFactor[proto][log2(S/64)] for 64 B <= S < 512 MiB, else 1 (tuning.cc:524-538)."""
    log_size = log2i(n_bytes >> 6)
    return TREE_CORRECTION_FACTOR[PROTOCOLS.index(proto)][log_size] if 0 <= log_size < 23 else 1.0


def algo_time_us(*, coll, algo, proto, n_bytes, topo: Topology, num_pipe_ops=1):
    """ncclTopoGetAlgoTime: t = L latCount + S / (1000 B) us, -1 if B = 0 (tuning.cc:530-547).

    Tree all-reduce: B x treeCorrectionFactor. Ring Simple all-reduce on N > 1 with S / (nChannels n)
    >= 64: L x 1.4 (x 1.9 before SM80), the ring plateau. latCount = numPipeOps for ring, else
    ceil(numPipeOps / NCCL_MAX_DEV_WORK_BATCH_COLLS).
    """
    bw = tuned_bandwidth_gbs(coll=coll, algo=algo, proto=proto, topo=topo)
    if bw == 0:
        return -1.0
    lat = latency_us(coll=coll, algo=algo, proto=proto, topo=topo)
    if algo == "tree" and coll == "all_reduce":
        bw *= tree_correction_factor(proto=proto, n_bytes=n_bytes)
    if (algo == "ring" and proto == "Simple" and topo.n_nodes > 1 and coll == "all_reduce"
            and n_bytes // (topo.coll_channels * topo.n_ranks) >= 64):
        lat *= 1.9 if topo.min_comp_cap < 80 else 1.4
    lat_count = num_pipe_ops if algo == "ring" else -(-num_pipe_ops // MAX_DEV_WORK_BATCH_COLLS)
    return lat * lat_count + n_bytes / (1000 * bw)


def is_candidate(*, coll, algo, topo: Topology, nvls_op_ok=True, collnet_op_ok=True, scaled_op=False):
    """updateCollCostTable's per-op filter (enqueue.cc:1664-1674, nvlsSupport at enqueue.cc:353):
    CollNet needs per-op CollNet support, Direct <= 8 local ranks; NVLS algos need NVLS support and a
    supported (op, type) except for all-gather; NVLS across nodes needs CollNet; NVLS all-gather/
    reduce-scatter only on one node of <= 32 ranks; PAT reduce-scatter not for scaled ops (avg)."""
    collnet = topo.collnet_support and collnet_op_ok
    nvls = topo.nvls_support and (nvls_op_ok or coll == "all_gather")
    if algo in ("collnet_direct", "collnet_chain") and not collnet:
        return False
    if algo == "collnet_direct" and topo.max_local_ranks > 7 + 1:  # NCCL_MAX_DIRECT_ARITY+1, device.h:167
        return False
    if algo in ("nvls", "nvls_tree") and not nvls and coll != "all_gather":
        return False
    if algo == "nvls" and not collnet and topo.n_nodes > 1:
        return False
    if algo == "nvls" and coll in ("all_gather", "reduce_scatter"):
        if topo.n_nodes > 1 or topo.n_ranks > 32:  # 32 = NCCL_MAX_NVLS_ARITY, device.h:181
            return False
    return not (algo == "pat" and coll == "reduce_scatter" and scaled_op)


def cost_table_us(*, coll, n_bytes, topo: Topology, num_pipe_ops=1, fp8=False, nvls_op_ok=True,
                  collnet_op_ok=True, scaled_op=False):
    """{(algo, proto): t us} for the candidates, -1 where B = 0; one rank: ring/Simple in 0 us;
    fp8 rings over 8 ranks x 1024 (enqueue.cc:1654-1689)."""
    if topo.n_ranks == 1:
        return {("ring", "Simple"): 0.0}
    table = {}
    for algo in ALGORITHMS:
        if not is_candidate(coll=coll, algo=algo, topo=topo, nvls_op_ok=nvls_op_ok,
                            collnet_op_ok=collnet_op_ok, scaled_op=scaled_op):
            continue
        for proto in PROTOCOLS:
            t = algo_time_us(coll=coll, algo=algo, proto=proto, n_bytes=n_bytes, topo=topo,
                             num_pipe_ops=num_pipe_ops)
            table[algo, proto] = t * 1024.0 if fp8 and algo == "ring" and topo.n_ranks > 8 else t
    return table


#: topoGetAlgoInfo's starting minimum: an hour in us (enqueue.cc:1697); nothing slower is picked
NO_ALGO_US = 3600000000.0


def choose(coll, n_bytes, topology: Topology, cap_us=NO_ALGO_US, **options):
    """(algo, proto, seconds): the first pair in (algo, proto) index order with the least t >= 0
    (topoGetAlgoInfo, enqueue.cc:1697-1711; nBytes = type size x max(send, recv) count,
    enqueue.cc:1787 and enqueue.h:36-38). Raises if nothing is usable (enqueue.cc:1717-1730).
    ``cap_us`` is NCCL's one-hour sentinel; a cost model pricing huge buffers passes infinity."""
    best, best_us = None, cap_us
    for (algo, proto), t in cost_table_us(coll=coll, n_bytes=n_bytes, topo=topology, **options).items():
        if 0.0 <= t < best_us:
            best, best_us = (algo, proto), t
    if best is None:
        raise ValueError(f"no algorithm/protocol available for {coll}")
    return best[0], best[1], best_us * 1e-6
