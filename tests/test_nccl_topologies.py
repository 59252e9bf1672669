"""The graphs NCCL's search builds for g < 8 GPUs of an HGX H100 node, worked by hand from v2.26.5-1's
src/graph/search.cc (speeds :918-919, NVLS heads :975-983, TryNvls :386-409, DupChannels :898-910, pass 2
:1105-1120), src/init.cc:858-859 (trees take the ring's channels), src/graph/connect.cc:452, 466 and
src/transport/nvls.cc:157 (NVLS off at <= 2 GPUs). Expected values are arithmetic, not calls."""

import pytest

from costmodel.cost.nccl import choice, topology
from costmodel.formulas import nccl_topologies as nx

NVLINK = 18 * 20.6  # 370.8 GB/s per GPU to the NVSwitch


def test_eight_gpus_reproduce_the_hand_derived_presets():
    assert nx.h100_node(8) == nx.H100_1NODE
    assert nx.h100_nodes(2, 8) == nx.H100_2NODES
    assert nx.h100_nodes(2, 8, base=nx.H100_2NODES_EFA) == nx.H100_2NODES_EFA


# gpus: (channels, bwIntra, bwInter) on one node. (g + 1) x s <= 370.8 over {60, 50, 40, ...}; pass 2 raises
# bwInter towards 60 while it is below 2 x bwIntra.
ONE_NODE_NVLS = {3: (3, 60.0, 60.0),   # 4 x 60 = 240
                 4: (4, 60.0, 60.0),   # 5 x 60 = 300
                 5: (5, 60.0, 60.0),   # 6 x 60 = 360
                 6: (6, 50.0, 60.0),   # 7 x 60 = 420 > 370.8; 7 x 50 = 350; 50 < 100 -> 60
                 7: (7, 40.0, 60.0),   # 8 x 50 = 400 > 370.8; 8 x 40 = 320; 40 -> 50 -> 60
                 8: (8, 40.0, 60.0)}   # 9 x 40 = 360


@pytest.mark.parametrize("gpus", sorted(ONE_NODE_NVLS))
def test_one_node_nvls_has_a_head_per_gpu(gpus):
    graph = nx.h100_node(gpus).nvls
    assert (graph.n_channels, graph.bw_intra_gbs, graph.bw_inter_gbs) == ONE_NODE_NVLS[gpus]
    assert (ONE_NODE_NVLS[gpus][0] + 1) * ONE_NODE_NVLS[gpus][1] <= NVLINK


@pytest.mark.parametrize("gpus", [1, 2])
def test_nvls_is_off_at_two_gpus_or_fewer(gpus):
    assert not nx.h100_node(gpus).nvls_support and nx.h100_node(gpus).nvls.n_channels == 0
    assert not nx.h100_nodes(3, gpus).nvls_support


@pytest.mark.parametrize("gpus", [2, 4, 6])
def test_rings_on_one_node_do_not_depend_on_the_count(gpus):
    topo = nx.h100_node(gpus)
    assert (topo.ring, topo.tree, topo.n_ranks, topo.max_local_ranks) == (nx.H100_1NODE.ring, nx.H100_1NODE.tree,
                                                                          gpus, gpus)


@pytest.mark.parametrize("gpus", [2, 3, 4])
@pytest.mark.parametrize("tree_gbs", [40.0, 60.0])
def test_faster_trees_on_few_gpus_would_change_no_choice(gpus, tree_gbs):
    """The trees are kept as on 8 GPUs (12 x 30); on 2 to 4 the search may find 12 chains at 40 or 60. Either way
    the tuner picks the same algorithm and protocol, with the same time, at every size from 1 KiB to 2 GiB."""
    from dataclasses import replace

    from costmodel.formulas import nccl_tuner as nt

    kept = nx.h100_node(gpus)
    faster = replace(kept, tree=replace(kept.tree, bw_intra_gbs=tree_gbs, bw_inter_gbs=tree_gbs))
    for size in (2**k for k in range(10, 32)):
        assert nt.choose("all_reduce", size, kept) == nt.choose("all_reduce", size, faster)


# gpus: ring (channels, bw), tree (channels, bwIntra, bwInter), NVLS (channels, bwIntra, bwInter), compute channels
MULTI_NODE = {
    # one ring per GPU's NIC at 48; g <= 4 doubles to 2g x 24; trees doubled too, pass 2 raises bwIntra
    # 24 -> 30 -> 40 -> 42 -> 45 -> 48 = 2 x 24; compute channels 2 x ring (bwIntra 24 is not > 45)
    1: ((2, 24.0), (2, 48.0, 24.0), None, 4),
    4: ((8, 24.0), (8, 48.0, 24.0), (4, 48.0, 48.0), 16),  # NVLS 5 x 48 = 240 <= 370.8
    # g > 4: no doubling (bwIntra < 50 with more than 4 channels); compute 2 x 6 = 12 < 16 and 48 > 45: x 2
    6: ((6, 48.0), (6, 48.0, 48.0), (6, 48.0, 48.0), 24),  # NVLS 7 x 48 = 336
    7: ((7, 48.0), (7, 48.0, 48.0), (7, 45.0, 48.0), 28),  # NVLS 8 x 48 = 384 > 370.8; 8 x 45 = 360; -> 48
}


