"""NCCL's (v2.26.2-1) latency model and time estimate: hardware, base and network latencies, the ring's and the
other algorithms' comm->latencies[coll][algo][proto] in us, the tree correction factor, and
``ncclTopoGetAlgoTime`` (:func:`algo_time_us`: t = L latCount + S / (1000 B)).

Source: ``ncclTopoTuneModel`` and ``ncclTopoGetAlgoTime``, src/graph/tuning.cc of github.com/NVIDIA/nccl;
line numbers cite ``git show v2.26.2-1:<file>``, older releases' differences are in formulas/nccl_versions.py.
"""

from __future__ import annotations

from costmodel.formulas import nccl_versions as nv
from costmodel.formulas.nccl_bandwidth import tuned_bandwidth_gbs
from costmodel.formulas.nccl_common import (BASE_LAT_US, HW_LAT_US, MAX_DEV_WORK_BATCH_COLLS, PATH_NVL, PROTOCOLS,
                                            TREE_CORRECTION_FACTOR, Graph, Topology, log2i, n_steps)


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
