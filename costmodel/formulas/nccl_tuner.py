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

This module is the entry point: the per-op candidate filter, the cost table and the choice (src/enqueue.cc).
The model it reads is split by what it computes, and every name is re-exported here: the enums, tables,
:class:`Graph`, :class:`Topology` and index helpers in formulas/nccl_common.py; the bandwidth model and the
algorithm/protocol enable rules in formulas/nccl_bandwidth.py; the latency model and ``ncclTopoGetAlgoTime``
in formulas/nccl_latency.py.
"""

from __future__ import annotations

from costmodel.formulas.nccl_bandwidth import (algo_enabled, algorithm_bandwidth_gbs, bus_bandwidth_gbs,
                                               collnet_direct_bus_gbs, graph_bw_gbs, is_modelled,
                                               ll128_default_enabled, pat_enabled, proto_enabled, ring_ll_fraction,
                                               tuned_bandwidth_gbs)
from costmodel.formulas.nccl_common import (ALGORITHMS, BASE_LAT_US, COLLECTIVES, HW_LAT_US, LL_MAX_BWS_GBS,
                                            MAX_DEV_WORK_BATCH_COLLS, NCCL_VERSION, PATH_C2C, PATH_LOC, PATH_NVB,
                                            PATH_NVL, PATH_PHB, PATH_PIX, PATH_PXB, PATH_PXN, PATH_SYS,
                                            PATTERN_BALANCED_TREE, PATTERN_NVLS, PATTERN_RING, PATTERN_SPLIT_TREE,
                                            PATTERN_TREE, PER_CH_MAX_RING_LL128_BWS_GBS, PER_CH_MAX_TREE_BWS_GBS,
                                            PER_CH_MAX_TREE_LL128_BWS_GBS, PROTOCOLS, TREE_CORRECTION_FACTOR, Graph,
                                            Topology, comp_cap_index, ll_max_bw_gbs, log2i, n_steps, node_index)
from costmodel.formulas.nccl_latency import (algo_time_us, base_lat_us, hw_lat_us, inter_lat_us, intra_hw, latency_us,
                                             net_overhead_us, ring_all_reduce_network_steps, ring_latency_us,
                                             tree_correction_factor)


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


__all__ = ["NCCL_VERSION", "COLLECTIVES", "ALGORITHMS", "PROTOCOLS", "PATH_LOC", "PATH_NVL", "PATH_NVB", "PATH_C2C",
           "PATH_PIX", "PATH_PXB", "PATH_PXN", "PATH_PHB", "PATH_SYS", "PATTERN_BALANCED_TREE", "PATTERN_SPLIT_TREE",
           "PATTERN_TREE", "PATTERN_RING", "PATTERN_NVLS", "BASE_LAT_US", "HW_LAT_US", "LL_MAX_BWS_GBS",
           "PER_CH_MAX_RING_LL128_BWS_GBS", "PER_CH_MAX_TREE_LL128_BWS_GBS", "PER_CH_MAX_TREE_BWS_GBS",
           "TREE_CORRECTION_FACTOR", "MAX_DEV_WORK_BATCH_COLLS", "Graph", "Topology", "log2i", "comp_cap_index",
           "node_index", "ll_max_bw_gbs", "n_steps", "pat_enabled", "is_modelled", "graph_bw_gbs",
           "collnet_direct_bus_gbs", "bus_bandwidth_gbs", "ring_ll_fraction", "algorithm_bandwidth_gbs",
           "algo_enabled", "ll128_default_enabled", "proto_enabled", "tuned_bandwidth_gbs", "intra_hw", "hw_lat_us",
           "base_lat_us", "net_overhead_us", "inter_lat_us", "ring_all_reduce_network_steps", "ring_latency_us",
           "latency_us", "tree_correction_factor", "algo_time_us", "is_candidate", "cost_table_us", "NO_ALGO_US",
           "choose"]
