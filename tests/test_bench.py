"""The benchmark harness: end to end on CPU (gloo, processes started by the test), read back by validate; its
failures as one line with the reason; the torchrun worker taking `bench collectives`' own arguments."""

import json
import os
import pty
import subprocess
import sys

import pytest

from costmodel.bench.collectives import launch, reason, sizes
from costmodel.measure.results import read_results

slow = pytest.mark.slow  # multi-process torch: the CI tier


def cost4d(*args, env=None, **kwargs):
    return subprocess.run([sys.executable, "-m", "costmodel", *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, **kwargs)


def one_line(result, needle: str, code: int = 2) -> None:
    """The failure contract: exit ``code``, one 'error: ...' line holding ``needle``, no traceback."""
    assert result.returncode == code, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], result.stderr
    assert "Traceback" not in result.stderr


def _cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


@slow
@pytest.mark.parametrize("nproc", [2, 4])
def test_harness_writes_results_validate_reads(tmp_path, nproc):
    out = tmp_path / f"gloo{nproc}.json"
    seen = []
    doc = launch(nproc=nproc, ops=["all-reduce", "all-gather", "reduce-scatter"], min_bytes=2**12,
                 max_bytes=2**18, factor=4, warmup=1, iters=3, dtype="float32", backend="gloo", out=out, timeout=240,
                 on_progress=lambda op, size: seen.append((op, size)))
    assert doc["status"] == "ok", doc.get("error")
    assert seen == [(op, s) for op in ("all-reduce", "all-gather", "reduce-scatter") for s in (4096, 16384, 65536, 262144)]
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


@slow
def test_timeout_still_leaves_valid_json(tmp_path):
    out = tmp_path / "cut.json"
    doc = launch(nproc=2, ops=["all-reduce"], min_bytes=2**10, max_bytes=2**26, factor=2, warmup=1, iters=50,
                 dtype="float32", backend="gloo", out=out, timeout=0.5)
    assert doc["status"] == "timeout" and doc["reason"] == "stopped by --timeout 0.5 s"
    assert json.loads(out.read_text())["status"] == "timeout"  # complete JSON on disk


def test_sizes_are_nccl_tests_sweep():
    assert sizes(1024, 16 * 2**20, 2) == [2**k for k in range(10, 25)]  # -b 1K -e 16M -f 2: 15 sizes
    assert sizes(1000, 1000, 2) == [1000]


@pytest.mark.parametrize("args, needle", [
    (["--ops", "all-gossip"], "unknown collective 'all-gossip'"),
    (["--ops", "reduce"], "the benchmark times all-reduce, all-gather"),  # a collective validate knows, the bench not
    (["--max-bytes", "lots"], "--max-bytes"),
    (["--min-bytes", "1MiB", "--max-bytes", "1KiB"], "--max-bytes 1KiB is below --min-bytes 1MiB"),
    (["--backend", "mpi"], "--backend 'mpi': use nccl (GPUs) or gloo (CPUs)"),
])
def test_bad_options_are_one_line_before_torch(tmp_path, args, needle):
    out = tmp_path / "x.json"
    result = cost4d("bench", "collectives", "--out", str(out), *args)
    one_line(result, needle)
    assert not out.exists()


@pytest.mark.parametrize("command", [["bench", "collectives"], ["bench", "gpu", "--device", "cpu"]])
def test_no_torch_is_one_line(tmp_path, command):
    fake = tmp_path / "site" / "torch"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('No module named torch (a test hides it)')\n")
    result = cost4d(*command, "--out", str(tmp_path / "x.json"), env={"PYTHONPATH": str(tmp_path / "site")})
    one_line(result, f"{command[1] if command[1] == 'gpu' else 'collectives'} needs PyTorch")
    assert "pip install torch" in result.stderr


@pytest.mark.skipif(_cuda(), reason="this torch sees a CUDA device")
@pytest.mark.parametrize("command, needle", [
    (["bench", "collectives", "--backend", "nccl"], "--backend nccl: this torch sees no CUDA device"),
    (["bench", "gpu"], "--device cuda: this torch sees no CUDA device"),
])
@pytest.mark.slow
def test_no_cuda_is_one_line(tmp_path, command, needle):
    pytest.importorskip("torch")
    one_line(cost4d(*command, "--out", str(tmp_path / "x.json")), needle)


def test_nccl_unavailable_is_one_line(tmp_path, monkeypatch, capsys):
    """A torch with CUDA but without NCCL (monkeypatched: this machine has neither)."""
    torch = pytest.importorskip("torch")
    from costmodel.cli import main

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 8)
    monkeypatch.setattr(torch.distributed, "is_nccl_available", lambda: False)
    with pytest.raises(SystemExit) as ended:
        main(["bench", "collectives", "--backend", "nccl", "--nproc", "8", "--out", str(tmp_path / "x.json")])
    err = capsys.readouterr().err.strip().splitlines()
    assert ended.value.code == 2 and len(err) == 1 and "was built without NCCL; --backend gloo runs on CPUs" in err[0]


@pytest.mark.parametrize("log, why", [
    ("W0101 warning\n[rank1]: error: rank 1: RuntimeError: NCCL error: unhandled system error\n"
     "[rank0]: error: rank 0: DistBackendError: peer gone\nChildFailedError:\n", "rank 1: RuntimeError: NCCL error: "
     "unhandled system error"),  # the first rank's one line
    ("Traceback (most recent call last):\n  File x\nRuntimeError: Address already in use\n", "RuntimeError: Address "
     "already in use"),  # no rank got as far as its own line: the last exception
    ("", "no output"),
])
def test_reason_is_one_line(log, why):
    assert reason(log) == why


