"""The graphs NCCL 2.26.2's topology search builds on the systems cost4d ships, as tuner inputs.

Each preset is a ``nccl_tuner.Topology`` derived by hand from ``src/graph/search.cc`` and friends,
every value with the code lines that give it; multi-node graphs are estimates (marked). The model
that reads them is ``nccl_tuner.py``; the hardware specs name them (``[nccl] topology``, cost/nccl.py).

Published NCCL_DEBUG=INFO logs agree with the channel counts (not a fit: no bandwidth is read from them):
1 x 8 H100 "24 coll channels, 16 nvls channels" (AWS p5, the aws-samples EKS nccl-tests README); 2 x 8 HGX
H100 on 8 CX-7 IB, NCCL 2.26.2, "16 coll channels, ... 16 nvls channels", 8 NVLS heads, 8 rings each leaving
the node at a different GPU and doubled (NVIDIA/nccl-tests#319); 1 x 4 "Channel 00/24" (pytorch/torchtitan#1570);
2 x 2 H20 (same NVLink and PCIe as H100) "Pattern 4, crossNic 1, nChannels 4, bw 24.000000/24.000000" and "8 coll
channels, 0 collnet channels, 0 nvls channels" (NVIDIA/nccl#1189): the rings doubled to 2g x 24 and NVLS off at
2 GPUs, as h100_nodes derives.
"""

from dataclasses import replace
from functools import partial

from costmodel.formulas.nccl_tuner import (PATH_NVL, PATH_PIX, PATTERN_BALANCED_TREE, PATTERN_NVLS,
                                           PATTERN_RING, PATTERN_TREE, Graph, Topology)


# --- What the v2.26.2 search yields on HGX/DGX H100 (SM90, 8 GPUs on NVSwitch, 8 x CX-7 400 Gb/s) ---
# Inputs: GPU<->NVSwitch 18 links x SM90_NVLINK_BW 20.6 = 370.8 GB/s (topo.h:17, topo.cc:586-587);
# NIC 400000 Mb/s / 8000 = 50 GB/s (topo.cc:370-372, net_ib.cc:631 NDR 100000 x 4x); PCIe Gen5 x16
# 16 x 240 / 80 = 48 GB/s (topo.cc:408-411, 476); NIC latency 0 (net_ib.cc:782); GPU<->own NIC path
# PIX (estimate: one PCIe switch per GPU/NIC pair). Search: search.cc:928-1136 (walk-through in the
# report); channel doubling: connect.cc:452, 466; NVLS channels 16 on SM90 (transport/nvls.cc:144, 176).

H100_NVLINK_GBS = 18 * 20.6  # GPU<->NVSwitch: 18 links x SM90_NVLINK_BW
A100_NVLINK_GBS = 12 * 20.0  # GPU<->NVSwitch: 12 links x SM80_NVLINK_BW (below)

H100_1NODE = Topology(
    n_nodes=1, n_ranks=8, nvlink_gbs=H100_NVLINK_GBS,
    # 6 rings at 60 GB/s (6 x 60 = 360 <= 370.8), doubled to 12 x 30 by ncclTopoDupChannels (search.cc:898-910)
    ring=Graph(12, 30.0, 30.0, PATH_NVL, PATH_PIX, 0.0, True, PATTERN_RING),
    # tree held to the ring's 12 channels (init.cc:848-849): 12 x 30 = 360 fits, 12 x 40 does not
    # (search.cc:1011-1012; pass 2 tries bwIntra 40 and fails, search.cc:1117-1120)
    tree=Graph(12, 30.0, 30.0, PATH_NVL, PATH_PIX, 0.0, True, PATTERN_BALANCED_TREE),
    # 8 heads: (8 + 1) x 40 <= 370.8 (search.cc:386-409); pass 2 raises only bwInter, which no link
    # uses without NICs, to 60 (search.cc:1112-1115)
    nvls=Graph(8, 40.0, 60.0, PATH_NVL, PATH_PIX, 0.0, False, PATTERN_NVLS),
    coll_channels=24, nvls_channels=16, nvls_support=True, max_tree_pattern=PATTERN_BALANCED_TREE,
    nvs_count=1, max_local_ranks=8,
)

