"""Hostile command lines: every option given values it must refuse, by hand and by hypothesis.

The contract (tests/hostile.py): no traceback, no hang (5 s), exit 2 with one line that quotes the
value and says what is allowed, nothing written; or exit 0 with finite output.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hostile import assert_kept_contract, assert_refused, run

ROOT = Path(__file__).parent.parent
LOG = ROOT / "hardware" / "measured" / "h100-8gpu-together-nccl-tests" / "all_reduce_ring.out"
BIG = str(10**400)
XXL = ["memory", "--model", "xxl"]
V5P = ["solve", "batch", "--model", "xxl", "--hardware", "tpu-v5p", "--fsdp", "16", "--tp", "4"]
STEP = ["step", "--model", "llama3-8b", "--hardware", "h100-sxm", "--tokens", "8192"]

#: (args, needles): each must be refused in one line containing the needles
REFUSED = [
    # numbers: digits, range, finiteness
    ([*XXL, "--tokens", "1e3"], ["'--tokens'", "'1e3' is not a whole number", "0 to 1,099,511,627,776"]),
    ([*XXL, "--tokens", BIG], ["'--tokens'", "characters)", "is not a whole number"]),
    ([*XXL, "--tokens", "9" * 5000], ["'--tokens'", "(5,000 characters)"]),
    ([*XXL, "--tokens", "-5"], ["'-5'", "not a whole number"]),
    ([*XXL, "--tokens", str(2**41)], ["2,199,023,255,552 is out of range"]),
    ([*XXL, "--tp", "٣"], ["'--tp'", "'٣'", "digits 0-9 only"]),
    ([*XXL, "--tp", "²"], ["'²'"]),
    ([*XXL, "--tp", "0"], ["0 is out of range", "1 to 16,777,216"]),
    ([*XXL, "--tp", ""], ["'--tp'", "''"]),
    ([*XXL, "--tp", " 4 x"], ["'4 x'"]),
    ([*XXL, "--fsdp", "2", "--shard-activations", "nan"], ["'nan' is not a decimal number"]),
    ([*XXL, "--fsdp", "2", "--shard-activations", "inf"], ["'inf'"]),
    ([*XXL, "--fsdp", "2", "--shard-activations", "1.5"], ["'1.5' is out of range", "0 to 1"]),
    ([*XXL, "--zero", "4", "--fsdp", "2"], ["'--zero'", "4 is out of range"]),
    ([*XXL, "--recompute", "every:²"], ["every:K", "'²'"]),
    ([*XXL, "--recompute", "every:0"], ["every:K", "0 is out of range"]),
    ([*XXL, "--recompute", "every:" + "9" * 5000], ["every:K", "characters)"]),
    ([*XXL, "--recompute", "sometimes"], ["--recompute 'sometimes'"]),
    ([*XXL, "--microbatches", "0", "--pp", "2"], ["'--microbatches'", "0 is out of range"]),
    ([*XXL, "--hsdp-group", "3", "--fsdp", "4"], ["--hsdp-group 3 sets the shard group; --fsdp 4"]),
    ([*XXL, "--units", "furlongs"], ["'furlongs' is not one of"]),
    (["flops", "--model", "xxl", "--seq", "nan"], ["--seq"]),
    (["flops", "--model", "llama3-8b", "--seq", BIG], ["'--seq'", "characters)"]),
    (["flops", "--model", "llama3-8b", "--seq", "0"], ["'--seq'", "0 is out of range"]),
    # sizes: units, range
    (["solve", "fsdp", "--model", "xxl", "--limit", "95"], ["--limit '95'", "give a unit", "95GB"]),
    (["solve", "fsdp", "--model", "xxl", "--limit", "1B"], ["--limit '1B'", "out of range", "1e+06 B"]),
    (["solve", "fsdp", "--model", "xxl", "--limit", "1e999GB"], ["--limit '1e999GB'", "out of range"]),
    (["solve", "fsdp", "--model", "xxl", "--limit", "1e-300GB"], ["out of range"]),
    (["solve", "fsdp", "--model", "xxl", "--limit", "nanGB"], ["not a size"]),
    (["solve", "fsdp", "--model", "xxl", "--limit", "95 parsecs"], ["--limit '95 parsecs'", "unknown unit 'parsecs'"]),
    (["solve", "fsdp", "--model", "xxl", "--limit", "95XB"], ["unknown unit 'XB'"]),
    (["explain", "fsdp", "--model", "xxl", "--limit", "95"], ["give a unit"]),
    (["validate", str(LOG), "--hardware", "h100-sxm", "--min-bytes", "1e999"], ["--min-bytes '1e999'", "out of range"]),
    (["validate", str(LOG), "--hardware", "h100-sxm", "--min-bytes", "-1"], ["not a size"]),
    # rates
    ([*V5P, "--ici-bandwidth", "inf"], ["'--ici-bandwidth'", "'inf'"]),
    ([*V5P, "--ici-bandwidth", "0"], ["'0' is out of range"]),
    (["explain", "batch", "--model", "xxl", "--hardware", "tpu-v5p", "--fsdp", "16", "--ici-bandwidth", "inf"],
     ["'inf'"]),
    ([*V5P, "--peak-flops", "nan"], ["'nan'"]),
    # Ulysses gives each CP rank whole heads of the TP rank's share (the message named all 32)
    (["comm", "--model", "llama3-8b", "--hardware", "h100-sxm", "--tp", "8", "--cp", "8", "--cp-kind", "a2a",
      "--tokens", "8192"], ["the 4 attention heads per TP rank (32 / --tp 8)"]),
    # routing cannot load a rank beyond all its experts or k per token: min(e, E/k) = 4 for mixtral on 8 ranks
    (["memory", "--model", "mixtral-8x7b", "--moe-imbalance", "100", "--ep", "8", "--dp", "8", "--tokens", "4096"],
     ["--moe-imbalance 100 exceeds", "min(e, E/k) = 4"]),
    # a layout that is never compute-bound: explain refuses as solve does (it printed B = inf)
    (["explain", "batch", "--model", "llama3-8b", "--hardware", "h100-sxm", "--fsdp", "8", "--tp", "8"],
     ["TP degree Y = 8 is never compute-bound"]),
    ([*V5P, "--peak-flops", "1e-300"], ["out of range"]),
    # layouts the hardware or model cannot take
    (["comm", "--model", "xxl", "--hardware", "tpu-v5p", "--mx", "3", "--my", "3", "--fsdp", "8", "--tp", "8"],
     ["--mx 3 + --my 3 = 6 torus axes", "tpu-v5p has 3"]),
    (["comm", "--model", "xxl", "--hardware", "h100-sxm", "--mx", "2", "--fsdp", "8"], ["TPU torus", "h100-sxm"]),
    (["solve", "batch", "--model", "xxl", "--hardware", "h100-sxm", "--fsdp", "8", "--mx", "2"], ["TPU torus"]),
    (["memory", "--model", "llama3-8b", "--pp", "2", "--chunks", "32", "--schedule", "interleaved",
      "--microbatches", "4"], ["--chunks 32 = 64 model chunks", "32 layers"]),
    (["memory", "--model", "llama3-8b", "--pp", "64"], ["--pp 64 is more than the model's 32 layers"]),
    (["memory", "--model", "llama3-8b", "--tp", "3"], ["--tp 3"]),
    ([*V5P, "--optimize-split", "--slice", ""], ["--slice ''"]),
    ([*V5P, "--optimize-split", "--slice", "x".join(["2"] * 21)], ["21 axes", "at most 3"]),
    ([*V5P, "--optimize-split", "--slice", "4x٤x4"], ["write the torus shape"]),
    ([*V5P, "--optimize-split", "--slice", "0x4"], ["--slice"]),
    (["solve", "batch", "--model", "xxl", "--hardware", "h100-sxm", "--fsdp", "8", "--slice", "2x4"],
     ["--slice", "is a GPU"]),
    ([*V5P, "--overlap", "both"], ["--overlap 'both'"]),
    ([*STEP, "--data-overlap", "sometimes"], ["--data-overlap 'sometimes'"]),
    (["explain", "memory", "--model", "xxl", "--format", "pdf"], ["--format 'pdf'"]),
    # names
    ([*XXL, "--hardware", "h" * 100_000], ["unknown hardware", "(100,000 characters)"]),
    (["memory", "--model", "m" * 100_000], ["unknown model", "(100,000 characters)"]),
    (["memory", "--model", "x" * 100_000 + ".json"], ["too long"]),
    ([*XXL, "--recipe", "r" * 100_000], ["unknown recipe"]),
    ([*XXL, "--hardware", "h100\n-sxm"], ["unknown hardware", "printable"]),
    ([*XXL, "--hardware", "h100-smx"], ["unknown hardware 'h100-smx'", "closest: h100-sxm"]),
    (["memory", "--model", "lama3-8b"], ["closest: llama3-8b"]),
    (["memory", "--model", "a\0b.json"], ["NUL"]),
    # measurements and --out
    (["validate", str(LOG), "--hardware", "h100-sxm", "--out", "cal.json"], ["--out", "--fit"]),
    (["validate", str(LOG), "--hardware", "h100-sxm", "--placement", "sideways"], ["--placement 'sideways'"]),
    (["import", "nccl-tests", str(LOG), "--algorithm", ""], ["unknown algorithm ''", "ring"]),
    (["validate", str(LOG)], ["give --hardware"]),
    (["import", "nccl-tests", str(LOG), "--nodes", "0"], ["'--nodes'", "0 is out of range"]),
    (["import", "nccl-tests", str(LOG), "--gpus-per-node", "x", "--nodes", "1"], ["'--gpus-per-node'", "'x'"]),
    (["import", "nccl-tests", str(LOG), "--op", ""], ["unknown collective ''"]),
    (["bench", "collectives", "--out", "x.json", "--nproc", "1"], ["'--nproc'", "1 is out of range"]),
    (["bench", "collectives", "--out", "x.json", "--factor", "1"], ["'--factor'", "above 1"]),
    (["bench", "collectives", "--out", "x.json", "--factor", "nan"], ["'nan'"]),
    (["bench", "collectives", "--out", "x.json", "--iters", "0"], ["'--iters'"]),
    (["bench", "collectives", "--out", "x.json", "--timeout", "nan"], ["'--timeout'", "'nan'"]),
    (["bench", "collectives", "--out", "x.json", "--timeout", "-1"], ["'--timeout'"]),
    (["bench", "collectives", "--out", "x.json", "--ops", "all-reduce,telepathy"], ["unknown collective 'telepathy'"]),
    (["bench", "collectives", "--out", "x.json", "--ops", ","], ["--ops"]),
    (["bench", "collectives", "--out", "x.json", "--min-bytes", "1GiB", "--max-bytes", "1MiB"], ["--max-bytes"]),
    (["bench", "collectives", "--out", "x.json", "--max-bytes", "1e999"], ["--max-bytes", "out of range"]),
    (["bench", "collectives", "--out", "x.json", "--backend", "mpi"], ["--backend 'mpi'"]),
    (["bench", "gpu", "--out", "x.json", "--device", "tpu"], ["--device 'tpu'"]),
    (["bench", "gpu", "--out", "x.json", "--iters", "0"], ["'--iters'"]),
    # usage
    (["memory"], ["--model"]),
    (["memory", "--model", "xxl", "--no-such-flag"], ["No such option"]),
    (["no-such-command"], ["No such command"]),
]


@pytest.mark.parametrize("args, needles", REFUSED, ids=[" ".join(a)[:80] for a, _ in REFUSED])
def test_refused_in_one_line(tmp_path, monkeypatch, args, needles):
    monkeypatch.chdir(tmp_path)
    outcome = run(args)
    assert_refused(outcome, *needles)
    assert list(tmp_path.iterdir()) == []  # nothing written


def _file(path: Path) -> Path:
    path.write_text("x")
    return path


@pytest.mark.parametrize("make, needle", [
    (lambda d: (d / "dir").mkdir() or d / "dir", "is a directory"),
    (lambda d: _file(d / "file") / "out.json", "is not a folder"),
    (lambda d: d / "missing" / "out.json", "does not exist"),
    (lambda d: d / ("n" * 300 + ".json"), "too long"),
    (lambda d: "", "--out . is a directory"),
])
@pytest.mark.parametrize("command", ["import", "validate", "bench"])
def test_bad_out_is_refused_before_any_work(tmp_path, make, needle, command):
    out = str(make(tmp_path))
    args = {"import": ["import", "nccl-tests", str(LOG)],
            "validate": ["validate", str(LOG), "--hardware", "h100-sxm", "--fit"],
            "bench": ["bench", "collectives", "--nproc", "2"]}[command]
    outcome = run([*args, "--out", out])
    assert_refused(outcome, needle)


def test_failed_bench_leaves_an_existing_out_alone(tmp_path):
    out = tmp_path / "results.json"
    out.write_text("precious")
    for bad in (["--factor", "0.5"], ["--ops", "nope"], ["--iters", "-1"], ["--timeout", "nan"]):
        assert_refused(run(["bench", "collectives", "--out", str(out), *bad]))
        assert out.read_text() == "precious"


def test_out_files_get_the_umask(tmp_path):
    old = os.umask(0o022)
    try:
        out = tmp_path / "r.json"
        assert run(["import", "nccl-tests", str(LOG), "--out", str(out)]).code == 0
    finally:
        os.umask(old)
    assert stat.S_IMODE(out.stat().st_mode) == 0o644
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_bench_gpu_without_cuda_or_torch(tmp_path, monkeypatch):
    import torch

    if not torch.cuda.is_available():
        assert_refused(run(["bench", "gpu", "--out", str(tmp_path / "g.json")]), "no CUDA device", "--device cpu")
    monkeypatch.setitem(sys.modules, "torch", None)
    assert_refused(run(["bench", "gpu", "--out", str(tmp_path / "g.json")]), "needs PyTorch", "pip install")
    assert_refused(run(["bench", "collectives", "--out", str(tmp_path / "c.json")]), "needs PyTorch")


@pytest.mark.parametrize("args", [[], ["solve"], ["explain"], ["import"], ["bench"]])
def test_bare_group_prints_help_without_an_empty_error(args):
    outcome = run(args)
    assert outcome.error is None and outcome.code == 2
    assert "Usage" in outcome.stdout + outcome.stderr
    assert not any(line.strip() in ("error:", "error: ") for line in outcome.stderr.splitlines())


def test_slice_search_is_bounded():
    """Many torus axes used to take 2^axes solves: now refused at once, and 3 axes stay fast."""
    outcome = run([*V5P, "--optimize-split", "--slice", "x".join(["1"] * 60000)])
    assert_refused(outcome, "--slice")
    assert outcome.seconds < 1
    ok = run([*V5P, "--optimize-split", "--slice", "4x4x4", "--what-if"])
    assert ok.code == 0, str(ok)


@pytest.mark.slow
def test_through_the_real_script():
    """The installed entry point: one line, exit 2, no traceback; Ctrl-C style termination is quiet."""
    result = subprocess.run([sys.executable, "-m", "costmodel", "memory", "--model", "xxl", "--tokens", BIG],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    for name in (b"a\xff.json", b"\xff\xfe", b"x" * 300 + b"\xff/" + b".json"):  # not UTF-8: surrogates in argv
        result = subprocess.run([sys.executable, "-m", "costmodel", "memory", "--model", name], capture_output=True,
                                timeout=60)
        assert result.returncode == 2 and result.stderr.count(b"\n") == 1, result.stderr


def test_sigterm_is_quiet_and_leaves_no_temporary_file(tmp_path):
    """SIGTERM while --out is being written: the temporary file goes, the old file stays whole."""
    out = tmp_path / "r.json"
    out.write_text('{"old": true}')
    code = (f"import os, signal; from costmodel.inputs import output\n"
            f"real = os.replace\n"
            f"def killed(*a):\n    os.kill(os.getpid(), signal.SIGTERM)\n    real(*a)\n"
            f"output.os.replace = killed\n"
            f"import sys; sys.argv = ['cost4d', 'import', 'nccl-tests', {str(LOG)!r}, '--out', {str(out)!r}]\n"
            f"from costmodel.cli import main; main()")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 128 + signal.SIGTERM and "Traceback" not in result.stderr, result.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"] and json.loads(out.read_text()) == {"old": True}


# ---- hypothesis: random values for every option -----------------------------------------------------------------

HOSTILE = st.sampled_from(["0", "1", "2", "3", "4", "8", "-1", "1.5", "nan", "inf", "-inf", "1e999", "1e3", BIG,
                           "eager", "math", "non-reentrant", "compute", "replicate", "fp8", "causal", "nanotron",
                           "٣", "²", "", " ", "x", "0x10", "1_000", "\u202e8", "8GB", "every:2", "every:²", "ring",
                           "a2a", "gpipe", "interleaved", "selective", "full", "4x4x4", "95GB", "1B", "1e-300GB"])
FLAGS = ["--tokens", "--dp", "--fsdp", "--zero", "--tp", "--pp", "--cp", "--shard-activations", "--recompute",
         "--schedule", "--microbatches", "--chunks", "--cp-kind", "--hsdp-group", "--tp-ends", "--grad-accum",
         "--split", "--tp-kv", "--attention", "--checkpoint"]
COMMANDS = {
    "memory": (["memory", "--model", "llama3-8b"], FLAGS + ["--framework"]),
    "comm": (["comm", "--model", "llama3-8b", "--hardware", "h100-sxm"],
             [f for f in FLAGS if f not in ("--shard-activations", "--recompute")] + ["--mx", "--my"]),
    "comm-tpu": (["comm", "--model", "xxl", "--hardware", "tpu-v5p"], ["--tokens", "--fsdp", "--tp", "--mx", "--my"]),
    "step": (["step", "--model", "llama3-8b", "--hardware", "h100-sxm"],
             [f for f in FLAGS if f not in ("--shard-activations", "--hsdp-group")]
             + ["--data-overlap", "--framework", "--precision", "--attention-flops"]),
    "plan": (["plan", "--model", "nanotron-1b", "--hardware", "h100-sxm", "--gpus", "8", "--global-batch", "1048576"],
             ["--gpus", "--global-batch", "--seq", "--top", "--headroom", "--explain", "--framework", "--precision"]),
    "solve-fsdp": (["solve", "fsdp", "--model", "xxl"], ["--limit", "--tokens", "--tp", "--pp", "--recompute"]),
    "solve-batch": (["solve", "batch", "--model", "xxl", "--hardware", "tpu-v5p"],
                    ["--fsdp", "--tp", "--mx", "--my", "--overlap", "--pass", "--peak-flops", "--ici-bandwidth",
                     "--slice"]),
    "flops": (["flops", "--model", "llama3-8b"], ["--tokens", "--tp", "--pp", "--cp", "--recompute", "--seq", "--checkpoint"]),
}


@pytest.mark.slow
@settings(max_examples=250, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data(), command=st.sampled_from(sorted(COMMANDS)), json_out=st.booleans())
def test_random_option_values_keep_the_contract(data, command, json_out):
    base, flags = COMMANDS[command]
    chosen = data.draw(st.lists(st.sampled_from(flags), min_size=1, max_size=4, unique=True))
    args = list(base)
    for flag in chosen:
        args += [flag, data.draw(HOSTILE)]
    if json_out:
        args.append("--json")
    assert_kept_contract(run(args))