def test_worker_parses_the_commands_own_arguments(tmp_path, monkeypatch, capsys):
    """Under torchrun the worker takes `bench collectives`' arguments, units and defaults included,
    and notes that --nproc is ignored (run_rank stubbed: no processes here)."""
    pytest.importorskip("torch")
    from costmodel.bench import collectives_worker

    given = {}

    def run_rank(**sweep):
        given.update(sweep)
        return {"format": "cost4d-collectives/1", "status": "ok", "source": {}, "environment": {}, "runs": []}

    monkeypatch.setattr(collectives_worker, "run_rank", run_rank)
    for name, value in {"TORCHELASTIC_RUN_ID": "test", "RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0"}.items():
        monkeypatch.setenv(name, value)
    out = tmp_path / "r.json"
    with pytest.raises(SystemExit) as ended:
        collectives_worker.main(["--max-bytes", "16MiB", "--nproc", "8", "--ops", "all-reduce,all_gather",
                                 "--out", str(out)])
    assert ended.value.code == 0
    assert given == {"ops": ["all-reduce", "all-gather"], "min_bytes": 1024, "max_bytes": 16 * 2**20, "factor": 2.0,
                     "warmup": 5, "iters": 20, "dtype": "float32", "backend": "gloo", "out": out}
    err = capsys.readouterr().err
    assert err.startswith("note: --nproc 8 is ignored under torchrun") and "2 processes" in err


@slow
def test_torchrun_runs_the_worker_with_the_same_arguments(tmp_path):
    """The README's multi-node form on one node: torchrun starts the worker with `bench collectives`' arguments."""
    out = tmp_path / "r.json"
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "-m",
                           "costmodel.bench.collectives_worker", "--max-bytes", "16KiB", "--nproc-per-node", "4",
                           "--ops", "all-reduce", "--iters", "2", "--warmup", "1", "--out", str(out), "--json"],
                          capture_output=True, text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr
    doc = read_results(out)
    assert doc["environment"]["world_size"] == 2 and [r["bytes"] for r in doc["runs"][0]["rows"]] == [
        1024, 2048, 4096, 8192, 16384]  # --min-bytes' default, 1 KiB
    assert json.loads(done.stdout)["runs"][0]["collective"] == "all-reduce"  # rank 0 printed the --json
    assert "note: --nproc 4 is ignored under torchrun" in done.stderr


@slow
@pytest.mark.skipif(_cuda(), reason="this torch sees a CUDA device")
def test_a_failed_run_says_why(tmp_path):
    """NCCL on a machine without CUDA, past the command's own checks: a rank's one line, the reason kept."""
    doc = launch(nproc=2, ops=["all-reduce"], min_bytes=1024, max_bytes=4096, factor=2, warmup=1, iters=1,
                 dtype="float32", backend="nccl", out=tmp_path / "f.json", timeout=240)
    assert doc["status"] == "failed" and doc["reason"].startswith("rank ") and "cuda" in doc["reason"].lower()
    ranks = [line for line in doc["error"].splitlines() if line.startswith("error: rank ")]
    # each rank that got to fail wrote its one line; torchrun may stop the second before it does (a race)
    assert 1 <= len(ranks) <= 2 and all("cuda" in line.lower() for line in ranks)
    assert json.loads((tmp_path / "f.json").read_text())["reason"] == doc["reason"]


@slow
def test_progress_bar_on_a_terminal_only(tmp_path):
    """stderr a terminal: a rich progress bar over the sizes; piped: nothing but the result on stdout."""
    args = ["bench", "collectives", "--max-bytes", "4KiB", "--iters", "1", "--warmup", "0", "--ops", "all-reduce"]
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "costmodel", *args, "--out", str(tmp_path / "a.json")],
                            stdout=subprocess.PIPE, stderr=follower, env={**os.environ, "TERM": "xterm"})
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    assert proc.wait(timeout=300) == 0
    bar = b"".join(chunks).decode()
    assert "starting torchrun (2 processes, gloo)" in bar or "all-reduce" in bar, bar
    piped = cost4d(*args, "--out", str(tmp_path / "b.json"), timeout=300)
    assert piped.returncode == 0 and piped.stderr == "" and "all-reduce" in piped.stdout


@slow
def test_bench_gpu_smoke_on_cpu(tmp_path):
    """The single-device benchmark runs end to end (on CPU here; on a GPU with --device cuda), and prints
    each measurement next to cost4d's figure for it."""
    out = tmp_path / "gpu.json"
    result = cost4d("bench", "gpu", "--out", str(out), "--device", "cpu", "--small", "--iters", "1",
                    "--hardware", "h100-sxm")
    assert result.returncode == 0, result.stderr
    doc = json.loads(out.read_text())
    step = doc["ffn_step"]
    assert step["flops"] == 12 * 256 * 1024 * 2 * 512 - 2 * 256 * 1024 * 512  # (12 DFL - 2DF) T, L = 2
    assert step["predicted_memory_bytes"] > 0 and doc["matmul_bf16"][0]["flops_per_s"] > 0
    assert step["predicted_seconds"] > 0 and 0 < step["predicted_mfu"] <= 1  # the prediction is there to compare
    time_row = next(line for line in result.stdout.splitlines() if line.startswith("FFN step time"))
    measured, predicted = time_row.split()[3], time_row.split()[5]  # 'FFN step time  M s  P s  E%'
    assert float(measured) == pytest.approx(step["seconds"], rel=1e-3)
    assert float(predicted) == pytest.approx(step["predicted_seconds"], rel=1e-3)
    assert time_row.endswith(f"{100 * (step['predicted_seconds'] - step['seconds']) / step['seconds']:+.1f}%")