H100_2NODES = Topology(
    n_nodes=2, n_ranks=16, nvlink_gbs=H100_NVLINK_GBS,
    # 8 rings NIC a -> 8 GPUs -> NIC b (crossNic=2), 48 GB/s each, 8 x 48 = 384 >= totalBw 370.8 (estimate)
    ring=Graph(8, 48.0, 48.0, PATH_NVL, PATH_PIX, 0.0, False, PATTERN_RING),
    # balanced tree fails at PIX; the SM90 fallback NCCL_TOPO_PATTERN_TREE finds 8 x 48 (estimate)
    tree=Graph(8, 48.0, 48.0, PATH_NVL, PATH_PIX, 0.0, False, PATTERN_TREE),
    # 8 heads: (8 + 1) x 40 <= 370.8; pass 2 raises bwInter to 48 (estimate)
    nvls=Graph(8, 40.0, 48.0, PATH_NVL, PATH_PIX, 0.0, False, PATTERN_NVLS),
    coll_channels=16, nvls_channels=16, nvls_support=True, max_tree_pattern=PATTERN_TREE,
    cpu_arch="x86", cpu_vendor="intel", nvs_count=1, max_local_ranks=8,
)


# --- What the v2.26.2 search yields on DGX/HGX A100 (SM80, 8 GPUs on NVSwitch, no NVLS) ---
# Inputs: GPU<->NVSwitch 12 links x SM80_NVLINK_BW 20 = 240 GB/s (topo.h:16, 244; topo.cc:587-589);
# PCIe Gen4 x16 16 x 120 / 80 = 24 GB/s (topo.cc:410, 476); NVLS off: multicast unsupported on SM80
# (transport/nvls.cc:168) and the NVLS search returns at ccMin < 90 (search.cc:973). SM80 search speeds
# (search.cc:913-914): intra {40, 30, 20, ..}, inter {48, 30, 28, 24, 20, 18, 15, 12, ..}.
# ncclTopoDupChannels doubles a graph with bwIntra >= 25 on SM80 (the ccMin > 80 cut-off, search.cc:901-902).
# Tree: min = max channels = the ring's (init.cc:848-849), totalBw x 8/7 (search.cc:1011).
# Pass 2 raises bw for rings, only bwIntra for trees while bwIntra < 2 bwInter (search.cc:1105-1121).

A100_1NODE = Topology(
    n_nodes=1, n_ranks=8, nvlink_gbs=A100_NVLINK_GBS,
    # maxBw = totalBw = 240 (search.cc:19-37); first speed 40 (search.cc:1012); 6 rings x 40 use the
    # 240 GB/s NVSwitch links up and 6 x 40 >= totalBw 240 ends pass 1 (search.cc:1036); doubled to
    # 12 x 20 (search.cc:904-909); pass 2 at 30 and 40 cannot hold 12 channels (search.cc:421, 1107-1110)
    ring=Graph(12, 20.0, 20.0, PATH_NVL, PATH_PIX, 0.0, True, PATTERN_RING),
    # 12 channels required: 40 x 12 and 30 x 12 exceed totalBw 274.3, so start at 20 (search.cc:1012);
    # 12 x 20 chains fit (12 x 20 = 240) and hit maxChannels (search.cc:512); 20 < 25: no doubling; pass 2
    # bwIntra 30 needs 12 x 30 = 360 > 240 on the middle GPUs and fails
    tree=Graph(12, 20.0, 20.0, PATH_NVL, PATH_PIX, 0.0, True, PATTERN_BALANCED_TREE),
    min_comp_cap=80, max_comp_cap=80,
    coll_channels=24,  # 12 x 2 in connectRings (connect.cc:452)
    nvls_support=False, max_tree_pattern=PATTERN_BALANCED_TREE,
    cpu_vendor="amd",  # DGX A100: 2 x EPYC 7742; one node reads neither llMaxBw's CPU row nor netOverhead
    nvs_count=1, max_local_ranks=8,
)

