"""Collectives of one training step against real PyTorch (FSDP2 and tensor parallel), exact.

The expected side is what torch issues: the test starts 2 and 4 processes (gloo, CPU), each runs
tests/dist_workers.py, which trains the FFN stack for one step (forward, backward of out.sum(),
AdamW step) under every case below and logs every collective it issues, with its phase.

Capture (see tests/dist_workers.py):
- a TorchDispatchMode records every op of the c10d / _c10d_functional namespaces (FSDP2's
  ``c10d._allgather_base_`` / ``_reduce_scatter_base_``, DTensor's ``_c10d_functional.all_reduce``
  / ``all_gather_into_tensor`` / ``reduce_scatter_tensor``) with the bytes of its input and output
  and the group size; the phase is set by the step driver around forward, backward and step;
- independently, the Python entry points FSDP2 and DTensor call (``dist.all_gather_single``,
  ``funcol.all_reduce``, ...) are replaced process-wide by counting wrappers, which see a call from
  any thread. A dispatch mode is thread-local, and FSDP2 issues its backward collectives from
  autograd hooks; test_dispatch_mode_sees_every_python_api_call proves the mode missed none.

Buffer S per call follows nccl-tests, as ``Collective.buffer_bytes`` does: the gathered output of
an all-gather, the full input of a reduce-scatter or all-reduce. ``ring_bytes_sent`` is what a ring
sends given the per-rank piece torch moved (n - 1 pieces; twice for all-reduce).
Sources: parallel/data/collectives.py (FSDP, ZeRO-3), parallel/tensor/collectives.py
tensor_collectives (Megatron TP, sequence parallel), formulas/comms.py BYTES_SENT.
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="the PyTorch cross-checks need torch: pip install torch==2.13.0 (the README's test command)")

from costmodel.specs.layout import Layout
from costmodel.specs.model import FFNStack
from costmodel.specs.recipe import RECIPES
from costs import collectives as step_collectives

pytestmark = pytest.mark.slow  # multi-process torch, notebooks, benchmark harness: the CI tier

CS336 = RECIPES["cs336"]  # bf16 compute (FSDP2 param_dtype), bf16 gradient communication (reduce_dtype)
WORKER = Path(__file__).with_name("dist_workers.py")
REPO = Path(__file__).resolve().parents[1]

# D, F divisible by 4 ranks so FSDP2 pads nothing; SEQ divisible by 4 for the sequence shard.
D, F, L = 32, 96, 3
BATCH, SEQ = 3, 4
T = BATCH * SEQ  # tokens one replica holds
WORLD_SIZES = [2, 4]
RANK_TIMEOUT_S = 240  # a hung rank (peer crashed) fails the test instead of blocking CI


# (worker case, FFNStack.input_requires_grad, layout for W ranks, where the prediction comes from)
CASES = [
    pytest.param("fsdp2-reshard", False, lambda w: Layout(fsdp=w, reshard_after_forward=True),
                 "data_comm.py data_collectives, zero_stage 3", id="fsdp2-reshard_after_forward"),
    pytest.param("fsdp2-keep", False, lambda w: Layout(fsdp=w, reshard_after_forward=False),
                 "data_comm.py data_collectives, zero_stage 3", id="fsdp2-keep_after_forward"),
    # torch's default (None): only the root's own parameters stay unsharded; this root has none.
    pytest.param("fsdp2-default", False, lambda w: Layout(fsdp=w, reshard_after_forward=True),
                 "data_comm.py data_collectives, zero_stage 3", id="fsdp2-torch_default"),
    pytest.param("tp-input-grad", True, lambda w: Layout(tp=w, tokens=T),
                 "tensor_comm.py tensor_collectives, sp=False", id="tp-input_grad"),
    pytest.param("sp-input-grad", True, lambda w: Layout(tp=w, sp=True, tokens=T),
                 "tensor_comm.py tensor_collectives, sp=True", id="tp_sp-input_grad"),
    pytest.param("tp-no-input-grad", False, lambda w: Layout(tp=w, tokens=T),
                 "tensor_comm.py tensor_collectives, sp=False", id="tp-no_input_grad"),
    pytest.param("sp-no-input-grad", False, lambda w: Layout(tp=w, sp=True, tokens=T),
                 "tensor_comm.py tensor_collectives, sp=True", id="tp_sp-no_input_grad"),
    # full recomputation reruns each block's forward collectives in backward; non-reentrant stops early
    pytest.param("tp-recompute", True, lambda w: Layout(tp=w, tokens=T, recompute="full"),
                 "parallel/tensor/collectives.py recompute_collectives, sp=False", id="tp-recompute_full"),
    pytest.param("sp-recompute", True, lambda w: Layout(tp=w, sp=True, tokens=T, recompute="full"),
                 "parallel/tensor/collectives.py recompute_collectives, sp=True", id="tp_sp-recompute_full"),
    pytest.param("tp-recompute-non-reentrant", False,
                 lambda w: Layout(tp=w, tokens=T, recompute="full", checkpoint="non-reentrant"),
                 "parallel/tensor/collectives.py recompute_collectives, stops early", id="tp-recompute_non_reentrant"),
    pytest.param("sp-recompute-non-reentrant", True,
                 lambda w: Layout(tp=w, sp=True, tokens=T, recompute="full", checkpoint="non-reentrant"),
                 "parallel/tensor/collectives.py recompute_collectives, sp=True, stops early",
                 id="tp_sp-recompute_non_reentrant"),
]

#: Which measured tensor is nccl-tests' S, and which is the piece one rank owns.
BUFFER = {"all-gather": "output_bytes", "reduce-scatter": "input_bytes", "all-reduce": "input_bytes"}
RING_PASSES = {"all-gather": 1, "reduce-scatter": 1, "all-reduce": 2}  # all-reduce = RS + AG


def run_ranks(world: int, out_dir: Path, worker: Path = WORKER, worker_args=(D, F, L, BATCH, SEQ)) -> list[dict]:
    """Start ``world`` worker processes, wait for all, return each rank's logs."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "WORLD_SIZE": str(world),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    args = [sys.executable, str(worker), str(out_dir), str(out_dir / "store"), *map(str, worker_args)]
    procs, logs = [], []
    for rank in range(world):
        logs.append(open(out_dir / f"rank{rank}.log", "w"))
        procs.append(subprocess.Popen(args, env={**env, "RANK": str(rank)}, stdout=logs[-1],
                                      stderr=subprocess.STDOUT, cwd=REPO))
    deadline = time.monotonic() + RANK_TIMEOUT_S
    try:
        while any(p.poll() is None for p in procs):
            failed = [p for p in procs if p.returncode not in (None, 0)]
            if failed or time.monotonic() > deadline:
                break
            time.sleep(0.1)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        for f in logs:
            f.close()
    if any(p.returncode != 0 for p in procs):
        output = "\n".join((out_dir / f"rank{r}.log").read_text()[-3000:] for r in range(world))
        pytest.fail(f"worker ranks exited with {[p.returncode for p in procs]}:\n{output}")
    return [json.loads((out_dir / f"rank{r}.json").read_text()) for r in range(world)]


