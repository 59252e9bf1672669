"""NCCL's (v2.26.2-1) bandwidth model: which (collective, algorithm, protocol) entries the tuner fills, the
per-channel graph bandwidth, the bus and algorithm bandwidth with NCCL's per-protocol caps, and the algorithm
and protocol enable rules; together comm->bandwidths[coll][algo][proto] in GB/s (:func:`tuned_bandwidth_gbs`).

Source: ``ncclTopoTuneModel``, src/graph/tuning.cc of github.com/NVIDIA/nccl; line numbers cite ``git show
v2.26.2-1:<file>``, older releases' differences are in formulas/nccl_versions.py.
"""

from __future__ import annotations

from costmodel.formulas import nccl_versions as nv
from costmodel.formulas.nccl_common import (PATH_NVB, PATH_PXB, PATH_PXN, PATTERN_TREE, PER_CH_MAX_RING_LL128_BWS_GBS,
                                            PER_CH_MAX_TREE_BWS_GBS, PER_CH_MAX_TREE_LL128_BWS_GBS, Graph, Topology,
                                            comp_cap_index, ll_max_bw_gbs, n_steps, node_index)


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