# Two DGX A100: 8 x CX-6 HDR per node, 50000 Mb/s x 4 lanes = 200000 Mb/s (net_ib.cc:464-472, 631)
# -> 25 GB/s (topo.cc:372), latency 0 (net_ib.cc:782). Each PEX88096 switch holds 2 GPUs + 2 NICs and
# is flattened to one level (topo.cc:190-215), so GPU 2k, 2k+1 reach NICs 2k, 2k+1 at PIX with
# min(24, 24, 25) = 24 GB/s; other NICs by PXN through the pair GPU (paths.cc:668-685).
# maxBw 24, totalBw 240. AMD Rome host: llMaxBw row 1 (tuning.cc:220), netOverhead 2 us (tuning.cc:193).
A100_2NODES_IB = Topology(
    n_nodes=2, n_ranks=16, nvlink_gbs=A100_NVLINK_GBS,
    # first inter speed <= maxBw 24 is 24 (search.cc:1012); one 24 GB/s ring per 25 GB/s NIC
    # (search.cc:611, 621): NET 2k -> GPU 2k -> GPU 2k-1 -> .. -> GPU 2k+1 -> NET 2k (NVSwitch neighbour
    # order, search.cc:281-297), 8 x 24 = 192 < 240; sameChannels replay fails on the used PCIe link
    # (search.cc:1044); lower speeds down to 12 give at most 16 x 12 = 192, not better (search.cc:429,
    # 1082); 24 < 25: no doubling; pass 2 at 28, 30, 48 exceeds the NIC (search.cc:611)
    ring=Graph(8, 24.0, 24.0, PATH_NVL, PATH_PIX, 0.0, False, PATTERN_RING),
    # balanced tree: NET k -> GPU a, both GPUs of the PIX pair send back 12 each (search.cc:545-548);
    # 8 x 24 found = maxChannels (search.cc:512); pass 2 raises bwIntra 24 -> 28 -> 30 (8 x 30 = 240
    # fits the NVLink), 48 fails (search.cc:1117-1120); the tuner uses bwIntra on 2 nodes (tuning.cc:250)
    tree=Graph(8, 30.0, 24.0, PATH_NVL, PATH_PIX, 0.0, False, PATTERN_BALANCED_TREE),
    min_comp_cap=80, max_comp_cap=80,
    coll_channels=16,  # 8 x 2 (connect.cc:452); the SM90 4-per-search-channel rule does not apply (:466)
    nvls_support=False, max_tree_pattern=PATTERN_BALANCED_TREE,
    cpu_arch="x86", cpu_vendor="amd", nvs_count=1, max_local_ranks=8,
)

# Two AWS p4de.24xlarge: 4 EFA NICs per node, reported at 100000 Mb/s -> 12.5 GB/s (topo.cc:372); one
# PCIe switch per 2 GPUs + 1 NIC (aws-ofi-nccl topology/p4de-24xl-topo.xml), GPU<->own NIC PIX at
# min(24, 24, 12.5) = 12.5 GB/s (the file says 8 GT/s, i.e. 12 GB/s links: same graphs, maxBw 12);
# latency 75 us: aws-ofi-nccl's p4de platform entry (src/platform-aws.cpp, ".latency = 75.0"; 150 us in
# plugin versions without it), read at topo.cc:373, 1212 into latencyInter (search.cc:616). Intel
# Cascade Lake host: llMaxBw row 0, netOverhead 1 us. Estimates: plugin version, and that no
# aws-ofi-nccl tuner plugin overrides the choice.
A100_2NODES_EFA4 = Topology(
    n_nodes=2, n_ranks=16, nvlink_gbs=A100_NVLINK_GBS,
    # first inter speed <= 12.5 is 12 (search.cc:1012); one ring per NIC (12.5 - 12 < 12, search.cc:611):
    # 4 x 12 = 48; at 6 GB/s (6/12 > .49, search.cc:1082) 8 x 6 = 48, not better; no doubling; pass 2
    # at 15 and up exceeds the NIC
    ring=Graph(4, 12.0, 12.0, PATH_NVL, PATH_PIX, 75.0, False, PATTERN_RING),
    # 4 balanced trees at 12 (the 2 GPUs behind each NIC send 6 each), = maxChannels; pass 2 raises
    # bwIntra 12 -> 15 -> 18 -> 20 -> 24 and stops at 24 = 2 x bwInter (search.cc:1117)
    tree=Graph(4, 24.0, 12.0, PATH_NVL, PATH_PIX, 75.0, False, PATTERN_BALANCED_TREE),
    min_comp_cap=80, max_comp_cap=80,
    coll_channels=8,  # 4 x 2 (connect.cc:452)
    nvls_support=False, max_tree_pattern=PATTERN_BALANCED_TREE,
    cpu_arch="x86", cpu_vendor="intel", nvs_count=1, max_local_ranks=8,
)

# Two AWS p5.48xlarge: as H100_2NODES (the per-node network is the same 3,200 Gb/s, here 32 x 100 Gb/s EFA;
# the graphs over 32 NICs were not re-derived: an estimate, which takes aws-ofi-nccl to present each GPU's 4 NICs
# as one 48 GB/s path; were they four 12.5 GB/s devices, rings would run 4g at 12, undoubled), with latencyInter 75 us, aws-ofi-nccl's
# p5/p5e platform entry (src/platform-aws.cpp, regex "^p5(e?\..*)", ".latency = 75.0"), read as for p4de.
H100_2NODES_EFA = replace(H100_2NODES, **{name: replace(getattr(H100_2NODES, name), latency_inter_us=75.0)
                                           for name in ("ring", "tree", "nvls")})