@pytest.fixture(scope="module", params=WORLD_SIZES, ids=lambda w: f"{w}ranks")
def measured(request, tmp_path_factory):
    """(world size, [per-rank {case: logs}]) from one launch of every case on that many ranks."""
    world = request.param
    return world, run_ranks(world, tmp_path_factory.mktemp(f"dist{world}"))


def tally(calls) -> dict:
    """(op, phase) -> calls, S per call, total S, group, ring bytes sent, from (op, phase, S, group,
    calls, ring bytes sent per call) rows."""
    out = {}
    for op, phase, buffer_bytes, group, n, sent in calls:
        t = out.setdefault((op, phase), {"calls": 0, "buffer_bytes_per_call": set(), "buffer_bytes": 0,
                                         "group": set(), "ring_bytes_sent": 0})
        t["calls"] += n
        t["buffer_bytes_per_call"].add(buffer_bytes)
        t["buffer_bytes"] += n * buffer_bytes
        t["group"].add(group)
        t["ring_bytes_sent"] += n * sent
    return out


def measured_rows(records):
    """One row per collective torch issued; the ring sends n - 1 of the per-rank pieces per pass."""
    for r in records:
        op, group = r["op"], r["group"]
        assert op in BUFFER, f"a collective the test does not know: {r}"
        piece = r["input_bytes"] // group if op == "all-reduce" else min(r["input_bytes"], r["output_bytes"])
        yield op, r["phase"], r[BUFFER[op]], group, 1, RING_PASSES[op] * (group - 1) * piece


def predicted_rows(collectives):
    for c in collectives:
        yield c.op, c.phase, c.buffer_bytes, c.group, c.calls, c.bytes_sent_per_call


@pytest.mark.parametrize("case, input_grad, layout, where", CASES)
def test_step_collectives_match_torch(measured, case, input_grad, layout, where):
    world, ranks = measured
    spec = FFNStack(name="ffn", d_model=D, d_ff=F, layers=L, input_requires_grad=input_grad)
    predicted = tally(predicted_rows(step_collectives(spec, CS336, layout(world))))
    for rank, logs in enumerate(ranks):
        assert tally(measured_rows(logs[case]["dispatch"])) == predicted, f"rank {rank}, {where}"


def test_fsdp2_gathers_bf16_blocks_whole(measured):
    """Ground truth alone, no costmodel: one all-gather per block of 2 D F bf16 elements."""
    world, ranks = measured
    gathers = [r for r in ranks[0]["fsdp2-reshard"]["dispatch"] if r["op"] == "all-gather"]
    assert [(r["phase"], r["output_bytes"], r["input_bytes"] * world) for r in gathers] == \
        [(phase, 2 * 2 * D * F, 2 * 2 * D * F) for phase in ["forward"] * L + ["backward"] * L]


def test_dispatch_mode_sees_every_python_api_call(measured):
    """The thread-local dispatch mode and the process-wide Python wrappers log the same calls."""
    _, ranks = measured
    for logs in ranks:
        for case, log in logs.items():
            assert log["python_api"], case
            assert [(r["op"], r["phase"]) for r in log["dispatch"]] == \
                [(r["op"], r["phase"]) for r in log["python_api"]], case


def test_every_rank_issues_the_same_collectives(measured):
    _, ranks = measured
    assert all(logs == ranks[0] for logs in ranks[1:])
