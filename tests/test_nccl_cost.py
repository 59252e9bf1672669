"""cost/nccl.py: the tuner's time is the same whether a layout comes as numbers or as one element of
an array (both dedupe paths), and letters evaluate to it."""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp

from costmodel.cost.nccl import PRESETS, TunedCost, choice

GROUPS = [(1, 2), (1, 4), (1, 8), (2, 8), (4, 8), (16, 8), (2, 1), (8, 2), (1, 1)]


@pytest.mark.parametrize("preset", sorted(PRESETS))
@pytest.mark.parametrize("op", ["all-reduce", "all-gather", "reduce-scatter", "broadcast", "reduce"])
@pytest.mark.parametrize("huge, hop", [(False, None), (True, None), (False, 35.5)])
@pytest.mark.parametrize("fits", [(), (("ring", 3e-6, 1.1), ("nvls", 1e-6, 0.9), ("tree", 2e-6, 1.3))])
def test_arrays_equal_numbers(preset, op, huge, hop, fits):
    """Every element as the numbers path prices it, with calibrations per picked algorithm too."""
    rng = np.random.default_rng(7)
    pick = rng.integers(0, len(GROUPS), 400)
    nodes = np.array([GROUPS[i][0] for i in pick], dtype=float)
    per_node = np.array([GROUPS[i][1] for i in pick], dtype=float)
    sizes = np.floor(2.0 ** rng.uniform(3, 52 if huge else 36, 400))  # past 2^51: the two-sort path
    arrays = TunedCost(preset, op, nodes, per_node, "auto", 4.4e-6, hop_us=hop, by_algorithm=fits).seconds(sizes)
    for i in range(0, 400, 7):
        number = TunedCost(preset, op, int(nodes[i]), int(per_node[i]), "auto", 4.4e-6,
                           hop_us=hop, by_algorithm=fits).seconds(float(sizes[i]))
        assert arrays[i] == pytest.approx(number, rel=1e-12, abs=0)


def dgxc_fit(tmp_path):
    """A spec fitted on the DGX Cloud log, run with NCCL's own choice: a fit of model nccl under 'auto'."""
    from pathlib import Path

    from hostile import run

    out = tmp_path / "dgxc.json"
    log = Path(__file__).resolve().parents[2] / "shared" / "data" / "nccl-tests" / "other-formats" / \
        "dgxc-h100x8-allreduce.out"
    assert run(["validate", str(log), "--hardware", "h100-sxm", "--fit", "--out", str(out)]).code == 0
    return out


