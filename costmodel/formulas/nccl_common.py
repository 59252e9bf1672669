"""The pieces of NCCL's (v2.26.2-1) tuning model that the bandwidth and latency models share: its enums and
tables, the ncclTopoGraph and communicator fields the tuner reads (:class:`Graph`, :class:`Topology`), the
small index helpers, and how the planner splits an all-reduce over channels (:func:`channels_used`, which the
NVLS and tree pipeline fills read).

Source: src/graph/tuning.cc (the tables), src/include/nccl_common.h, graph.h, topo.h (the enums) of
github.com/NVIDIA/nccl; line numbers cite ``git show v2.26.2-1:<file>``. formulas/nccl_tuner.py tells the whole
model and re-exports these names.
"""

from __future__ import annotations

from costmodel.formulas import nccl_versions as nv
from costmodel.mathops import ceil_div, maximum, minimum
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
    nvlink_gbs: float = 0.0  # one GPU's NVLink as the topology counts it (links x speed); 0: unknown (no tree fill)

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


#: scheduleCollTasksToPlan's least traffic per channel (enqueue.cc:497)
MIN_TRAFFIC_PER_CHANNEL = 16 * 1024
#: bytes of traffic per byte of an all-reduce (enqueue.cc:66-68)
ALL_REDUCE_TRAFFIC = 2


def channels_used(n_bytes, max_channels):
    """(channels the planner gives one all-reduce of ``n_bytes``, bytes on the busiest): at least 16 KiB of
    traffic per channel, in cells of 8 KiB of data (scheduleCollTasksToPlan, enqueue.cc:505-597)."""
    traffic = maximum(MIN_TRAFFIC_PER_CHANNEL, ALL_REDUCE_TRAFFIC * n_bytes)
    per_channel_traffic = maximum(MIN_TRAFFIC_PER_CHANNEL, traffic // max_channels)  # enqueue.cc:530
    cell = ceil_div(ceil_div(MIN_TRAFFIC_PER_CHANNEL, ALL_REDUCE_TRAFFIC), 16) * 16  # enqueue.cc:569
    cells = maximum(ceil_div(n_bytes, cell), 1)
    cells_per_channel = minimum(cells, ceil_div(per_channel_traffic, cell * ALL_REDUCE_TRAFFIC))
    return minimum(max_channels, ceil_div(cells, cells_per_channel)), minimum(n_bytes, cells_per_channel * cell)
