"""The benchmark harness end to end on CPU (gloo, processes started by the test), read back by validate."""

import json
import subprocess
import sys

import pytest

from costmodel.bench.collectives import launch
from costmodel.measure.results import read_results

pytestmark = pytest.mark.slow  # multi-process torch, notebooks, benchmark harness: the CI tier


def cost4d(*args):
    return subprocess.run([sys.executable, "-m", "costmodel", *args], capture_output=True, text=True)


@pytest.mark.parametrize("nproc", [2, 4])
def test_harness_writes_results_validate_reads(tmp_path, nproc):
    out = tmp_path / f"gloo{nproc}.json"
    doc = launch(nproc=nproc, ops=["all-reduce", "all-gather", "reduce-scatter"], min_bytes=2**12,
                 max_bytes=2**18, factor=4, warmup=1, iters=3, dtype="float32", backend="gloo", out=out, timeout=240)
    assert doc["status"] == "ok", doc.get("error")
    again = read_results(out)
    assert again["environment"]["world_size"] == nproc and again["environment"]["backend"] == "gloo"
    for run in again["runs"]:
        factor = 2 * (nproc - 1) / nproc if run["collective"] == "all-reduce" else (nproc - 1) / nproc
        assert [r["bytes"] for r in run["rows"]] == [4096, 16384, 65536, 262144]
        for r in run["rows"]:
            assert r["algbw_bytes_per_s"] == pytest.approx(r["bytes"] / r["time_s"])
            assert r["busbw_bytes_per_s"] == pytest.approx(r["algbw_bytes_per_s"] * factor)
    # a loopback "network" to check the numbers against: validate and fit read the harness's JSON
    spec = tmp_path / "loopback.json"
    spec.write_text(json.dumps({
        "name": "loopback", "kind": "gpu", "peak_flops": {"bf16": 1e12, "source": "test"},
        "hbm": {"capacity_bytes": 2**34, "bandwidth_bytes_per_s": 1e10, "source": "test"},
        "network": [{"name": "shm", "kind": "pcie", "bandwidth_bytes_per_s": 1e9, "domain_size": 64,
                     "source": "test: shared memory between processes"}]}))
    result = cost4d("validate", str(out), "--hardware", str(spec), "--fit", "--min-bytes", "4KiB", "--json")
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    assert len(payload["rows"]) == 12 and {f["collective"] for f in payload["fit"]} == {
        "all-reduce", "all-gather", "reduce-scatter"}


def test_timeout_still_leaves_valid_json(tmp_path):
    out = tmp_path / "cut.json"
    doc = launch(nproc=2, ops=["all-reduce"], min_bytes=2**10, max_bytes=2**26, factor=2, warmup=1, iters=50,
                 dtype="float32", backend="gloo", out=out, timeout=0.5)
    assert doc["status"] == "timeout"
    assert json.loads(out.read_text())["status"] == "timeout"  # complete JSON on disk


def test_unknown_collective_is_one_line(tmp_path):
    result = cost4d("bench", "collectives", "--out", str(tmp_path / "x.json"), "--ops", "all-gossip")
    assert result.returncode == 2 and "unknown collective 'all-gossip'" in result.stderr


def test_bench_gpu_smoke_on_cpu(tmp_path):
    """The single-device benchmark runs end to end (on CPU here; on a GPU with --device cuda)."""
    out = tmp_path / "gpu.json"
    result = cost4d("bench", "gpu", "--out", str(out), "--device", "cpu", "--small", "--iters", "1",
                    "--hardware", "h100-sxm")
    assert result.returncode == 0, result.stderr
    doc = json.loads(out.read_text())
    step = doc["ffn_step"]
    assert step["flops"] == 12 * 256 * 1024 * 2 * 512 - 2 * 256 * 1024 * 512  # (12 DFL - 2DF) T, L = 2
    assert step["predicted_memory_bytes"] > 0 and doc["matmul_bf16"][0]["flops_per_s"] > 0
    assert step["predicted_seconds"] > 0 and 0 < step["predicted_mfu"] <= 1  # the prediction is there to compare
