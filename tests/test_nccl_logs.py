"""nccl-tests logs as they really come: several tests in one file, launcher labels, no header, no
rank list. Built from the shipped log and the third-party files in ../shared/data/nccl-tests/."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from hostile import assert_refused, run

ROOT = Path(__file__).parent.parent
MEASURED = ROOT / "hardware" / "measured" / "h100-8gpu-together-nccl-tests"
SHARED = ROOT.parent / "shared" / "data" / "nccl-tests"
OTHER = SHARED / "other-formats"


def imported(*args) -> dict:
    outcome = run(["import", "nccl-tests", *map(str, args)])
    assert outcome.code == 0, str(outcome)
    return json.loads(outcome.stdout)


def _retitled(text: str, op: str) -> str:
    """The all-reduce log relabelled as another nccl-tests binary (rows unchanged)."""
    return text.replace("all_reduce_perf", f"{op}_perf")


def test_a_five_section_log_keeps_each_sections_op(tmp_path):
    base = (MEASURED / "all_reduce_ring.out").read_text()
    ops = ["all_reduce", "all_gather", "reduce_scatter", "alltoall", "sendrecv"]
    path = tmp_path / "sweep.out"
    path.write_text("".join(_retitled(base, op) for op in ops))
    runs = imported(path)["runs"]
    assert [r["collective"] for r in runs] == ["all-reduce", "all-gather", "reduce-scatter", "all-to-all", "send/recv"]
    assert len({len(r["rows"]) for r in runs}) == 1
    assert all(r["environment"]["world_size"] == 8 for r in runs)


def test_a_sweep_keeps_its_tests_when_one_cannot_be_read(tmp_path):
    """A sweep with a test no model times (hypercube), a test that failed before its table, or a last row cut short
    (a job's time limit) keeps every other test and notes what it left out; alone, such a test is refused."""
    base = (MEASURED / "all_reduce_ring.out").read_text()
    failed = "\n".join(line for line in _retitled(base, "gather").splitlines() if not line.strip()[:1].isdigit())
    scatter = _retitled(base, "scatter").splitlines()
    last_row = max(i for i, line in enumerate(scatter) if line.strip()[:1].isdigit())
    cut = "\n".join(scatter[:last_row] + [scatter[last_row][:40]])  # the job stopped mid-line
    path = tmp_path / "sweep.out"
    path.write_text(base + _retitled(base, "hypercube") + failed + "\n" + cut)
    outcome = run(["import", "nccl-tests", str(path)])
    assert outcome.code == 0, str(outcome)
    runs = json.loads(outcome.stdout)["runs"]
    assert [r["collective"] for r in runs] == ["all-reduce", "scatter"]
    assert len(runs[1]["rows"]) == len(runs[0]["rows"]) - 2  # the last line (out-of-place and in-place) is cut short
    for note in ("hypercube_perf test", "gather test", "is cut short"):
        assert note in outcome.stderr, note
    alone = tmp_path / "all_gather_perf.out"
    alone.write_text(_retitled(base, "hypercube"))
    assert_refused(run(["import", "nccl-tests", str(alone)]), "no time model")


@pytest.mark.parametrize("prefix", ["2025-03-05 22:09:44 ", "00:00:01 ", "[pod/nccl-tests-launcher-abc12/mpi] ",
                                    "launcher-1  | "])
def test_a_log_collectors_prefix_is_learned_from_the_header(tmp_path, prefix):
    """ts's other formats, kubectl logs --prefix, docker compose: whatever precedes nccl-tests' own header lines
    precedes every line, and is taken off each (its digits may change from line to line)."""
    base = (MEASURED / "all_reduce_ring.out").read_text().splitlines()
    plain = imported(MEASURED / "all_reduce_ring.out")["runs"]
    path = tmp_path / "all_reduce_ring.out"
    path.write_text("".join(f"{prefix.replace('01', str(10 + i % 50))}{line}\n" for i, line in enumerate(base)))
    assert imported(path)["runs"] == plain


def test_logs_imported_together_keep_their_own_nccl_release(tmp_path):
    """Each log's release prices its own rows: importing two logs (one stating 2.19.3, one none) and validating the
    file gives what validating the logs directly gives."""
    base = (MEASURED / "all_reduce_ring.out").read_text()
    stated, unstated = tmp_path / "stated_all_reduce.out", tmp_path / "all_reduce.out"
    stated.write_text(base.replace("nccl-library=22602", "nccl-library=21903"))
    unstated.write_text("\n".join(line for line in base.splitlines() if "nccl-tests version" not in line))
    merged = tmp_path / "merged.json"
    assert run(["import", "nccl-tests", str(stated), str(unstated), "--out", str(merged)]).code == 0

    def releases(*paths):
        data = json.loads(run(["validate", *map(str, paths), "--hardware", "h100-sxm", "--json"]).stdout)
        return [(r["bytes"], r["nccl_release"], r["predicted_s"]) for r in data["rows"]]

    assert releases(merged) == releases(stated, unstated)
    assert {r[1] for r in releases(merged)} == {"2.19.3", "2.26.2"}


def test_open_mpi_and_srun_labels_are_stripped(tmp_path):
    base = (MEASURED / "all_reduce_ring.out").read_text().splitlines()
    plain = imported(MEASURED / "all_reduce_ring.out")["runs"]
    for label in ("0: ", "[1,0]<stdout>:", "[1,3]<stderr>: "):
        path = tmp_path / "all_reduce_ring.out"
        path.write_text("".join(f"{label}{line}\n" for line in base))
        assert imported(path)["runs"] == plain


@pytest.mark.skipif(not OTHER.is_dir(), reason="../shared/data is beside the checkout")
@pytest.mark.parametrize("name, extra, world", [
    ("dgxc-h100x8-allreduce.out", [], (1, 8)),
    ("aws-p5-2node-allreduce.out", ["--nodes", "2", "--gpus-per-node", "8"], (2, 8)),
    ("aws-p4de-2node-allreduce.out", ["--nodes", "2", "--gpus-per-node", "8"], (2, 8)),
])
def test_every_shared_log_reads(name, extra, world):
    runs = imported(OTHER / name, *extra)["runs"]
    assert [r["collective"] for r in runs] == ["all-reduce"]
    assert (runs[0]["environment"]["nodes"], runs[0]["environment"]["gpus_per_node"]) == world
    sizes = [row["bytes"] for row in runs[0]["rows"] if row["placement"] == "out-of-place"]
    assert sizes[0] == 8 and sizes == sorted(sizes)


@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/data is beside the checkout")
def test_shared_h100_logs_read_and_validate():
    logs = sorted((SHARED / "h100-8gpu-together").glob("*.out"))
    outcome = run(["validate", *map(str, logs), "--hardware", "h100-sxm", "--json"])
    assert outcome.code == 0, str(outcome)
    assert {r["collective"] for r in json.loads(outcome.stdout)["rows"]} == {"all-reduce", "all-gather",
                                                                             "reduce-scatter"}


@pytest.mark.skipif(not OTHER.is_dir(), reason="../shared/data is beside the checkout")
@pytest.mark.parametrize("args, needles", [
    (["aws-p5-2node-allreduce.out"], ["no '# Rank' lines", "give --nodes and --gpus-per-node"]),
    (["aws-p5-2node-allreduce.out", "--nodes", "2"], ["give both --nodes and --gpus-per-node"]),
    # no rank lines, but busbw / algbw = 1.875 = 2 (n - 1)/n says 16 ranks, not 24
    (["aws-p5-2node-allreduce.out", "--nodes", "3", "--gpus-per-node", "8"], ["for n = 16", "not for the 24 ranks"]),
    (["dgxc-h100x8-allreduce.out", "--nodes", "2", "--gpus-per-node", "8"], ["lists 1 x 8 ranks", "2 x 8"]),
    (["dgxc-h100x8-allreduce.out", "--op", "gossip"], ["unknown collective 'gossip'"]),
])
def test_what_a_log_leaves_out_is_asked_for(args, needles):
    assert_refused(run(["import", "nccl-tests", str(OTHER / args[0]), *args[1:]]), *needles)


def test_op_from_the_flag_or_the_name(tmp_path):
    body = "\n".join(line for line in (MEASURED / "all_gather_ring.out").read_text().splitlines()
                     if "Collective test" not in line and "nccl-tests version" not in line)
    unnamed = tmp_path / "run7.out"
    unnamed.write_text(body)
    assert_refused(run(["import", "nccl-tests", str(unnamed)]), "give --op")
    assert imported(unnamed, "--op", "all-gather")["runs"][0]["collective"] == "all-gather"
    named = tmp_path / "h100_allgather_ring.out"
    named.write_text(body)
    run_ = imported(named)["runs"][0]
    assert (run_["collective"], run_["algorithm"]) == ("all-gather", "ring")


def test_op_flag_must_agree_with_the_log():
    assert_refused(run(["import", "nccl-tests", str(MEASURED / "all_reduce_ring.out"), "--op", "all-gather"]),
                   "the log runs all-reduce, but --op says all-gather")


def test_broadcast_and_sendrecv_are_modelled(tmp_path):
    base = (MEASURED / "all_reduce_ring.out").read_text()
    for op, name in (("broadcast", "broadcast"), ("sendrecv", "send/recv"), ("reduce", "reduce"),
                     ("gather", "gather"), ("scatter", "scatter"), ("alltoall", "all-to-all")):
        path = tmp_path / f"{op}.out"
        path.write_text(_retitled(base, op))
        outcome = run(["validate", str(path), "--hardware", "h100-sxm", "--json"])
        assert outcome.code == 0, str(outcome)
        rows = json.loads(outcome.stdout)["rows"]
        assert {r["collective"] for r in rows} == {name} and all(r["predicted_s"] > 0 for r in rows)


def test_a_spec_extends_another(tmp_path):
    """A variant names its base and what differs; the rest (tables included) comes from the base."""
    from costmodel.specs.load import load_hardware

    p5, h100 = load_hardware("aws-p5"), load_hardware("h100-sxm")
    assert [level.name for level in p5.network] == ["nvlink", "efa"]
    assert p5.network[0] == h100.network[0] and p5.network[1].kind == "efa"
    assert p5.peak_flops == h100.peak_flops and p5.step_model == h100.step_model
    mine = tmp_path / "mine.toml"
    mine.write_text('extends = "h100-sxm"\nname = "mine"\n[hbm]\ncapacity_bytes = 85899345920\n'
                    '[[network]]\nname = "nvlink"\nefficiency = 0.8\n')
    spec = load_hardware(str(mine))
    assert spec.hbm.capacity_bytes == 80 * 2**30 and spec.hbm.bandwidth_bytes_per_s == h100.hbm.bandwidth_bytes_per_s
    assert spec.network[0].efficiency == 0.8 and spec.network[0].bandwidth_bytes_per_s == 450e9
    outcome = run(["step", "--model", "llama3-8b", "--hardware", str(mine), "--tokens", "8192"])
    assert outcome.code == 0, str(outcome)  # its matmul table is the base's


def test_shipped_logs_by_name():
    """shipped:FOLDER works from an installed package too (the logs ship inside the wheel)."""
    outcome = run(["validate", "shipped:h100-8gpu-together-nccl-tests", "--hardware", "h100-sxm", "--json"])
    assert outcome.code == 0, str(outcome)
    assert len({(r["collective"], r["algorithm"]) for r in json.loads(outcome.stdout)["rows"]}) == 4
    assert_refused(run(["validate", "shipped:nope", "--hardware", "h100-sxm"]), "no shipped logs 'nope'",
                   "h100-8gpu-together-nccl-tests")
    # the GEMM table ships in hardware/measured too, but it is no collective log
    assert_refused(run(["validate", "shipped:h100-matmul-xla", "--hardware", "h100-sxm"]), "no shipped logs")


def test_rows_say_their_placement_and_type_and_one_gpu_is_no_collective(tmp_path):
    """validate --json rows name the placement (--placement both lists each) and the type the log ran; a log of one
    GPU (a local copy, nothing sent) is refused in one line; before NCCL 2.9 the library's code was X x 1000 + Y x
    100 + Z (nccl.h.in), so 2708 is 2.7.8."""
    from costmodel.measure.nccl_tests import nccl_version_of

    outcome = run(["validate", str(MEASURED / "all_reduce_ring.out"), "--hardware", "h100-sxm", "--json",
                   "--placement", "both"])
    rows = json.loads(outcome.stdout)["rows"]
    assert {r["placement"] for r in rows} == {"out-of-place", "in-place"} and {r["dtype"] for r in rows} == {"float"}
    def one_gpu(line):  # rank 0 alone, busbw 0 (nccl-tests' bus factor for one rank)
        t = line.split()
        return "  ".join(t[:7] + ["0.00"] + t[8:11] + ["0.00"] + t[12:]) if t and t[0].isdigit() else line

    lines = (MEASURED / "all_reduce_ring.out").read_text().splitlines()
    path = tmp_path / "all_reduce_one.out"
    path.write_text("\n".join(one_gpu(line) for line in lines if "Rank" not in line or "Rank  0" in line) + "\n")
    assert imported(path)["runs"][0]["environment"]["world_size"] == 1
    assert_refused(run(["validate", str(path), "--hardware", "h100-sxm"]), "no collective over 2 or more ranks")
    eight = imported(MEASURED / "all_reduce_ring.out")  # 8 GPUs, out-of-place rows only: none in place, not one GPU
    eight["runs"][0]["rows"] = [r for r in eight["runs"][0]["rows"] if r["placement"] == "out-of-place"]
    (tmp_path / "eight.json").write_text(json.dumps(eight))
    outcome = run(["validate", str(tmp_path / "eight.json"), "--hardware", "h100-sxm", "--placement", "in-place"])
    assert "no collective over 2 or more ranks" not in outcome.stderr
    assert nccl_version_of("2708") == "2.7.8" and nccl_version_of("22602") == "2.26.2"


def test_each_calibration_line_names_the_algorithm_it_was_fitted_under():
    """validate --fit on the shipped logs fits all-reduce twice (all_reduce_ring.out, all_reduce_nvls.out): each
    'Calibration:' line says which, as the file names do, and holds that algorithm's fit."""
    outcome = run(["validate", "shipped:h100-8gpu-together-nccl-tests", "--hardware", "h100-sxm", "--fit"])
    assert outcome.code == 0, str(outcome)
    text = " ".join(outcome.stdout.split())  # rich wraps long lines
    lines = re.findall(r"Calibration: ([a-z-]+) \((\w+)\): (.*?)(?= Calibration: | Median )", text)
    assert sorted((op, algorithm) for op, algorithm, _ in lines) == [
        ("all-gather", "ring"), ("all-reduce", "nvls"), ("all-reduce", "ring"), ("reduce-scatter", "ring")]
    for op, algorithm, what in lines:
        assert f"calibrated on nvlink: {op}/{algorithm} x " in what, (op, algorithm, what)


@pytest.mark.parametrize("name, family", [
    ("NVIDIA H100 80GB HBM3", {"H100"}),  # the shipped logs' rank lines
    ("NVIDIA A100-SXM4-80GB", {"A100"}),  # CUDA's name for the p4de's GPU
    ("NVIDIA H200", {"H200"}), ("NVIDIA B200", {"B200"}),
    ("AMD Instinct MI300X", {"MI300"}), ("mi325x", {"MI325"}),
    ("h100-96gb-500w", {"H100"}), ("AWS p4de.24xlarge: 8 x A100 80GB SXM", {"A100"}),
    ("NVIDIA GH200 480GB", set()),  # no family named alone: left unjudged, not read as H200
    ("", set()),
])
def test_device_families_from_names(name, family):
    from costmodel.measure.devices import families

    assert families(name) == family


def _notes(outcome) -> list[str]:
    return [line for line in outcome.stderr.splitlines() if line.startswith("note:")]


def test_a_log_of_another_gpu_than_the_spec_gets_one_note(tmp_path):
    """The rank lines name the GPU: an A100 log validated as h100-sxm, or an H100 log as a100-80gb, is priced (specs
    have variants) with one note naming both; matching GPUs, and a log without rank lines, print none."""
    a100 = tmp_path / "all_reduce_ring.out"
    a100.write_text((MEASURED / "all_reduce_ring.out").read_text().replace("NVIDIA H100 80GB HBM3",
                                                                             "NVIDIA A100-SXM4-80GB"))
    h100 = MEASURED / "all_reduce_ring.out"
    for log, spec, logged, specified in [(a100, "h100-sxm", "NVIDIA A100-SXM4-80GB", "H100"),
                                         (h100, "a100-80gb", "NVIDIA H100 80GB HBM3", "A100")]:
        outcome = run(["validate", str(log), "--hardware", spec, "--json"])
        assert outcome.code == 0, str(outcome)
        notes = _notes(outcome)
        assert len(notes) == 1 and logged in notes[0] and f"{spec} is {specified}" in notes[0], notes
        assert json.loads(outcome.stdout)["rows"]  # priced all the same
    for args in [[str(MEASURED / "all_reduce_ring.out"), "--hardware", "h100-sxm"],
                 [str(a100), "--hardware", "aws-p4de"],  # 'AWS p4de.24xlarge: 8 x A100 80GB SXM'
                 [str(MEASURED / "all_reduce_ring.out"), "--hardware", "h100-96gb-500w"],  # a variant of the same
                 [str(OTHER / "aws-p4de-2node-allreduce.out"), "--hardware", "h100-sxm", "--nodes", "2",
                  "--gpus-per-node", "8", "--algorithm", "auto"]]:  # no rank lines: nothing to compare
        outcome = run(["validate", *args, "--json"])
        assert outcome.code == 0 and _notes(outcome) == [], str(outcome)


@pytest.mark.parametrize("trailer", [
    ["slurmstepd: error: *** STEP 4242.0 ON gpu-dp-2jvzl-pqq7p CANCELLED AT 2025-03-05T22:09:44 DUE TO TIME LIMIT ***"],
    ["gpu-dp:1596894:1596894 [0] NCCL WARN Cuda failure 'unspecified launch failure'"],
    ["--------------------------------------------------------------------------",
     "mpirun noticed that process rank 0 with PID 0 on node gpu-dp exited on signal 9 (Killed).",
     "--------------------------------------------------------------------------"],
])
def test_a_last_row_cut_short_before_a_trailer_is_left_out(tmp_path, trailer):
    """A job stopped by its time limit (or a crash) cuts the table's last data row short, and the scheduler, NCCL or
    mpirun then print their own lines: the cut row is left out with a note, the rest read; a cut row followed by
    another data row is no time limit and is refused."""
    log = (MEASURED / "all_reduce_ring.out").read_text().splitlines()
    last_row = max(i for i, line in enumerate(log) if line.strip()[:1].isdigit())
    rows = sum(1 for line in log if line.strip()[:1].isdigit())
    path = tmp_path / "all_reduce_ring.out"
    path.write_text("\n".join(log[:last_row] + [log[last_row][:40]] + trailer) + "\n")
    outcome = run(["import", "nccl-tests", str(path)])
    assert outcome.code == 0, str(outcome)
    assert len(json.loads(outcome.stdout)["runs"][0]["rows"]) == 2 * (rows - 1)
    assert f"its last row (line {last_row + 1}) is cut short and left out" in outcome.stderr
    path.write_text("\n".join(log[:last_row - 1] + [log[last_row - 1][:40], log[last_row]] + trailer) + "\n")
    assert_refused(run(["import", "nccl-tests", str(path)]), "a data row needs at least")


def test_a_log_that_names_no_algorithm_gets_one_note(tmp_path):
    """The shipped ring all-reduce log copied to a name that says nothing (ompi.out), with no NCCL_ALGO line: validate
    prices NCCL's own choice and says so in one note naming --algorithm; with --algorithm ring, no note and the ring
    log's own prediction; a name that says the algorithm needs no note."""
    path = tmp_path / "ompi.out"
    path.write_text((MEASURED / "all_reduce_ring.out").read_text())
    told = run(["validate", str(path), "--hardware", "h100-sxm", "--op", "all-reduce", "--json"])
    assert told.code == 0, str(told)
    notes = [line for line in told.stderr.splitlines() if line.startswith("note:")]
    assert len(notes) == 1 and "names no algorithm" in notes[0] and "--algorithm ring" in notes[0]
    assert {r["algorithm"] for r in json.loads(told.stdout)["rows"]} == {"auto"}
    ring = run(["validate", str(path), "--hardware", "h100-sxm", "--op", "all-reduce", "--algorithm", "ring", "--json"])
    named = run(["validate", str(MEASURED / "all_reduce_ring.out"), "--hardware", "h100-sxm", "--json"])
    assert "note:" not in ring.stderr + named.stderr
    assert json.loads(ring.stdout)["median_abs_error_pct"] == json.loads(named.stdout)["median_abs_error_pct"]


@pytest.mark.parametrize("op, nodes, assumed", [
    ("all-to-all", 1, "p2p"), ("send/recv", 1, "p2p"), ("gather", 1, "p2p"), ("scatter", 1, "p2p"),
    ("all-to-all", 2, "hierarchical"),  # the NICs' share and NVLink's at once (network._across_domains)
    ("send/recv", 2, "p2p"), ("gather", 2, "p2p"), ("scatter", 2, "p2p"),  # flat over the NIC level
])
def test_assumed_names_what_prices_a_point_to_point_op(op, nodes, assumed):
    """validate's `assumed` column names the formula that priced the row: the point-to-point ops are no ring; across
    nodes only all-to-all runs in two levels, the others cross the NICs as one group."""
    from costmodel.cost import network
    from costmodel.cost.placement import Placement
    from costmodel.measure.predict import predictor
    from costmodel.specs.load import load_hardware

    spec = load_hardware("h100-sxm")
    model = predictor(spec, collective=op, algorithm="auto", nodes=nodes, gpus_per_node=8)
    assert model.algorithm == assumed
    where_ = Placement("measured", nodes * 8, 8, nodes)
    flat = network.one_level_cost(network._levels(spec)[-1], op, nodes * 8, "ring", None)
    assert (model.cost == flat) == (nodes == 2 and assumed == "p2p")  # flat: the network level's one formula
    assert model.cost == network.link_cost(spec, op, where_)


def test_a_cpu_run_over_gloo_gets_one_note_against_a_gpu_spec(tmp_path):
    """A results file of `bench collectives` on gloo (environment.backend 'gloo', devices ['x86_64']) validated
    against h100-sxm: priced all the same, with one note that the devices are CPUs and the backend is not NCCL."""
    doc = json.loads(run(["import", "nccl-tests", str(MEASURED / "all_reduce_ring.out")]).stdout)
    for env in [doc["environment"]] + [r["environment"] for r in doc["runs"]]:
        env.update(backend="gloo", devices=["x86_64"])
    path = tmp_path / "gloo.json"
    path.write_text(json.dumps(doc))
    outcome = run(["validate", str(path), "--hardware", "h100-sxm", "--json"])
    assert outcome.code == 0, str(outcome)
    notes = _notes(outcome)
    assert len(notes) == 1 and "x86_64 (CPUs, not GPUs)" in notes[0] and "gloo (not NCCL)" in notes[0], notes
    assert json.loads(outcome.stdout)["rows"]


@pytest.mark.skipif(not OTHER.is_dir(), reason="../shared/data is beside the checkout (CI links it)")
def test_world_flags_describe_the_logs_without_rank_lines():
    """--nodes/--gpus-per-node give the world of the logs that list no ranks (the p5 log: 2 x 8); a log with rank
    lines keeps its own (DGX Cloud: 1 x 8). Where no log given lacks rank lines, flags that disagree with them are
    refused. Merged, nccl-tests' version is the one the logs state (the shipped log's 2.17.9; the others state none)."""
    dgxc, p5 = OTHER / "dgxc-h100x8-allreduce.out", OTHER / "aws-p5-2node-allreduce.out"
    outcome = run(["import", "nccl-tests", str(dgxc), str(p5), str(MEASURED / "all_reduce_ring.out"),
                   "--nodes", "2", "--gpus-per-node", "8"])
    assert outcome.code == 0, str(outcome)
    document = json.loads(outcome.stdout)
    assert [(r["environment"]["nodes"], r["environment"]["gpus_per_node"]) for r in document["runs"]] == [
        (1, 8), (2, 8), (1, 8)]
    assert document["source"]["version"] == "2.17.9"
    assert_refused(run(["import", "nccl-tests", str(dgxc), "--nodes", "2", "--gpus-per-node", "8", "--algorithm",
                        "auto"]), "no log given lacks")


def test_the_validate_table_adds_the_columns_its_rows_differ_in(tmp_path):
    """A log with float and bfloat16 rows, both placements, or two worlds: the table shows dtype, placement, or
    nodes x GPUs, each only where the rows differ in it (one log of one kind shows none)."""
    from costmodel.measure.validate import Row
    from costmodel.report.measure import distinguishing

    def row(dtype="float", placement="out-of-place", nodes=1):
        return Row("all-reduce", "ring", 2**20, nodes, 8, 1e-4, 1e-4, "nvlink", placement=placement, dtype=dtype)

    assert list(distinguishing([row(), row()])) == []
    assert list(distinguishing([row(), row(dtype="bfloat16")])) == ["dtype"]
    assert list(distinguishing([row(), row(placement="in-place")])) == ["placement"]
    assert list(distinguishing([row(), row(nodes=2)])) == ["nodes x GPUs"]
    both = run(["validate", str(MEASURED / "all_reduce_ring.out"), "--hardware", "h100-sxm", "--placement", "both"])
    plain = run(["validate", str(MEASURED / "all_reduce_ring.out"), "--hardware", "h100-sxm"])
    assert "placement" in both.stdout.splitlines()[1] and "placement" not in plain.stdout.splitlines()[1]


def test_import_takes_no_plain_and_json_adds_the_document_to_out(tmp_path):
    """`import nccl-tests` prints JSON or one line, no table: it takes no --plain (which would change nothing); --json
    prints the document beside --out's file, and without --out the document is printed either way."""
    log = str(MEASURED / "all_reduce_ring.out")
    assert_refused(run(["import", "nccl-tests", log, "--plain"]), "--plain")
    alone, with_json = run(["import", "nccl-tests", log]), run(["import", "nccl-tests", log, "--json"])
    assert json.loads(alone.stdout) == json.loads(with_json.stdout)
    out = tmp_path / "mine.json"
    both = run(["import", "nccl-tests", log, "--out", str(out), "--json"])
    assert json.loads(both.stdout) == json.loads(out.read_text()) == json.loads(alone.stdout)
    assert run(["import", "nccl-tests", log, "--out", str(tmp_path / "b.json")]).stdout.startswith("wrote ")


def test_assumed_is_what_link_cost_priced_with():
    """The `assumed` column reads what network.link_cost priced with (LinkCost.priced_as), not a guess beside it: a
    TPU across slices is one level's ring (ICI or DCN, never two levels); arrays name each formula their layouts
    mix, and only those (every group above one rank: no 'none')."""
    import numpy as np

    from costmodel.cost import network
    from costmodel.cost.placement import Placement
    from costmodel.measure.predict import predictor
    from costmodel.specs.load import load_hardware

    assert predictor(load_hardware("tpu-v5p"), collective="all-reduce", algorithm="auto", nodes=2,
                     gpus_per_node=4).algorithm == "ring"
    h100 = load_hardware("h100-sxm")
    mixed = Placement("ep", np.array([8, 16]), np.array([8, 8]), np.array([1, 2]))
    assert network.link_cost(h100, "all-to-all", mixed).priced_as == "hierarchical or p2p"
    inside = Placement("ep", np.array([4, 8]), np.array([4, 8]), np.array([1, 1]))
    assert network.link_cost(h100, "all-to-all", inside).priced_as == "p2p"
    assert network.link_cost(h100, "all-to-all", Placement("ep", 1, 1, 1)).priced_as == "none"


def test_world_flags_are_judged_where_the_logs_are_read(tmp_path):
    """A library caller is refused as the CLI is: parse_log of a log with rank lines (1 x 8) under flags for another
    world (2 x 4) raises, as does nccl-tests' JSON of it; read_measurements beside a log without rank lines (which
    the flags describe) takes both, each with its own world, and no flag leaks into the documents."""
    from costmodel.errors import CostModelError
    from costmodel.measure.load import read_measurements
    from costmodel.measure.nccl_json import parse_json
    from costmodel.measure.nccl_tests import Hints, parse_log

    ranked = MEASURED / "all_reduce_ring.out"
    flags = Hints(nodes=2, gpus_per_node=4)
    with pytest.raises(CostModelError, match="no log given lacks"):
        parse_log(ranked, flags)
    devices = [{"rank": r, "group": 0, "hostname": "node0", "device_info": "H100"} for r in range(8)]
    data = {"args": ["./build/all_reduce_perf"], "config": {"ngpus": 8, "devices": devices},
            "results": [{"size": 2**20, "count": 2**18, "type": "float",
                         "out_of_place": {"time": 100.0, "alg_bw": 10.49, "bus_bw": 18.35, "nwrong": 0}}]}
    with pytest.raises(CostModelError, match="no log given lacks"):
        parse_json(tmp_path / "ar.json", data, flags)
    unranked = tmp_path / "all_reduce_ring_unranked.out"
    unranked.write_text("\n".join(line for line in ranked.read_text().splitlines() if "#  Rank" not in line))
    docs = read_measurements([ranked, unranked], flags)
    assert [(d["environment"]["nodes"], d["environment"]["gpus_per_node"]) for d in docs] == [(1, 8), (2, 4)]
    assert not any({"told", "disagrees"} & d["source"].keys() for d in docs)
    with pytest.raises(CostModelError, match="no log given lacks"):
        read_measurements([ranked], flags)


def test_a_refusal_after_the_logs_read_stays_one_line(tmp_path):
    """A log whose name says no algorithm gets a note, but where the command then refuses (a fit with one size above
    --min-bytes) the refusal is the one line on stderr: notes print once the command has its answer."""
    import subprocess
    import sys

    ring = Path(__file__).resolve().parents[1] / "hardware/measured/h100-8gpu-together-nccl-tests/all_reduce_ring.out"
    kept = [line for line in ring.read_text().splitlines()
            if not (line.split() and line.split()[0].isdigit() and int(line.split()[0]) >= 2 * 2**20)]
    log = tmp_path / "l.out"
    log.write_text("\n".join(kept) + "\n")
    args = [sys.executable, "-m", "costmodel", "validate", str(log), "--hardware", "h100-sxm"]
    refused = subprocess.run([*args, "--fit"], capture_output=True, text=True)
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1
    assert refused.stderr.startswith("error: --fit all-reduce")
    shown = subprocess.run(args, capture_output=True, text=True, check=True)
    assert shown.stderr.startswith("note: ") and "names no algorithm" in shown.stderr