@pytest.mark.parametrize("gpus", sorted(MULTI_NODE))
def test_multi_node_graphs_follow_the_nics(gpus):
    ring, tree, nvls, coll = MULTI_NODE[gpus]
    topo = nx.h100_nodes(3, gpus)
    assert (topo.ring.n_channels, topo.ring.bw_intra_gbs, topo.ring.bw_inter_gbs) == (ring[0], ring[1], ring[1])
    assert (topo.tree.n_channels, topo.tree.bw_intra_gbs, topo.tree.bw_inter_gbs) == tree
    if nvls is None:
        assert topo.nvls.n_channels == 0
    else:
        assert (topo.nvls.n_channels, topo.nvls.bw_intra_gbs, topo.nvls.bw_inter_gbs) == nvls
    assert (topo.coll_channels, topo.n_ranks, topo.n_nodes, topo.max_local_ranks) == (coll, 3 * gpus, 3, gpus)


def test_four_gpus_all_reduce_large_buffers_on_rings():
    """4 GPUs: NVLS 4 heads x 60 = 240 GB/s bus, x 5/6 = 200 GB/s; ring 12 x 30 = 360 bus, x 4 / (2 x 3) =
    240 GB/s: the tuner takes the ring, whose 1 GiB takes S / 240 GB/s plus its latency (tens of us)."""
    size = 2**30
    algo, proto, seconds = choice("hgx-h100", "all-reduce", size, 1, 4)
    assert (algo, proto) == ("ring", "Simple")
    assert size / 240e9 < seconds < size / 240e9 + 100e-6
    assert topology("hgx-h100", 1, 8).nvls.n_channels == 8 and choice("hgx-h100", "all-reduce", size, 1, 8)[0] == "nvls"


def test_a_variant_with_other_nics_scales_the_networks_speeds(tmp_path):
    """h100-sxm with four 400 Gb/s NICs a node (25 GB/s a GPU, where the preset's path carries 48): across nodes
    NCCL's graphs run at 25/48 of their network speed, so a large all-gather's rings over 2 x 8 take 48/25 the
    bandwidth time (an all-reduce's NVLS-tree less: its heads keep their NVLink speed); inside a node nothing changes; the tuner's name says so; a faster NIC behind the same PCIe link changes
    nothing."""
    from costmodel.cost.network import calibration_used, collective_seconds
    from costmodel.cost.placement import Placement
    from costmodel.specs.load import load_hardware

    spec = tmp_path / "roce.toml"
    spec.write_text('extends = "h100-sxm"\nname = "h100-4nic"\n[[network]]\nname = "roce"\nreplaces = "infiniband"\n'
                    'kind = "ethernet"\nbandwidth_bytes_per_s = 25e9\nsource = "4 x 400 Gb/s a node / 8 GPUs"\n')
    half, full = load_hardware(str(spec)), load_hardware("h100-sxm")
    across, inside = Placement("data", 16, 8, 2), Placement("tp", 8, 8, 1)
    size = 2**33

    def bandwidth_time(hw, where_, op="all-gather"):
        return collective_seconds(hw, op=op, buffer_bytes=size, where_=where_) - collective_seconds(
            hw, op=op, buffer_bytes=size / 2, where_=where_)

    assert bandwidth_time(half, across) == pytest.approx(48 / 25 * bandwidth_time(full, across), rel=1e-6)  # rings
    assert bandwidth_time(full, across, "all-reduce") < bandwidth_time(half, across, "all-reduce")
    assert collective_seconds(half, op="all-reduce", buffer_bytes=size, where_=inside) == collective_seconds(
        full, op="all-reduce", buffer_bytes=size, where_=inside)
    assert "hgx-h100, NIC 25 GB/s a GPU" in calibration_used(half, "all-reduce", across)
    faster = tmp_path / "faster.toml"  # behind the same PCIe Gen5 x16 link (48 GB/s) an 800 Gb/s NIC carries no more
    faster.write_text(spec.read_text().replace("25e9", "100e9").replace("h100-4nic", "h100-800g"))
    assert collective_seconds(load_hardware(str(faster)), op="all-reduce", buffer_bytes=size, where_=across) == \
        collective_seconds(full, op="all-reduce", buffer_bytes=size, where_=across)


def test_a_p4de_variant_with_a_faster_nic_than_its_graphs_is_one_line(tmp_path):
    """p4de's graphs were derived for 6.25 GB/s a GPU (4 x 100 Gb/s EFA over 8 GPUs); a variant with more is refused:
    the graphs are scaled down only."""
    from hostile import assert_refused, run

    spec = tmp_path / "p4de-fast.toml"
    spec.write_text('extends = "aws-p4de"\nname = "p4de-fast"\n[[network]]\nname = "efa"\nbandwidth_bytes_per_s = 12.5e9\n')
    assert_refused(run(["comm", "--model", "llama3-8b", "--hardware", str(spec), "--dp", "16", "--tokens", "4096"]),
                   "scales them down only")