def test_an_auto_run_takes_the_fit_of_the_algorithm_nccl_picks(tmp_path):
    """A spec fitted on the shipped ring and NVLS all-reduce logs prices NCCL's own choice with the fit of what it
    picks at each size (ring below the switch, NVLS above it), as numbers and as letters, says so, and names the pick
    in validate's rows; the DGX Cloud log (another 8 x H100, NCCL's default) is then predicted better than from the
    datasheet. A ring run on a spec fitted on NCCL's own choice alone takes that fit, and says so."""
    import json
    from pathlib import Path

    from costmodel.cost.network import calibration_used, link_cost
    from costmodel.cost.placement import Placement
    from costmodel.specs.load import load_hardware
    from hostile import run

    logs = Path(__file__).resolve().parents[1] / "hardware" / "measured" / "h100-8gpu-together-nccl-tests"
    out = tmp_path / "fitted.json"
    assert run(["validate", str(logs / "all_reduce_ring.out"), str(logs / "all_reduce_nvls.out"), "--hardware",
                "h100-sxm", "--fit", "--out", str(out)]).code == 0
    fits = {c["algorithm"]: c for c in json.loads(out.read_text())["calibration"]}
    fitted, sheet, where_ = load_hardware(str(out)), load_hardware("h100-sxm"), Placement("tp", 8, 8, 1)
    for size in (2**20, 2**30):
        algo = choice("hgx-h100", "all-reduce", size, 1, 8)[0]
        fit = fits[algo]
        assert link_cost(fitted, "all-reduce", where_).seconds(size) == pytest.approx(
            fit["latency_s"] + fit["scale"] * link_cost(sheet, "all-reduce", where_).seconds(size), rel=1e-12)
    assert {choice("hgx-h100", "all-reduce", s, 1, 8)[0] for s in (2**20, 2**30)} == {"ring", "nvls"}
    assert "all-reduce/nvls x 0.970 + 1.0 us (at 8 ranks; where NCCL picks nvls)" in calibration_used(fitted, "all-reduce", where_)
    from costmodel import api  # letters: each pick's fit once they are numbers

    formula = api.formula("llama3-8b", hardware=str(out), tp=8, tokens=8192)
    assert formula.at(formula.cost.step.step_s) == pytest.approx(
        api.cost("llama3-8b", hardware=str(out), tp=8, tokens=8192).step.step_s, rel=1e-12)
    ring_log = run(["validate", str(logs / "all_reduce_ring.out"), "--hardware", str(dgxc_fit(tmp_path)), "--json"])
    assert all("the fit of NCCL's own choice" in r["calibration"] for r in json.loads(ring_log.stdout)["rows"])
    dgxc = Path(__file__).resolve().parents[2] / "shared" / "data" / "nccl-tests" / "other-formats" / \
        "dgxc-h100x8-allreduce.out"
    errors = {}
    for spec in ("h100-sxm", str(out)):
        data = json.loads(run(["validate", str(dgxc), "--hardware", spec, "--json"]).stdout)
        errors[spec] = data["median_abs_error_pct"]
        assert all(r["protocol"] for r in data["rows"])
    assert (round(errors["h100-sxm"], 1), round(errors[str(out)], 1)) == (3.4, 2.0)
    readme = " ".join((Path(__file__).resolve().parents[1] / "README.md").read_text().split())
    assert "the DGX Cloud log goes from 3.4% to 2.0%" in readme


def test_a_measured_hop_keeps_nccls_pick_and_times_it_by_hand():
    """2 x 8 p5, 8 KiB all-reduce: NCCL (75 us declared) picks tree/LL; with a 35.5 us hop its time is
    base 6.8 + 2 ((8 - 1) x NVLink 0.6 + log2(2) x (NET tree LL 5.0 + 35.5)) us (tuning.cc:298-347) plus
    8192 B over tree/LL's bandwidth x the tree correction, the same as without the hop."""
    declared = choice("aws-p5", "all-reduce", 8192, 2, 8)
    measured = choice("aws-p5", "all-reduce", 8192, 2, 8, hop_us=35.5)
    assert declared[:2] == measured[:2] == ("tree", "LL")
    latency_declared = 6.8 + 2 * (7 * 0.6 + (5.0 + 75.0))
    latency_measured = 6.8 + 2 * (7 * 0.6 + (5.0 + 35.5))
    assert declared[2] - measured[2] == pytest.approx((latency_declared - latency_measured) * 1e-6, rel=1e-12)
    assert choice("aws-p5", "all-reduce", 8192, 1, 8, hop_us=35.5) == choice("aws-p5", "all-reduce", 8192, 1, 8)