# --- The same systems with fewer GPUs of a node in the communicator -------------------------------------
# ncclTopoTrimSystem keeps only the communicator's GPUs (and, on one node, drops the NICs), so the search
# runs again on g GPUs. What changes with g on SM90 over NVSwitch, each GPU with its own NIC:
SM90_INTRA_SPEEDS = (60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0)  # search.cc:918
SM90_INTER_SPEEDS = (48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0, 2.4, 1.2,
                     0.24, 0.12)  # search.cc:919
H100_NIC_PATH_GBS = 48.0  # GPU -> own NIC: min(PCIe Gen5 x16 48, NIC 50), the search's maxBw with NICs


def nvls_graph(gpus: int, speeds: tuple, nvlink_gbs: float, nic_gbs: float | None = None) -> Graph:
    """The NVLS graph on ``gpus`` GPUs of a node: one channel per GPU (a head; search.cc:975, forced on
    one node, :980-983). Each head's channel loads its own GPU's NVLink twice and every other GPU's once,
    both ways (ncclTopoSearchTryNvls, search.cc:386-409), so (g + 1) x bw must fit the NVLink; with NICs
    the head's NIC path caps bw (maxBw, search.cc:1010). Pass 2 then raises bwInter a speed at a time
    while it is below 2 x bwIntra and a link carries it (search.cc:1112-1115): nothing carries it
    without NICs, the NIC path with them. ``gpus`` <= 2: none (NVLS off, transport/nvls.cc:157)."""
    if gpus <= 2:
        return Graph()
    cap = speeds[0] if nic_gbs is None else nic_gbs
    index = next(i for i, s in enumerate(speeds) if s <= cap and (gpus + 1) * s <= nvlink_gbs)
    intra = inter = speeds[index]
    while index > 0 and inter < 2 * intra and speeds[index - 1] <= cap:
        index -= 1
        inter = speeds[index]
    return Graph(gpus, intra, inter, PATH_NVL, PATH_PIX, 0.0, False, PATTERN_NVLS)


def h100_node(gpus: int) -> Topology:
    """``gpus`` H100s of one HGX node: rings as on 8 (each GPU's 370.8 GB/s to the NVSwitch carries 6 rings at
    60 whatever the count, doubled to 12 x 30); NVLS with one head per GPU. Trees are kept as on 8 (an estimate:
    held to the rings' 12 channels, on 2 to 4 GPUs the search may find 12 chains at 40 or 60, which moves no
    choice the tuner makes from 1 KiB to 2 GiB, the tree's estimate staying behind the ring's and NVLS's)."""
    return replace(node_of(H100_1NODE, gpus), nvls_support=gpus > 2,
                   nvls=nvls_graph(gpus, SM90_INTRA_SPEEDS, H100_NVLINK_GBS))


def h100_nodes(nodes: int, gpus: int, base: Topology = H100_2NODES) -> Topology:
    """``nodes`` HGX H100 nodes with ``gpus`` GPUs each in the communicator (an estimate, as H100_2NODES
    is): one ring per GPU and its NIC at 48 GB/s (NET a -> g GPUs -> NET b); ncclTopoDupChannels doubles
    it to 2g x 24 where g <= 4 (search.cc:898-910: bwIntra < 50 keeps more than 4 channels); trees take
    the ring's channel count (init.cc:858-859) and where doubled, pass 2 raises their bwIntra 24 -> 48,
    stopping at 2 x bwInter (search.cc:1116-1119); NVLS one head per GPU through its NIC. Compute channels:
    the rings doubled (connect.cc:452), again while bwIntra > 45 and under 16 (:466)."""
    doubled = gpus <= 4
    channels, bw = (2 * gpus, H100_NIC_PATH_GBS / 2) if doubled else (gpus, H100_NIC_PATH_GBS)
    coll = 2 * channels * (2 if bw > 45.0 and 2 * channels < 16 else 1)
    ring = replace(base.ring, n_channels=channels, bw_intra_gbs=bw, bw_inter_gbs=bw)
    tree = replace(base.tree, n_channels=channels, bw_intra_gbs=2 * bw if doubled else bw, bw_inter_gbs=bw)
    nvls = nvls_graph(gpus, SM90_INTER_SPEEDS, H100_NVLINK_GBS, H100_NIC_PATH_GBS)
    nvls = replace(nvls, latency_inter_us=base.nvls.latency_inter_us) if nvls.n_channels else nvls
    return replace(base, n_nodes=nodes, n_ranks=nodes * gpus, max_local_ranks=gpus, ring=ring, tree=tree,
                   nvls=nvls, nvls_support=gpus > 2, coll_channels=min(coll, 32))


