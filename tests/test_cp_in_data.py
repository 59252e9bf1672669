"""Frameworks that shard and reduce the data axis over its ranks and the CP ranks together (Point.sharding):
torchtitan's FSDP mesh is dp_shard x cp flattened (parallelize.py, fully_shard over world_mesh["dp_shard_cp"]),
Megatron-core's gradient buffers and distributed optimizer span the data-parallel-with-CP group
(distributed_data_parallel.py: intra_dp_cp_group). Torch's own traffic on torchtitan's mesh is checked in
tests/test_torch_distributed_llama.py (test_torchtitan_shards_over_the_data_and_cp_ranks_as_torch_does)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from costmodel.cost.evaluate import evaluate_layout
from costmodel.errors import CostModelError
from costmodel.specs.framework_catalog import FRAMEWORKS
from costmodel.specs.layout import Layout
from costmodel.specs.load import load_hardware, load_model, load_recipe

LLAMA = load_model("llama3-8b")
H100 = load_hardware("h100-sxm")
STATE = ("master_weights", "grads", "optimizer")


def _cost(framework, recipe, hardware=None, **layout):
    return evaluate_layout(LLAMA, load_recipe(recipe), Layout(**{"tokens": 8192, **layout}), hardware,
                           framework=FRAMEWORKS[framework])


def _state(cost):
    return {k: v for k, v in cost.heaviest.components.items() if k in STATE}


def test_torchtitan_state_is_sharded_fsdp_x_cp_ways():
    """FSDP over 4 data x 2 CP ranks holds what FSDP over 8 data ranks holds: 16 B/param over 8 shards (fp32
    weights, gradients, Adam's two moments), 1/8 of the unsharded state each to within FSDP's padding."""
    folded, plain = _cost("torchtitan", "fsdp2", fsdp=4, cp=2), _cost("torchtitan", "fsdp2", fsdp=8)
    assert _state(folded) == _state(plain)
    assert sum(_state(folded).values()) == pytest.approx(16 * 8_030_261_248 / 8, rel=1e-3)  # Llama 3 8B's parameters
    only_cp = _cost("torchtitan", "fsdp2", cp=8)  # no data shards at all: torchtitan still shards over the CP ranks
    assert _state(only_cp) == _state(plain)


def test_torchtitan_gathers_and_reduces_over_one_group_and_no_cp_gradient_all_reduce():
    folded = _cost("torchtitan", "fsdp2", H100, fsdp=4, cp=2)
    plain = _cost("torchtitan", "fsdp2", H100, fsdp=8)
    data = [(c.collective.op, c.collective.group, c.collective.calls, c.collective.buffer_bytes)
            for c in folded.collectives if c.collective.axis in ("fsdp", "dp", "data")]
    assert data == [(c.collective.op, c.collective.group, c.collective.calls, c.collective.buffer_bytes)
                    for c in plain.collectives if c.collective.axis in ("fsdp", "dp", "data")]
    assert {c.collective.group for c in folded.collectives if c.collective.axis == "fsdp"} == {8}
    assert not [c for c in folded.collectives if c.collective.axis == "cp" and c.collective.op == "all-reduce"]
    # 8 GPUs: the combined group is the node, as the 8 FSDP ranks are
    assert {c.placement.per_domain for c in folded.collectives if c.collective.axis == "fsdp"} == {8}


def test_placement_of_the_combined_group_across_nodes():
    """tp 8, fsdp 2, cp 2 on 32 GPUs: TP fills each node, so the 4 ranks of fsdp x cp sit one per node."""
    cost = _cost("torchtitan", "fsdp2", H100, tp=8, fsdp=2, cp=2)
    fsdp = {(c.placement.ranks, c.placement.per_domain) for c in cost.collectives if c.collective.axis == "fsdp"}
    assert fsdp == {(4, 1)}


def test_the_exact_accounting_keeps_cp_ranks_as_replicas():
    """No framework: CP ranks replicate the weights and all-reduce their gradients over the CP group."""
    cost = evaluate_layout(LLAMA, load_recipe("fsdp2"), Layout(tokens=8192, fsdp=4, cp=2))
    assert [c.op for c in cost.collectives if c.axis == "cp" and c.op == "all-reduce"] == ["all-reduce"]
    assert {c.group for c in cost.collectives if c.axis == "fsdp"} == {4}


def test_megatron_distributed_optimizer_over_data_and_cp():
    """Megatron --fsdp 4 --cp 2 --zero 1: the optimizer's shards and the gradient reduce-scatter span 8 ranks."""
    folded, plain = _cost("megatron", "megatron", fsdp=4, cp=2, zero=1), _cost("megatron", "megatron", fsdp=8, zero=1)
    assert _state(folded) == _state(plain)
    assert {(c.op, c.group) for c in folded.collectives if c.axis != "cp"} == \
        {(c.op, c.group) for c in plain.collectives}
    ddp = _cost("megatron", "megatron", cp=2, zero=0)  # no distributed optimizer: DDP over data x CP
    assert [(c.op, c.axis, c.group) for c in ddp.collectives if c.op == "all-reduce"] == [("all-reduce", "data", 2)]


@pytest.mark.parametrize("framework, flags, says", [
    ("torchtitan", ["--cp", "2", "--zero", "0", "--hardware", "h100-sxm"], "error: --framework torchtitan shards its "
     "data axis (--fsdp 1 x --cp 2) with FSDP whenever it has shards: give --zero 3 (DDP runs over --dp replicas "
     "alone)"),
    ("torchtitan", ["--fsdp", "8", "--zero", "0", "--hardware", "h100-sxm"], "error: --framework torchtitan shards "
     "its data axis (--fsdp 8) with FSDP whenever it has shards: give --zero 3 (DDP runs over --dp replicas alone)"),
    ("torchtitan", ["--cp", "2", "--zero", "1", "--hardware", "h100-sxm"], "error: --framework torchtitan shards the "
     "data axis (--fsdp 1 x --cp 2) with ZeRO 3 only, not --zero 1 (give --zero 3)"),
    ("torchtitan", ["--cp", "2", "--cp-kind", "a2a", "--hardware", "h100-sxm"], "error: --framework torchtitan runs "
     "context parallelism as --cp-kind allgather|alltoall, not a2a"),
    ("megatron", ["--cp", "2", "--zero", "3", "--hardware", "h100-sxm"], "error: --framework megatron shards the data axis (--fsdp 1 x --cp 2) with ZeRO 1 "
     "only, not --zero 3 (give --zero 1, or --zero 0 for DDP)"),
    ("torchtitan", ["--cp", "2", "--fsdp", "4", "--hardware", "h100-sxm", "--placement", "tp,data,cp,pp"], "error: --framework torchtitan "
     "shards and reduces over the data and CP ranks as one group, modelled with CP directly inside the data axis (its "
     "default mesh), not --placement tp,data,cp,pp"),
])
def test_what_the_folded_frameworks_refuse_is_one_line(framework, flags, says):
    out = subprocess.run([sys.executable, "-m", "costmodel", "step", "--model", "llama3-8b", "--tokens", "8192",
                          "--framework", framework, *flags], capture_output=True, text=True)
    assert out.returncode == 2 and out.stderr.strip() == says


def test_solve_fsdp_answers_one_where_the_cp_ranks_already_shard_enough():
    """torchtitan at --cp 4 shards the state 4 ways with --fsdp 1: if that fits, N_FSDP = 1 (the search tries N = 1
    first), and the line says each device holds 1/(N x 4)."""
    from costmodel.solve.fsdp import memory_at, solve_fsdp

    frame, recipe = FRAMEWORKS["torchtitan"], load_recipe("fsdp2")
    layout = Layout(tokens=8192, cp=4, fsdp=2)
    limit = H100.hbm.usable_bytes
    assert memory_at(LLAMA, recipe, layout, 1, frame) < limit
    assert solve_fsdp(LLAMA, recipe, layout, limit, frame).n_fsdp == 1
    tight = memory_at(LLAMA, recipe, layout, 1, frame) - 1  # N = 1 just over: the search goes on to N >= 2
    assert solve_fsdp(LLAMA, recipe, layout, tight, frame).n_fsdp >= 2
    out = subprocess.run([sys.executable, "-m", "costmodel", "solve", "fsdp", "--model", "llama3-8b", "--tokens", "8192",
                          "--framework", "torchtitan", "--cp", "4", "--hardware", "h100-sxm"], capture_output=True,
                         text=True)
    assert out.returncode == 0 and "N_FSDP = 1" in out.stdout and "1/(N x 4)" in " ".join(out.stdout.split())


def test_torchtitan_runs_torchs_ring_attention_by_default():
    """Left open, --cp-kind is the framework's own first kind (torchtitan: allgather, its default rotate method);
    without a framework, ring."""
    titan = _cost("torchtitan", "fsdp2", fsdp=4, cp=2)
    assert titan.point.cp_kind == "allgather"
    assert {c.op for c in titan.collectives if c.axis == "cp"} == {"all-gather", "send/recv"}
    exact = evaluate_layout(LLAMA, load_recipe("fsdp2"), Layout(tokens=8192, fsdp=4, cp=2))
    assert exact.point.cp_kind == "ring"


def test_ring_attentions_buffers_join_the_peak_of_a_stage_without_the_loss():
    """torch's ring attention's backward buffers (measured in tests/test_torch_distributed_llama.py) on the first of
    two pipeline stages, which computes no loss: 4 Q + 16 KV + 2 (Q + KV / 2 + r KV) bytes with Q = 8,192 local
    tokens x 32 heads x 128, KV = 2 Q (K, V repeated to the query heads), r = c + 1 all-gathered, min(c, 3) passed
    on; on the last stage the loss's larger transients come first and it adds nothing."""
    q = 8192 * 32 * 128
    for kind, rotated in (("allgather", 3), ("alltoall", 2)):
        cost = _cost("torchtitan", "fsdp2", pp=2, fsdp=2, cp=2, tokens=16384, cp_kind=kind)
        first, last = cost.stages[0], cost.stages[-1]
        assert first.overheads["ring_attention"] == 4 * q + 16 * 2 * q + 2 * (q + q + rotated * 2 * q)
        assert last.overheads["ring_attention"] == 0 < last.overheads["loss_upcast"]
    assert _cost("torchtitan", "fsdp2", fsdp=8).heaviest.overheads["ring_attention"] == 0  # no CP


def test_routed_experts_with_folded_cp_are_refused():
    with pytest.raises(CostModelError, match="how it shards routed experts over the data and CP ranks"):
        evaluate_layout(load_model("mixtral-8x7b"), load_recipe("fsdp2"), Layout(tokens=8192, fsdp=4, cp=2),
                        framework=FRAMEWORKS["torchtitan"])


def test_the_memory_table_says_the_shards():
    out = subprocess.run([sys.executable, "-m", "costmodel", "memory", "--model", "llama3-8b", "--tokens", "8192",
                          "--framework", "torchtitan", "--fsdp", "4", "--cp", "2"], capture_output=True, text=True)
    assert out.returncode == 0 and "ZeRO-3 over fsdp x cp = 8 shards" in " ".join(out.stdout.split())


@pytest.mark.slow
def test_plan_searches_cp_for_torchtitan_and_its_rows_reproduce():
    """The planner now searches CP under torchtitan, in placements with CP directly inside the data axis, and each
    such row is what memory and step give for its layout one at a time."""
    from costmodel.solve.plan import plan

    frame, recipe = FRAMEWORKS["torchtitan"], load_recipe("fsdp2")
    found = plan(LLAMA, recipe, H100, devices=16, global_tokens=2**20, seq=32768, framework=frame, top=10_000)
    with_cp = [p for p in found.best if p.layout["cp"] > 1]
    assert with_cp and all("cp,data" in p.layout["placement"] and p.layout["cp_kind"] in ("allgather", "alltoall")
                           for p in with_cp)
    for p in with_cp[:5]:
        cost = evaluate_layout(LLAMA, recipe, Layout(**p.layout), H100, framework=frame)
        assert p.memory_bytes == pytest.approx(cost.memory_bytes, rel=1e-9)
        assert p.step_s == pytest.approx(cost.step.step_s, rel=1e-9)
