"""nccl-tests import and `cost4d validate` on the shipped 8 x H100 logs (third-party, see SOURCE.md)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from costmodel.errors import CostModelError
from costmodel.measure import validate as v
from costmodel.measure.nccl_tests import parse_log
from costmodel.specs.hardware import Hardware
from costmodel.specs.load import load_hardware

LOGS = sorted((Path(__file__).parent.parent / "hardware" / "measured" / "h100-8gpu-together-nccl-tests").glob("*.out"))


def cost4d(*args):
    return subprocess.run([sys.executable, "-m", "costmodel", *args], capture_output=True, text=True)


def test_parse_all_reduce_ring():
    doc = parse_log(LOGS[2])  # all_reduce_ring.out
    run = doc["runs"][0]
    assert (run["collective"], run["algorithm"]) == ("all-reduce", "ring")
    assert doc["environment"] | {} == {"world_size": 8, "nodes": 1, "gpus_per_node": 8,
                                       "hosts": ["gpu-dp-2jvzl-pqq7p"], "devices": ["NVIDIA H100 80GB HBM3"],
                                       "backend": "nccl", "gpus_per_thread": 8}  # '# nThread 1 nGpus 8' 
    assert doc["source"]["nccl"] == "2.26.2"
    out_of_place = [r for r in run["rows"] if r["placement"] == "out-of-place"]
    assert len(out_of_place) == 31  # 8 B ... 8 GiB, factor 2
    last = out_of_place[-1]  # '8589934592 ... 40848.8 210.29 368.00' in the log
    assert (last["bytes"], last["time_s"], last["busbw_bytes_per_s"]) == (8589934592, 40848.8e-6, 368.00e9)


def test_parsed_rows_obey_nccl_tests_conventions():
    """algbw = S/t and busbw = algbw x factor, to the log's print rounding."""
    for path in LOGS:
        doc = parse_log(path)
        run = doc["runs"][0]
        factor = 2 * 7 / 8 if run["collective"] == "all-reduce" else 7 / 8
        for row in run["rows"]:
            if row["bytes"] >= 2**20:
                assert row["algbw_bytes_per_s"] == pytest.approx(row["bytes"] / row["time_s"], rel=0.01)
                assert row["busbw_bytes_per_s"] == pytest.approx(row["algbw_bytes_per_s"] * factor, rel=0.01)


def test_multi_node_log(tmp_path):
    """Ranks on two hosts: 2 nodes x 4 GPUs."""
    text = LOGS[2].read_text()
    for rank in range(4, 8):
        text = text.replace(f"#  Rank  {rank} Group  0 Pid 1595114 on gpu-dp-2jvzl-pqq7p device  {rank}",
                            f"#  Rank  {rank} Group  0 Pid 1595114 on second-host device  {rank - 4}")
    path = tmp_path / "all_reduce_2nodes.out"
    path.write_text(text)
    env = parse_log(path)["environment"]
    assert (env["world_size"], env["nodes"], env["gpus_per_node"]) == (8, 2, 4)


@pytest.mark.parametrize("mangle, needle", [
    (lambda t: t.replace("   366.74  182.99", "   36x.74  182.99"), ":41: out-of-place time: expected a finite number"),  # line 41 of the log
    (lambda t: "\n".join(l for l in t.splitlines() if l.startswith("#")), "no data rows"),
    (lambda t: t.replace("Collective test starting", "Something else"), "no 'Collective test starting' line before the data"),
])
def test_malformed_logs_name_the_problem(tmp_path, mangle, needle):
    path = tmp_path / "bad.out"
    path.write_text(mangle(LOGS[2].read_text()))
    with pytest.raises(CostModelError, match=needle):
        parse_log(path)


def test_datasheet_error_is_reported_honestly():
    """Without fitting: NVLink at its 450 GB/s datasheet rate with NCCL's tuning latencies."""
    rows = v.compare([parse_log(p) for p in LOGS], load_hardware("h100-sxm"))
    error = v.median_abs_error(rows)
    assert error is not None and error > 0  # whatever it is, it is a number, and printed by the CLI