def node_of(one: Topology, gpus: int) -> Topology:
    """``gpus`` GPUs of a one-node preset whose search was not rerun for fewer (A100: no NVLS, and rings
    and trees over NVSwitch do not depend on the count): the same graphs over fewer ranks."""
    return replace(one, n_ranks=gpus, max_local_ranks=gpus)


def nodes_sharing(many: Topology, nodes: int, gpus: int) -> Topology:
    """``nodes`` x ``gpus`` of a multi-node preset whose search was derived for 8 GPUs a node only (an
    estimate): the channels stay and get gpus/8 of the per-node network (each GPU brings its own NIC's
    share), intra-node bandwidth too, which the tuner uses on two nodes: one GPU per node must not get
    the whole node's network."""
    share = min(1.0, gpus / 8)
    scaled = {name: replace(getattr(many, name), bw_inter_gbs=getattr(many, name).bw_inter_gbs * share,
                            bw_intra_gbs=getattr(many, name).bw_intra_gbs * share)
              for name in ("ring", "tree", "nvls")}
    return replace(many, n_nodes=nodes, n_ranks=nodes * gpus, max_local_ranks=gpus, **scaled)


def with_nic(builders: tuple, ratio: float) -> tuple:
    """A system's builders with each GPU's path to the network ``ratio`` (<= 1) x the one its graphs were derived
    for (:data:`NIC_BYTES_PER_S`, under :data:`NIC_PATH_LIMIT`): across nodes each graph's network speed scales
    with it, as the search picks its speeds from the NIC's (search.cc:1012, 611; an estimate, as
    :func:`nodes_sharing`); a ring's speed is one along the ring, so its NVLink speed follows; a tree's stays
    within twice the network's (search.cc:1117); NVLS heads keep their NVLink speed. One node has no NIC in its
    graphs."""
    if ratio > 1:
        raise ValueError("with_nic scales the network down only")
    one, many = builders

    def scaled(nodes: int, gpus: int) -> Topology:
        topo = many(nodes, gpus)
        ring, tree, nvls = topo.ring, topo.tree, topo.nvls
        tree_inter = tree.bw_inter_gbs * ratio
        return replace(topo, ring=replace(ring, bw_inter_gbs=ring.bw_inter_gbs * ratio,
                                          bw_intra_gbs=ring.bw_intra_gbs * ratio),
                       tree=replace(tree, bw_inter_gbs=tree_inter, bw_intra_gbs=min(tree.bw_intra_gbs, 2 * tree_inter)
                                    if tree.bw_intra_gbs != tree.bw_inter_gbs else tree.bw_intra_gbs * ratio),
                       nvls=replace(nvls, bw_inter_gbs=nvls.bw_inter_gbs * ratio))

    return one, scaled


#: each GPU's share of the network (B/s) the graphs below were derived for: a 400 Gb/s ConnectX-7 (HGX H100), 32 x
#: 100 Gb/s EFA over 8 GPUs (p5), a 200 Gb/s HDR ConnectX-6 (HGX A100), 4 x 100 Gb/s EFA over 8 (p4de)
NIC_BYTES_PER_S = {"hgx-h100": 50e9, "aws-p5": 50e9, "hgx-a100": 25e9, "aws-p4de": 6.25e9}
#: what a GPU's PCIe link lets through to its NIC (B/s), whatever the NIC: Gen5 x16 48 GB/s on H100, Gen4 x16 24 on
#: A100 (topo.cc:408-411, 476; 16 lanes x 240 or 120 / 80)
NIC_PATH_LIMIT = {"hgx-h100": 48e9, "aws-p5": 48e9, "hgx-a100": 24e9, "aws-p4de": 24e9}


#: what each system's search builds for g GPUs on one node, and for N nodes of g GPUs
BUILDERS = {
    "hgx-h100": (h100_node, h100_nodes),
    "aws-p5": (h100_node, partial(h100_nodes, base=H100_2NODES_EFA)),
    "hgx-a100": (partial(node_of, A100_1NODE), partial(nodes_sharing, A100_2NODES_IB)),
    "aws-p4de": (partial(node_of, A100_1NODE), partial(nodes_sharing, A100_2NODES_EFA4)),
}