@pytest.mark.slow
def test_the_shipped_hops_are_what_the_fit_gives():
    import sys
    from pathlib import Path

    bench = Path(__file__).resolve().parents[1] / "benchmarks"
    if not (bench.parent.parent / "shared" / "data").is_dir():
        pytest.skip("../shared/data is beside the checkout (CI links it)")
    sys.path.insert(0, str(bench))
    import fit_network_latency as f

    from costmodel.specs.load import load_hardware

    said = {}
    for name, log in f.SYSTEMS.items():
        hardware = load_hardware(name)
        assert f.fit(hardware, f.LOGS / log) * 1e-6 == pytest.approx(hardware.nccl.network_latency_s, rel=1e-12)
        before, after = (f.rows(hardware, f.LOGS / log, hop) for hop in (None, hardware.nccl.network_latency_s * 1e6))
        said[name] = (hardware.nccl.network_latency_s * 1e6, f.median_abs(before, *f.SMALL), f.median_abs(after, *f.SMALL))
    readme = " ".join((bench.parent / "README.md").read_text().split())  # the README's sentence, from the fit
    (p5_hop, p5_before, p5_after), (p4de_hop, p4de_before, p4de_after) = said["aws-p5"], said["aws-p4de"]
    assert (f"{p5_hop:g} us on p5, {p4de_hop:g} us on p4de" in readme and f"p5's small messages went from "
            f"{p5_before:.0f}% too slow to {p5_after:.1f}%, p4de's from {p4de_before:.0f}% to {p4de_after:.1f}%" in readme)


def test_letters_evaluate_to_the_number():
    S, N, g = sp.symbols("S N g", positive=True)
    expr = TunedCost("hgx-h100", "all-reduce", N, g, "auto", 4.4e-6).seconds(S)
    number = TunedCost("hgx-h100", "all-reduce", 2, 8, "auto", 4.4e-6).seconds(2.0**27)
    assert float(expr.subs({S: 2**27, N: 2, g: 8})) == pytest.approx(number, rel=1e-12)
    assert "t_NCCL_all_reduce" in str(expr)


def test_a_tuner_fit_carries_over_to_other_group_sizes(tmp_path):
    """--fit on 8-GPU logs stores t = a + b x NCCL's time for the NVLink level; a 4-GPU group inside a
    node then costs a + b x the tuner's time for 4 GPUs, and a 16-GPU group across nodes keeps the
    plain tuner (the fit says nothing about the network)."""
    import json

    from costmodel.cost.network import link_cost
    from costmodel.cost.placement import Placement
    from costmodel.specs.load import load_hardware
    from hostile import run

    out = tmp_path / "fitted.json"
    assert run(["validate", "shipped:h100-8gpu-together-nccl-tests", "--hardware", "h100-sxm", "--fit",
                "--out", str(out)]).code == 0
    (cal,) = [c for c in json.loads(out.read_text())["calibration"]
              if (c["collective"], c["algorithm"]) == ("all-gather", "ring")]
    assert cal["model"] == "nccl" and cal["ranks"] == 8 and cal["bandwidth_bytes_per_s"] is None
    fitted, sheet = load_hardware(str(out)), load_hardware("h100-sxm")
    size = 64 * 2**20
    for ranks, per_node, nodes in ((4, 4, 1), (8, 8, 1), (16, 8, 2)):
        where_ = Placement("fsdp", ranks, per_node, nodes)
        plain = link_cost(sheet, "all-gather", where_, "ring").seconds(size)
        scaled = link_cost(fitted, "all-gather", where_, "ring").seconds(size)
        expected = plain if nodes > 1 else cal["latency_s"] + cal["scale"] * plain
        assert scaled == pytest.approx(expected, rel=1e-12)


