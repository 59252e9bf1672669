"""NCCL releases before 2.26.2 (formulas/nccl_versions.py): each rule by hand against the release's tuning.cc
(v2.20.3-1 line numbers), the pick they change on 2 x 8 p5, the time read from 2.26.2's costs, numbers equal
to arrays, and a log's header naming the release `validate` prices with."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from costmodel.cli import app
from costmodel.cost.nccl import TunedCost, choice, restricted, topology
from costmodel.formulas import nccl_tuner as nt
from costmodel.formulas import nccl_versions as nv

OLD, NEW = (2, 20, 3), nv.TRANSCRIBED
ROOT = Path(__file__).parent.parent
OTHER = ROOT.parent / "shared" / "data" / "nccl-tests" / "other-formats"
MIB = 2**20


def test_release_text_is_parsed_or_refused():
    assert [nv.parse(t) for t in ("2.20.3", "2.20.3-1", "2.26.2+cuda12.8", " 2.19.0 ")] == [
        (2, 20, 3), (2, 20, 3), (2, 26, 2), (2, 19, 0)]
    for bad, says in (("2.18.5", "from 2.19.0 on"), ("two", "major.minor.patch"), ("2.20", "major.minor.patch")):
        with pytest.raises(ValueError, match=says):
            nv.parse(bad)


def test_each_older_rule_by_hand():
    """v2.20.3 tuning.cc: nInterSteps 2 nNodes (:162); baseLat tree Simple 0 (:57); hwLat tree Simple 28 on
    NVLink, PCI and network (:67, :71, :75), NVLS 23 on NVLink (:69); ring LL x 1/4 (1/3 one node's all-gather,
    :181); Hopper's llMaxBws = Ampere's (:89); ring LL128 x 0.7 at < 2 GPUs per node (:182); no PAT."""
    assert [nt.ring_all_reduce_network_steps(n, OLD) for n in (2, 4)] == [4, 8]
    assert [nt.ring_all_reduce_network_steps(n, NEW) for n in (2, 4)] == [2, 6]
    assert nt.base_lat_us(algo="tree", proto="Simple", version=OLD) == 0.0
    assert nt.base_lat_us(algo="tree", proto="Simple", version=(2, 23, 4)) == 8.4
    assert [nt.hw_lat_us(hw=hw, algo="tree", proto="Simple", cpu_arch="x86", version=(2, 22, 3))
            for hw in ("nvlink", "pci", "net")] == [28.0, 28.0, 28.0]
    assert [nt.hw_lat_us(hw=hw, algo="tree", proto="Simple", cpu_arch="x86", version=NEW)
            for hw in ("nvlink", "pci", "net")] == [4.0, 4.0, 14.0]
    assert [nt.hw_lat_us(hw="nvlink", algo="nvls", proto="Simple", cpu_arch="x86", version=v)
            for v in ((2, 20, 5), (2, 21, 5))] == [23.0, 25.0]
    assert [nt.ring_ll_fraction(coll=c, n_nodes=n, version=OLD) for c, n in (("all_gather", 1), ("all_reduce", 1),
                                                                                ("all_gather", 2))] == [1 / 3, 1 / 4, 1 / 4]
    assert nt.ring_ll_fraction(coll="all_gather", n_nodes=1, version=(2, 21, 5)) == .5
    assert [nt.ll_max_bw_gbs(n_nodes=n, comp_cap=90, cpu_vendor="intel", version=OLD) for n in (1, 2, 4)] == [
        87.7, 39.0, 20.4]  # one node reads the GPU's row; several, the CPU vendor's (unchanged)
    assert nt.ll_max_bw_gbs(n_nodes=1, comp_cap=90, cpu_vendor="intel", version=(2, 21, 5)) == 141.0
    assert [nt.ll_max_bw_gbs(n_nodes=2, comp_cap=90, cpu_vendor="mixed", version=v) for v in (
        (2, 23, 4), (2, 24, 3))] == [39.0, 22.5]
    one_per_node = topology("hgx-h100", 4, 1, (2, 22, 3))
    assert not nt.is_modelled(coll="all_gather", algo="pat", proto="Simple", topo=one_per_node)
    assert nt.is_modelled(coll="all_gather", algo="pat", proto="Simple", topo=topology("hgx-h100", 4, 1, (2, 23, 4)))
    ring = one_per_node.ring
    assert nt.bus_bandwidth_gbs(coll="all_reduce", algo="ring", proto="LL128", topo=one_per_node) == pytest.approx(
        min(0.7 * ring.n_channels * ring.bw_intra_gbs, ring.n_channels * nt.PER_CH_MAX_RING_LL128_BWS_GBS[2][2]))


def test_the_ring_is_charged_two_more_network_steps_before_2_23_4():
    """2 x 8 p5 ring/LL128 all-reduce: 2.20.3's latency exceeds 2.26.2's by exactly two network hops less two
    NVLink ones: interLat = NET ring LL128 4.0 + 75 us declared; intraLat = max(NVLink 1.9, netOverhead 1)."""
    old, new = (restricted(topology("aws-p5", 2, 8, v), "auto") for v in (OLD, NEW))
    gap = (nt.latency_us(coll="all_reduce", algo="ring", proto="LL128", topo=old)
           - nt.latency_us(coll="all_reduce", algo="ring", proto="LL128", topo=new))
    assert gap == pytest.approx(2 * (4.0 + 75.0) - 2 * 1.9, rel=1e-12)


@pytest.mark.parametrize("size, old_pick, new_pick", [
    (16 * MIB, ("tree", "LL128"), ("ring", "LL128")),
    (32 * MIB, ("nvls_tree", "Simple"), ("ring", "LL128")),
    (4 * MIB, ("tree", "LL128"), ("tree", "LL128")),
    (256 * MIB, ("nvls_tree", "Simple"), ("nvls_tree", "Simple")),
])
def test_p5_picks_by_release_and_the_pick_is_timed_with_2_26_2s_costs(size, old_pick, new_pick):
    """The release picks (2.20.3: tree, then NVLS-tree; 2.26.2: ring/LL128 at 16-32 MiB); whatever is picked is
    timed as 2.26.2 times that algorithm, with the measured hop."""
    old, new = (choice("aws-p5", "all-reduce", size, 2, 8, hop_us=35.5, version=v) for v in (OLD, NEW))
    assert (old[:2], new[:2]) == (old_pick, new_pick)
    forced = choice("aws-p5", "all-reduce", size, 2, 8, algorithm=old_pick[0], hop_us=35.5)  # 2.26.2, algorithm named
    if old_pick[0] != "nvls_tree":  # the named algorithm's fastest protocol is the one 2.20.3 picked
        assert forced[:2] == old_pick and old[2] == pytest.approx(forced[2], rel=1e-12)


@pytest.mark.parametrize("op", ["all-reduce", "all-gather", "reduce-scatter", "broadcast"])
def test_arrays_equal_numbers_for_an_older_release(op):
    rng = np.random.default_rng(11)
    groups = [(1, 8), (2, 8), (4, 8), (2, 1), (8, 2)]
    pick = rng.integers(0, len(groups), 300)
    nodes = np.array([groups[i][0] for i in pick], dtype=float)
    per_node = np.array([groups[i][1] for i in pick], dtype=float)
    sizes = np.floor(2.0 ** rng.uniform(3, 34, 300))
    arrays = TunedCost("aws-p5", op, nodes, per_node, hop_us=35.5, version=OLD).seconds(sizes)
    for i in range(0, 300, 5):
        number = TunedCost("aws-p5", op, int(nodes[i]), int(per_node[i]), hop_us=35.5, version=OLD).seconds(
            float(sizes[i]))
        assert arrays[i] == pytest.approx(number, rel=1e-12, abs=0)


def _validate(*args) -> dict:
    result = CliRunner().invoke(app, ["validate", *args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_a_logs_header_names_the_release_validate_prices_with(tmp_path):
    """The shipped ring all-reduce log says nccl-library=22602; the same log saying 22005 is priced with
    2.20.5's tuner (the spec, h100-sxm, says 2.26.2), and the text says whose word that is."""
    log = ROOT / "hardware" / "measured" / "h100-8gpu-together-nccl-tests" / "all_reduce_ring.out"
    older = tmp_path / "older.out"
    older.write_text(re.sub(r"nccl-library=\d+", "nccl-library=22005", log.read_text()))
    rows = {path.name: _validate(str(path), "--hardware", "h100-sxm")["rows"] for path in (log, older)}
    assert {r["nccl_release"] for r in rows[log.name]} == {"2.26.2"}
    assert {r["nccl_release"] for r in rows["older.out"]} == {"2.20.5"}
    text = CliRunner().invoke(app, ["validate", str(older), "--hardware", "h100-sxm"]).stdout
    assert "NCCL tuner: 2.20.5 (the log's header; the spec says 2.26.2)" in " ".join(text.split())
    oldest = tmp_path / "oldest.out"
    oldest.write_text(re.sub(r"nccl-library=\d+", "nccl-library=21805", log.read_text()))
    text = CliRunner().invoke(app, ["validate", str(oldest), "--hardware", "h100-sxm"]).stdout
    assert "NCCL tuner: 2.26.2 (the spec's; the log's 2.18.5 predates the tuners modelled)" in " ".join(text.split())