def test_fit_brings_each_collective_within_10_percent():
    docs = [parse_log(p) for p in LOGS]
    spec = load_hardware("h100-sxm")
    fits = v.fit(docs, spec)
    assert {(f.collective, f.algorithm) for f in fits} == {
        ("all-reduce", "ring"), ("all-gather", "ring"), ("reduce-scatter", "ring"), ("all-reduce", "nvls")}
    calibrated = Hardware.model_validate(v.calibrated_spec(spec, fits, "test"))
    summary = v.summary(v.compare(docs, calibrated))
    assert all(err <= 10 for err in summary["per_collective"].values()), summary
    assert summary["median_abs_error_pct"] <= 10


def test_fit_recovers_a_known_line():
    """Synthetic t = 20 us + 2 (n-1)/n S / 300 GB/s: the fit returns those numbers."""
    points = [(s, 20e-6 + 2 * 7 / 8 * s / 300e9) for s in (2**k for k in range(20, 34))]
    alpha, bandwidth = v.fit_latency_bandwidth(points, 2 * 7 / 8)
    assert alpha == pytest.approx(20e-6, rel=1e-9) and bandwidth == pytest.approx(300e9, rel=1e-9)


@pytest.mark.slow
def test_validate_cli_json_and_calibrated_spec_round_trip(tmp_path):
    out = tmp_path / "h100-calibrated.json"
    result = cost4d("validate", *map(str, LOGS), "--hardware", "h100-sxm", "--fit", "--out", str(out), "--json")
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    assert payload["median_abs_error_pct"] <= 10
    assert {"collective", "algorithm", "bytes", "nodes", "gpus_per_node", "measured_s", "predicted_s",
            "error_pct"} <= set(payload["rows"][0])
    again = json.loads(cost4d("validate", *map(str, LOGS), "--hardware", str(out), "--json").stdout)
    assert again["median_abs_error_pct"] == pytest.approx(payload["median_abs_error_pct"])


@pytest.mark.slow
def test_import_then_validate_reads_the_results_json(tmp_path):
    results = tmp_path / "h100.json"
    assert cost4d("import", "nccl-tests", *map(str, LOGS), "--out", str(results)).returncode == 0
    payload = json.loads(cost4d("validate", str(results), "--hardware", "h100-sxm", "--json").stdout)
    assert len(payload["rows"]) == sum(1 for _ in v.measured_rows([parse_log(p) for p in LOGS]))


@pytest.mark.parametrize("setup, needle", [
    (lambda d: (d / "other.json").write_text('{"benchmark": "something else"}'), "not a cost4d results file"),
    (lambda d: (d / "empty.out").write_text("# nccl-tests version 2.17.9 nccl-headers=22602 nccl-library=22602\n"
                                            "# Collective test starting: all_reduce_perf\n"
                                            "#  Rank  0 Group  0 Pid 1 on h device  0 [0000:29:00] NVIDIA H100\n"),
     "no data rows"),
    (lambda d: (d / "weird_perf.out").write_text(LOGS[2].read_text().replace("all_reduce_perf", "gossip_perf")),
     "unknown collective 'gossip_perf'"),
])
def test_bad_measurement_files(tmp_path, setup, needle):
    setup(tmp_path)
    (path,) = list(tmp_path.iterdir())
    result = cost4d("validate", str(path), "--hardware", "h100-sxm")
    assert result.returncode == 2 and needle in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_spec_without_the_needed_level(tmp_path):
    """Two nodes need a scale-out level; a spec with NVLink only cannot say."""
    spec = load_hardware("h100-sxm").model_dump(exclude_none=True)
    spec["network"] = spec["network"][:1]
    path = tmp_path / "nvlink-only.json"
    path.write_text(json.dumps(spec))
    text = LOGS[2].read_text()
    for rank in range(4, 8):
        text = text.replace(f"on gpu-dp-2jvzl-pqq7p device  {rank}", f"on other device  {rank - 4}")
    log = tmp_path / "all_reduce_ring.out"
    log.write_text(text)
    result = cost4d("validate", str(log), "--hardware", str(path))
    assert result.returncode == 2 and "no scale-out level" in result.stderr