def test_all_gather_and_reduce_scatter_stand_in_for_each_other(tmp_path):
    """A fit of reduce-scatter alone prices all-gather (the same ring pattern mirrored) as a + b x NCCL's all-gather
    time, and says whose fit it is; the README's figures: the all-gather log errs by 4.5% with the reduce-scatter
    log's fit, the reduce-scatter log by 2.3% with the all-gather log's (datasheet: 5.6% and 4.0%). All-reduce
    takes no mirror."""
    import json
    from pathlib import Path

    from costmodel.cost.network import calibration_used, link_cost
    from costmodel.cost.placement import Placement
    from costmodel.specs.load import load_hardware
    from hostile import run

    logs = Path(__file__).resolve().parents[1] / "hardware" / "measured" / "h100-8gpu-together-nccl-tests"
    medians = {}
    for fitted_on, other in (("reduce_scatter_ring", "all_gather_ring"), ("all_gather_ring", "reduce_scatter_ring")):
        out = tmp_path / f"{fitted_on}.json"
        assert run(["validate", str(logs / f"{fitted_on}.out"), "--hardware", "h100-sxm", "--fit", "--out",
                    str(out)]).code == 0
        checked = run(["validate", str(logs / f"{other}.out"), "--hardware", str(out), "--json"])
        medians[other] = round(json.loads(checked.stdout)["median_abs_error_pct"], 1)
        assert all("its mirror" in row["calibration"] for row in json.loads(checked.stdout)["rows"])
    assert medians == {"all_gather_ring": 4.5, "reduce_scatter_ring": 2.3}
    readme = " ".join((Path(__file__).resolve().parents[1] / "README.md").read_text().split())
    assert ("fitted on the reduce-scatter log, the all-gather log errs by 4.5% (5.6% from the datasheet); fitted "
            "on the all-gather log, the reduce-scatter log by 2.3% (4.0%)") in readme
    fitted, sheet = load_hardware(str(tmp_path / "reduce_scatter_ring.json")), load_hardware("h100-sxm")
    (cal,) = json.loads((tmp_path / "reduce_scatter_ring.json").read_text())["calibration"]
    where_ = Placement("fsdp", 8, 8, 1)
    plain = link_cost(sheet, "all-gather", where_, "ring").seconds(2**26)
    assert link_cost(fitted, "all-gather", where_, "ring").seconds(2**26) == pytest.approx(
        cal["latency_s"] + cal["scale"] * plain, rel=1e-12)
    assert "reduce-scatter's fit for all-gather, its mirror" in calibration_used(fitted, "all-gather", where_, "ring")
    assert link_cost(fitted, "all-reduce", where_, "ring").seconds(2**26) == link_cost(
        sheet, "all-reduce", where_, "ring").seconds(2**26)


def test_one_gpu_per_node_on_two_nodes_gets_one_nics_share():
    """HSDP replicas of fsdp 8 on 8-GPU nodes: each replica group has one GPU per node. On two nodes the
    tuner uses the multi-node graph's intra-node bandwidth, which must be scaled to that GPU's share as
    the inter-node one is: two replicas may not be ten times faster per byte than three (a notebook
    found 5.3 ms against 55.9 ms for the same 2 GB)."""
    from costmodel.cost.evaluate import evaluate_layout
    from costmodel.specs.layout import Layout
    from costmodel.specs.load import load_hardware, load_model, load_recipe

    def seconds(dp):
        cost = evaluate_layout(load_model("llama3-8b"), load_recipe("megatron"), Layout(dp=dp, fsdp=8, tokens=4096),
                               load_hardware("h100-sxm"))
        return sum(r.seconds for r in cost.collectives if r.collective.axis == "dp")  # each unit's shard

    two, three = seconds(2), seconds(3)
    assert three / 2 < two < three  # a ring over 2 moves (2-1)/2 of S, over 3 (3-1)/3: same link, less data