@pytest.mark.skipif(not OTHER.is_dir(), reason="../shared/data is beside the checkout (CI links it)")
def test_readme_p5_rows_the_release_moves():
    """README: on the p5 log 2.20.3's picks took 16 MiB from -15% to -9.8% and 32 MiB from -18% to -5.6%
    (against 2.26.2's ring/LL128, the spec's release set to 2.26.2)."""
    from costmodel.measure.nccl_tests import Hints, parse_log
    from costmodel.measure.validate import compare
    from costmodel.specs.load import load_hardware

    p5 = load_hardware("aws-p5")
    documents = [parse_log(OTHER / "aws-p5-2node-allreduce.out", Hints(nodes=2, gpus_per_node=8))]
    errors = {}
    for release in ("2.26.2", "2.20.3"):
        spec = p5.model_copy(update={"nccl": p5.nccl.model_copy(update={"version": release})})
        errors[release] = {r.bytes: round(r.error_pct, 1) for r in compare(documents, spec) if r.bytes in (16 * MIB,
                                                                                                           32 * MIB)}
    assert p5.nccl.version == "2.20.3"
    assert (round(errors["2.26.2"][16 * MIB]), round(errors["2.26.2"][32 * MIB])) == (-15, -18)
    assert (errors["2.20.3"][16 * MIB], errors["2.20.3"][32 * MIB]) == (-9.8, -5.6)