@pytest.mark.parametrize("size, channels, per_channel, chunk", [
    # 16 NVLS channels (H100), 8 heads: at least 16 KiB of traffic (8 KiB of data) per channel below 128 KiB;
    # then S/16 each, the chunk 128 KiB halved below 64, 8 and 2 loops of 8 chunks per channel
    (4096, 1, 4096, 16384), (64 * 1024, 8, 8192, 16384), (2**20, 16, 2**16, 16384),
    (4 * 2**20, 16, 2**18, 16384), (8 * 2**20, 16, 2**19, 32768),
    # 1,016 cells of 8 KiB at ceil(2 S / 16 / 16 KiB) = 64 cells per channel: the busiest holds 64 cells, not S/16,
    # and 512 KiB is not below 2 x 8 x 32 KiB, so the chunk stays 32 KiB
    (8 * 2**20 - 2**16, 16, 2**19, 32768),
    (64 * 2**20, 16, 2**22, 65536), (2**30, 16, 2**26, 131072),
])
def test_nvls_channels_and_chunks_by_hand(size, channels, per_channel, chunk):
    """NCCL 2.26.2's planner and calcCollChunking (enqueue.cc:497-597, 1877-1887) by hand: 2 S of traffic over
    at most 16 channels in 8 KiB cells; the chunk halves below 64, 8 and 2 loops of 8 chunks on the busiest channel."""
    from costmodel.formulas import nccl_nvls as nvls

    assert nvls.channels_used(size, 16) == (channels, per_channel)
    assert nvls.chunk_bytes(per_channel, 8) == chunk


def test_nvls_all_reduce_adds_two_loops_of_fill_to_the_tuners_time():
    """1 x 8 H100, 16 MiB all-reduce: NCCL picks NVLS/Simple (25 us + S / (8 x 40 x 5/6 GB/s)); the kernel's three
    stages add two loops of 8 x 32 KiB on each of 16 channels at that bandwidth. Other ops and nodes: the tuner's."""
    size, bandwidth = 16 * 2**20, 8 * 40 * 5 / 6  # GB/s = 1e3 B/us
    algo, proto, seconds = choice("hgx-h100", "all-reduce", size, 1, 8)
    assert (algo, proto) == ("nvls", "Simple")
    tuner_us = 25 + size / (1e3 * bandwidth)
    fill_us = 2 * 8 * 32768 * 16 / (1e3 * bandwidth)
    assert seconds == pytest.approx((tuner_us + fill_us) * 1e-6, rel=1e-12)
    arrays = TunedCost("hgx-h100", "all-reduce", np.array([1.0, 1.0]), np.array([8.0, 8.0])).seconds(
        np.array([size, 2.0 * size]))
    assert arrays[0] == pytest.approx(seconds, rel=1e-12)


@pytest.mark.parametrize("size, nodes, chunk", [
    # 2 nodes: 128 KiB, 64 KiB below 4 loops of 8 chunks on the channel (S/16 < 4 MiB), 32 KiB below 1 (512 KiB)
    (4 * 2**20, 2, 32768), (32 * 2**20, 2, 65536), (64 * 2**20, 2, 131072), (2**30, 2, 131072),
    # 4 nodes or more: NCCL_NVLSTREE_MAX_CHUNKSIZE unset caps it at 64 KiB
    (2**30, 4, 65536), (4 * 2**20, 4, 32768),
])
def test_nvls_tree_chunks_by_hand(size, nodes, chunk):
    """calcCollChunking's NVLS-tree branch (enqueue.cc:1888-1899) on a channel's S/16 bytes, 8 heads."""
    from costmodel.formulas import nccl_nvls as nvls

    used, per_channel = nvls.channels_used(size, 16)
    assert nvls.tree_chunk_bytes(per_channel, 8, nodes) == chunk


def test_nvls_tree_adds_three_loops_of_fill_to_the_time_with_the_measured_hop():
    """2 x 8 H100 over EFA (aws-p5), 256 MiB all-reduce: NCCL picks NVLS-tree; its time is the tuner's with the
    measured 35.5 us hop plus three loops (four stages) of 8 x 128 KiB on each of 16 channels at its bandwidth."""
    from costmodel.cost.nccl import TUNED, restricted, topology, with_hop
    from costmodel.formulas import nccl_tuner as nt

    size = 256 * 2**20
    algo, proto, seconds = choice("aws-p5", "all-reduce", size, 2, 8, hop_us=35.5)
    assert (algo, proto) == ("nvls_tree", "Simple")
    topo = restricted(topology("aws-p5", 2, 8), "auto")
    tuner_us = nt.algo_time_us(coll=TUNED["all-reduce"], algo=algo, proto=proto, n_bytes=size, topo=with_hop(topo, 35.5))
    bandwidth = nt.tuned_bandwidth_gbs(coll="all_reduce", algo=algo, proto=proto, topo=topo)
    assert seconds == pytest.approx((tuner_us + 3 * 8 * 131072 * 16 / (1e3 * bandwidth)) * 1e-6, rel=1e-12)


@pytest.mark.parametrize("size, per_channel", [
    (2 * 2**20, 2**18),  # 8 channels of 256 KiB: less than a chunk, the whole of it
    (16 * 2**20, 2**19),  # 2 MiB a channel: its first 512 KiB chunk
])
def test_tree_simple_adds_its_first_chunk_over_every_hop_but_the_slowest(size, per_channel):
    """2 x 8 A100 over 4 EFA NICs (aws-p4de), Simple only: NCCL picks tree/Simple. A chunk (4 MiB / 8 steps =
    512 KiB) is stored and forwarded through 2 x 7 NVLink hops at 240 / 8 = 30 GB/s a channel and 2 network hops at
    4 x 12 / 8 = 6 GB/s a channel; the stream runs at one network hop's speed, so the time adds
    chunk x (14 / 30 + 2 / 6 - 1 / 6) us per KB to the tuner's (with the measured hop), numbers and arrays alike."""
    from costmodel.cost.nccl import TUNED, restricted, topology, with_hop
    from costmodel.formulas import nccl_tuner as nt

    algo, proto, seconds = choice("aws-p4de", "all-reduce", size, 2, 8, hop_us=30.0)
    assert (algo, proto) == ("tree", "Simple")
    topo = restricted(topology("aws-p4de", 2, 8), "auto")
    tuner_us = nt.algo_time_us(coll=TUNED["all-reduce"], algo=algo, proto=proto, n_bytes=size, topo=with_hop(topo, 30.0))
    fill_us = per_channel * (14 / 30 + 2 / 6 - 1 / 6) / 1e3
    assert seconds == pytest.approx((tuner_us + fill_us) * 1e-6, rel=1e-12)
    arrays = TunedCost("aws-p4de", "all-reduce", np.array([2.0, 2.0]), np.array([8.0, 8.0]), hop_us=30.0).seconds(
        np.array([float(size), 2.0 * size]))
    assert arrays[0] == pytest.approx(seconds, rel=1e-12)
    # LL and LL128 forward lines as they arrive; other ops and one GPU: no fill
    from costmodel.cost.nccl import tree_fill_per_byte

    assert tree_fill_per_byte("all_reduce", "tree", "LL128", topo) == 0.0
    assert tree_fill_per_byte("all_gather", "ring", "Simple", topo) == 0.0


def _btree(nranks: int, rank: int) -> tuple[int, int, int]:
    """(up, down0, down1) of NCCL's binary tree (graph/trees.cc ncclGetBtree, v2.26.2), written out for the test."""
    bit = 1
    while bit < nranks and not bit & rank:
        bit <<= 1
    if rank == 0:
        return -1, -1, (bit >> 1) if nranks > 1 else -1
    up = (rank ^ bit) | (bit << 1)
    if up >= nranks:
        up = rank ^ bit
    lowbit = bit >> 1
    down0 = -1 if lowbit == 0 else rank - lowbit
    down1 = -1 if lowbit == 0 else rank + lowbit
    while down1 >= nranks:
        down1 = -1 if lowbit == 0 else rank + lowbit
        lowbit >>= 1
    return up, down0, down1


@pytest.mark.parametrize("nodes", [1, 2, 3, 4, 5, 7, 8, 9, 16, 33, 64])
def test_tree_hops_walk_nccls_binary_tree(nodes):
    """The longest trip of a chunk, leaf to root and back, walked on NCCL's tree over nodes: each level is one
    network hop; a node entered from its first child (down0) takes it on its chain's second GPU under the balanced
    pattern (connect.cc: child 0 on treeIntra[1] unless PATTERN_TREE; child 1 there only in SPLIT_TREE), one NVLink
    hop more each way; the leaf's own chain is p - 1 hops."""
    from costmodel.formulas import nccl_tree
    from costmodel.formulas.nccl_common import PATTERN_BALANCED_TREE, PATTERN_SPLIT_TREE, PATTERN_TREE

    links = {r: _btree(nodes, r) for r in range(nodes)}
    for pattern, extra in ((PATTERN_TREE, {0: 0, 1: 0}), (PATTERN_BALANCED_TREE, {0: 1, 1: 0}),
                           (PATTERN_SPLIT_TREE, {0: 1, 1: 1})):
        longest = (0, 0)  # (network levels, joins) to the root, the most joins among the deepest
        for leaf in range(nodes):
            rank, levels, joined = leaf, 0, 0
            while links[rank][0] != -1:
                parent = links[rank][0]
                joined += extra[0 if links[parent][1] == rank else 1]
                rank, levels = parent, levels + 1
            longest = max(longest, (levels, joined))
        assert nccl_tree.hops(8, nodes, pattern) == (2 * (7 + longest[1]), 2 * longest[0]), (pattern, nodes)


def test_a_fit_leaves_the_logs_launch_floor_out_and_validate_puts_it_back(tmp_path):
    """nccl-tests' one thread launches all 8 GPUs' kernels (8 x launch_s, ~35 us): fitted down to 8 KiB, the rows on
    that floor stay out of the fit, so no fitted offset holds it; validate prices each log with its floor again (the
    calibrated spec errs no more than the datasheet on the logs it was fitted to, reduce-scatter's 8-512 KiB rows
    sit on the floor), while comm and step, one GPU per process, charge one launch_s."""
    import json
    from pathlib import Path

    from costmodel.cost.network import link_cost
    from costmodel.cost.placement import Placement
    from costmodel.specs.load import load_hardware
    from hostile import run

    logs = Path(__file__).resolve().parents[1] / "hardware" / "measured" / "h100-8gpu-together-nccl-tests"
    out = tmp_path / "fitted.json"
    files = [str(p) for p in sorted(logs.glob("*.out"))]
    assert run(["validate", *files, "--hardware", "h100-sxm", "--fit", "--min-bytes", "8KiB", "--out",
                str(out)]).code == 0
    sheet = load_hardware("h100-sxm")
    floor = 8 * sheet.nccl.launch_s
    assert all(c["latency_s"] < floor / 4 for c in json.loads(out.read_text())["calibration"])
    medians = {}
    for spec in ("h100-sxm", str(out)):
        data = json.loads(run(["validate", *files, "--hardware", spec, "--min-bytes", "8KiB", "--json"]).stdout)
        medians[spec] = data["median_abs_error_pct"]
        small = [r for r in data["rows"] if r["collective"] == "reduce-scatter" and 8192 <= r["bytes"] <= 2**19]
        assert small and all(r["predicted_s"] >= floor for r in small)
    assert medians[str(out)] < medians["h100-sxm"]
    fitted, where_ = load_hardware(str(out)), Placement("tp", 8, 8, 1)
    assert link_cost(fitted, "reduce-scatter", where_).seconds(8192) < floor / 2  # one GPU's launch, not 8


def test_a_group_takes_the_fit_made_at_its_own_size():
    """Fits of ring all-reduce at 8 and 4 ranks: a 4-rank group is priced with the 4-rank fit, an 8-rank one with
    the 8-rank fit, a 2-rank one (no fit of its own) with the most ranks' and the words say so; numbers, arrays and
    letters agree."""
    from costmodel.cost.network import calibration_used, link_cost
    from costmodel.cost.placement import Placement
    from costmodel.specs.hardware import Hardware
    from costmodel.specs.load import load_hardware
    from costmodel.specs.load import validate as validate_spec

    sheet = load_hardware("h100-sxm")
    fits = {8: (0.0, 0.980), 4: (6.4e-6, 0.925)}  # the scale and offset a fit of each size gave (made up here)
    spec = sheet.model_dump(exclude_none=True)
    spec["calibration"] = [{"collective": "all-reduce", "algorithm": "ring", "level": "nvlink", "ranks": r,
                            "latency_s": a, "bandwidth_bytes_per_s": None, "model": "nccl", "scale": b,
                            "median_abs_error_pct": 1.0, "source": "test"} for r, (a, b) in fits.items()]
    fitted = validate_spec(Hardware, spec, "test spec")
    size = 2**26
    expected = {}
    for g in (2, 4, 8):
        where_ = Placement("tp", g, g, 1)
        a, b = fits.get(g, fits[8])
        plain = link_cost(sheet, "all-reduce", where_, "ring").seconds(size)
        expected[g] = link_cost(fitted, "all-reduce", where_, "ring").seconds(size)
        assert expected[g] == pytest.approx(a + b * plain, rel=1e-12)
    assert "(at 4 ranks)" in calibration_used(fitted, "all-reduce", Placement("tp", 4, 4, 1), "ring")
    assert "(at 8 ranks, none at 2)" in calibration_used(fitted, "all-reduce", Placement("tp", 2, 2, 1), "ring")
    # a float number of ranks is a number as nccl_fits.by_ranks tells them: priced and named with the 4-rank fit
    assert "(at 4 ranks)" in calibration_used(fitted, "all-reduce", Placement("tp", 4.0, 4.0, 1), "ring")
    groups = np.array([2.0, 4.0, 8.0])
    arrays = link_cost(fitted, "all-reduce", Placement("tp", groups, groups, np.ones(3)), "ring").seconds(size)
    assert list(arrays) == pytest.approx([expected[2], expected[4], expected[8]], rel=1e-12)
    g = sp.Symbol("g", positive=True)
    letters = link_cost(fitted, "all-reduce", Placement("tp", g, g, 1), "ring").seconds(size)
    assert float(letters.subs(g, 4)) == pytest.approx(expected[4], rel=1e-9)


def test_the_group_sizes_an_array_tells_apart_are_those_of_the_ops_own_fits():
    """Fits of ring all-reduce at 8 and 4 ranks, broadcast at 2, all-to-all at 6 (nvlink): an all-reduce group tells
    apart 4 ranks only (8 is every other size's), an all-gather one nothing (no fit of its own or its mirror's); an
    all-reduce under NCCL's choice adds the sizes of the per-algorithm fits it reads (here the ring ones)."""
    from costmodel.cost.nccl_fits import fitted_ranks
    from costmodel.specs.hardware import Hardware
    from costmodel.specs.load import load_hardware
    from costmodel.specs.load import validate as validate_spec

    spec = load_hardware("h100-sxm").model_dump(exclude_none=True)
    made = [("all-reduce", 8), ("all-reduce", 4), ("broadcast", 2), ("all-to-all", 6)]
    spec["calibration"] = [{"collective": op, "algorithm": "ring", "level": "nvlink", "ranks": r, "latency_s": 1e-6,
                            "bandwidth_bytes_per_s": None, "model": "nccl", "scale": 0.9,
                            "median_abs_error_pct": 1.0, "source": "test"} for op, r in made]
    fitted = validate_spec(Hardware, spec, "test spec")
    assert fitted_ranks(fitted, "all-reduce", "nvlink", "ring") == [4]
    assert fitted_ranks(fitted, "all-reduce", "nvlink", "auto") == [4]
    assert fitted_ranks(fitted, "all-gather", "nvlink", "ring") == []
    assert fitted_ranks(fitted, "broadcast", "nvlink", "ring") == []
