"""Framework profiles (issue 10): each overhead term pinned to its source, the nanotron split and
models pinned to nanotron's code, the fitted constants and the README's figures pinned to the fit."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from costmodel.cost.evaluate import evaluate, evaluate_layout
from costmodel.cost.memory import FORWARD_BACKWARD, GRAD_SYNC, OPTIMIZER
from costmodel.cost.point import Point
from costmodel.cost.shape import Shape
from costmodel.errors import CostModelError
from costmodel.parallel.pipeline.stages import every_stage, stage_layers
from costmodel.specs.framework_catalog import FRAMEWORKS
from costmodel.specs.layout import Layout
from costmodel.specs.load import load_hardware, load_model, load_recipe

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT.parent / "shared" / "data" / "training-runs" / "ultrascale_playbook_1b_3b.csv"
NANOTRON = FRAMEWORKS["nanotron"]
MEGATRON = load_recipe("megatron")


# ---- nanotron's split and models, transcribed from its code -------------------------------------

def nanotron_split(layers, pp, layer_cost, output_cost):
    """huggingface/nanotron@67c5ebb6 src/nanotron/models/base.py L211-235, line by line: the blocks
    are embedding (0), L decoder layers, final norm (0), lm_head (V D), cast (0), loss (0)."""
    costs = [0] + [layer_cost] * layers + [0, output_cost, 0, 0]
    cumulative = np.cumsum(costs)
    thresholds = [cumulative[-1] * ((rank + 1) / pp) for rank in range(pp)]
    rank, placed = 0, []
    for cost, total in zip(costs, cumulative):
        placed.append(rank)
        if total > thresholds[rank]:
            rank += 1
    per_stage = [0] * pp
    for index in range(1, layers + 1):
        per_stage[placed[index]] += 1
    return per_stage, max(placed) + 1


@pytest.mark.parametrize("name", ["nanotron-1b", "nanotron-3b", "nanotron-8b", "nanotron-80b", "llama3-8b", "gpt2"])
def test_compute_split_is_nanotrons_walk(name):
    shape = Shape.of(load_model(name))
    c, c_o = shape.split_costs()
    for pp in range(1, min(shape.layers, 40) + 1):
        expected, used = nanotron_split(shape.layers, pp, c, c_o)
        if used < pp:  # nanotron leaves ranks without a block: cost4d refuses the layout
            with pytest.raises(Exception, match="without a layer"):
                evaluate(shape, MEGATRON, Point(pp=pp, microbatches=pp, split="compute"))
            continue
        assert [stage_layers(shape.layers, pp, r, "compute", (c, c_o)) for r in every_stage(pp)] == expected


@pytest.mark.parametrize("layers, pp, expected", [
    (126, 8, [15, 16, 16, 16, 16, 16, 16, 15]),  # Llama 3.1 405B: 128 slots of 16, the embedding's and the loss's
    (30, 4, [7, 8, 8, 7]),  # DGXC's 405B proxy (30 layers over PP 4: 32 slots)
    (126, 1, [126]),  # one stage holds the embedding, every layer and the loss
    (10, 4, [2, 3, 3, 2]),  # 12 slots of 3
    (11, 4, [3, 3, 3, 2]),  # 13 slots: the first takes the one more, as the even split does
])
def test_ends_split_counts_the_embedding_and_the_loss_as_a_layer(layers, pp, expected):
    """Megatron-core's account_for_embedding_in_pipeline_split / account_for_loss_in_pipeline_split
    (transformer_block.get_num_layers_to_build: L + 1 + 1 layers over the stages, one fewer built on the first
    and on the last); each stage starts where the ones before it end."""
    from costmodel.parallel.pipeline.stages import stage_start

    roles = every_stage(pp)
    assert [stage_layers(layers, pp, r, "ends") for r in roles] == expected
    if (layers, pp) == (126, 8):
        readme = " ".join((Path(__file__).resolve().parents[1] / "README.md").read_text().split())
        assert "its 126 layers run 16 a stage, 15 on the first and the last" in readme
    assert [stage_start(layers, pp, r, "ends") for r in roles] == [sum(expected[:i]) for i in range(pp)]


def test_ends_split_arrays_match_single_layouts():
    """The planner's arrays (first, second and last stage) see the ends split as single layouts do."""
    shape = Shape.of(load_model("llama3-8b"))
    pps = np.array([1, 2, 4, 8])
    arrays = evaluate(shape, MEGATRON, Point(pp=pps, microbatches=pps, split="ends", tokens=np.full(4, 4096)))
    for i, pp in enumerate(pps.tolist()):
        one = evaluate(shape, MEGATRON, Point(pp=pp, microbatches=pp, split="ends", tokens=4096))
        assert arrays.stages[0].stage.layers[i] == one.stages[0].stage.layers
        assert arrays.stages[-1].stage.layers[i] == one.stages[-1].stage.layers
        assert arrays.memory_bytes[i] == pytest.approx(one.memory_bytes, rel=1e-12)


def test_compute_split_arrays_match_single_layouts():
    """The planner's arrays see the first, second and last stage as single layouts do."""
    shape = Shape.of(load_model("nanotron-3b"))
    pps = np.array([1, 2, 4, 7, 8, 14, 16])
    point = Point(pp=pps, microbatches=pps, split="compute", tokens=np.full(len(pps), 4096))
    arrays = evaluate(shape, MEGATRON, point, framework=NANOTRON)
    for i, pp in enumerate(pps.tolist()):
        one = evaluate(shape, MEGATRON, Point(pp=pp, microbatches=pp, split="compute", tokens=4096), framework=NANOTRON)
        assert arrays.stages[0].stage.layers[i] == one.stages[0].stage.layers
        assert arrays.stages[-1].stage.layers[i] == one.stages[-1].stage.layers
        assert arrays.memory_bytes[i] == pytest.approx(one.memory_bytes, rel=1e-12)


def generator_params(layers, hidden, heads, intermediate, tied, vocab=131072):
    """nanotron@e24d2483 scripts/scaling_benchmarks.py L20-32 (its estimate, which leaves out the norms)."""
    qkv_params = 4 * hidden * hidden  # MHA: q, k, v, o (NUM_KEY_VALUE_HEADS None)
    embeddings = vocab * hidden if tied else 2 * vocab * hidden
    return embeddings + layers * (3 * hidden * intermediate + qkv_params)


@pytest.mark.parametrize("name, dims, total", [
    ("nanotron-1b", (16, 2048, 32, 8192, True), "1.34G"),
    ("nanotron-3b", (28, 3072, 32, 8192, True), "3.57G"),
    ("nanotron-8b", (32, 4096, 32, 14336, False), "8.86G"),
    ("nanotron-80b", (80, 8192, 64, 28672, False), "80.0G"),
])
def test_sweep_models_match_the_generator(name, dims, total):
    """Parameters = the generator's estimate + the (2L + 1) RMSNorm weights it leaves out; the
    sweep's run names give the rounded totals (e.g. '1.34G_dp8_tp1_...')."""
    layers, hidden = dims[0], dims[1]
    params = Shape.of(load_model(name)).total_params()
    assert params == generator_params(*dims) + (2 * layers + 1) * hidden
    assert f"{params / 1e9:.3g}G" == total.replace("80.0G", "80G")


# ---- each overhead term ----------------------------------------------------------------------

def cost_of(framework=NANOTRON, model="nanotron-1b", **layout):
    return evaluate_layout(load_model(model), MEGATRON, Layout(**layout), framework=framework)


def test_exact_profile_adds_nothing():
    exact = cost_of(FRAMEWORKS["exact"], fsdp=4, zero=1, tokens=4096)
    plain = evaluate_layout(load_model("nanotron-1b"), MEGATRON, Layout(fsdp=4, zero=1, tokens=4096))
    assert exact.memory_bytes == plain.memory_bytes == plain.heaviest.total_bytes


def test_ddp_buckets_only_when_ddp_replicates():
    """nanotron's trainer wraps DDP at ZeRO-0 with dp > 1 only: 2 P bf16 buckets."""
    ddp = cost_of(dp=8, tokens=4096).heaviest
    assert ddp.overheads["ddp_buckets"] == 2 * ddp.stage.params
    assert cost_of(fsdp=8, zero=1, tokens=4096).heaviest.overheads["ddp_buckets"] == 0
    assert cost_of(tokens=4096).heaviest.overheads["ddp_buckets"] == 0


def test_zero1_gather_is_reserved_through_the_next_forward():
    """2 P (1 + 1/N), allocated in the optimizer step; its segment stays reserved (peak_bytes vs reserved_bytes)."""
    top = cost_of(fsdp=8, zero=1, tokens=4096).heaviest
    gather = top.overheads["zero1_gather"]
    assert gather == 2 * top.stage.params * (1 + 1 / 8)
    assert top.phase_bytes(FORWARD_BACKWARD, fitted=False) + gather == pytest.approx(
        top.phase_bytes(FORWARD_BACKWARD) - top.overheads["activation_reserve"] - top.overheads["reserve"])
    assert top.phase_bytes(OPTIMIZER, fitted=False) == top.state_bytes + gather


def test_peak_is_the_larger_phase_not_the_sum():
    """No tokens: the optimizer step (state + gather buffers) peaks; many tokens: forward-backward."""
    idle = cost_of(fsdp=8, zero=1, tokens=0).heaviest
    busy = cost_of(fsdp=8, zero=1, tokens=8 * 4096).heaviest
    assert idle.peak_phase == OPTIMIZER and busy.peak_phase == FORWARD_BACKWARD
    assert idle.peak_bytes == idle.phase_bytes(OPTIMIZER, fitted=False) < idle.total_bytes + sum(idle.overheads.values())


def test_loss_upcast_only_where_the_loss_is():
    one = cost_of(tokens=4096, tp=2, sp=True).heaviest
    assert one.overheads["loss_upcast"] == 4096 * (2 + 4) * 131072 / 2
    piped = cost_of(tokens=4096, pp=2, microbatches=4)
    assert piped.stages[0].overheads["loss_upcast"] == 0 and piped.stages[-1].overheads["loss_upcast"] > 0


def test_sp_gather_buffer_is_one_full_sequence():
    top = cost_of(tokens=2 * 4096, tp=4, sp=True).heaviest
    assert top.overheads["sp_gather_buffer"] == 2 * 2 * 4096 * 2048



def test_pending_reduce_scatters_hold_every_row_parallel_output_without_a_pipeline():
    """nanotron-1b (16 sequential layers, D 2048) at pp 1: each layer's attention and MLP output, full
    width in bf16 before its reduce-scatter, 2 x 2 B x T x D per layer, all 16 layers' at once; none with a
    pipeline (each receive syncs the host), without TP or without SP (no reduce-scatter)."""
    tokens = 2 * 4096
    top = cost_of(tokens=tokens, tp=4, sp=True).heaviest
    assert top.overheads["pending_reduce_scatters"] == 16 * 2 * 2 * tokens * 2048
    assert "pending_reduce_scatters" not in cost_of(tokens=tokens, tp=4).heaviest.overheads  # no SP
    for layout in (dict(tp=1, sp=False), dict(tp=4, sp=True, pp=2, microbatches=4)):
        held = cost_of(tokens=tokens, **layout)
        assert all(s.overheads.get("pending_reduce_scatters", 0) == 0 for s in held.stages)


@pytest.mark.parametrize("layout, rows", [
    (dict(fsdp=8, zero=1), [("all-reduce", "fsdp", 4), ("all-gather", "fsdp", 2)]),  # whole fp32 buffer; bf16 params
    (dict(dp=8), [("all-reduce", "data", 4)]),  # DDP's hook reduces the fp32 accumulator's buckets
])
def test_nanotron_reduces_its_fp32_gradient_buffers(layout, rows):
    """accumulate_grad_in_fp32: the DDP hook (gradient_accumulator.py L322-382) and the ZeRO-1 sync
    (trainer.py L526-533, reduce_scatter=False: 'too memory hungry, instead we run all_reduce') reduce the
    fp32 buffers, 4 B per parameter; ZeRO-1 then all-gathers the updated bf16 parameters (zero.py L217-245).
    The exact profile keeps the recipe's bf16 reduce-scatter."""
    cost = cost_of(tokens=4096, **layout)
    params = cost.heaviest.stage.params
    assert [(c.op, c.axis, c.buffer_bytes) for c in cost.collectives] == [(op, axis, b * params) for op, axis, b in rows]
    exact = cost_of(FRAMEWORKS["exact"], tokens=4096, **layout)
    assert [c.op for c in exact.collectives][0] == ("reduce-scatter" if "fsdp" in layout else "all-reduce")
    assert exact.collectives[0].buffer_bytes == 2 * params


def test_torchtitan_reduce_scatters_in_its_reduce_dtype():
    """FSDP2 under torchtitan's MixedPrecisionPolicy(reduce_dtype=float32): each block's gradient
    reduce-scatter moves fp32, 4 B per parameter, where the recipe says bf16; its gathers stay bf16."""
    titan = FRAMEWORKS["torchtitan"]
    cost = cost_of(titan, fsdp=8, tokens=4096)
    exact = cost_of(FRAMEWORKS["exact"], fsdp=8, tokens=4096)
    for ours, plain in zip(cost.collectives, exact.collectives):
        assert ours.buffer_bytes == plain.buffer_bytes * (2 if ours.op == "reduce-scatter" else 1)


def test_pending_reduce_scatters_are_reserved_not_allocated():
    """Blocks the host freed but the GPU has not consumed count in the reserved peak, not in torch's allocated
    peak: no tensor holds them (cost.memory.RESERVED_ONLY); the memory JSON says so."""
    cost = cost_of(tokens=2 * 4096, tp=4, sp=True)
    top = cost.heaviest
    held = top.overheads["pending_reduce_scatters"]
    without = cost_of(NANOTRON.model_copy(update={"pending_reduce_scatters": False}), tokens=2 * 4096, tp=4,
                      sp=True).heaviest
    assert top.peak_bytes == without.peak_bytes and top.reserved_bytes == pytest.approx(without.reserved_bytes + held)
    out = subprocess.run([sys.executable, "-m", "costmodel", "memory", "--model", "nanotron-1b", "--framework", "nanotron",
                          "--tp", "4", "--sp", "--tokens", "8192", "--json"], capture_output=True, text=True, check=True)
    term = json.loads(out.stdout)["overheads"]["pending_reduce_scatters"]
    assert term == {"bytes": held, "phases": ["forward-backward"], "fitted": False, "reserved_only": True}


@pytest.mark.parametrize("flags, says", [
    (["--fsdp", "4", "--zero", "3"], "--framework nanotron shards the data axis with ZeRO 1 only, not --zero 3 (give --zero 1)"),
    (["--fsdp", "4", "--dp", "2", "--zero", "1"], "--framework nanotron shards over its one data-parallel group: "
     "no --dp 2 replicas of --fsdp 4 shards (give --fsdp 8 alone)"),
])
@pytest.mark.slow
def test_nanotron_runs_its_own_zero_only(flags, says):
    """nanotron shards with ZeRO-1 (ZeroDistributedOptimizer) over its one data-parallel group: other stages
    and replicas of shards are refused in one line; ZeRO-0 (DDP) over dp x fsdp runs."""
    base = [sys.executable, "-m", "costmodel", "memory", "--model", "llama3-8b", "--framework", "nanotron",
            "--tokens", "4096"]
    done = subprocess.run([*base, *flags], capture_output=True, text=True)
    assert done.returncode == 2 and done.stderr.strip().splitlines() == [f"error: {says}"]
    assert subprocess.run([*base, "--fsdp", "4", "--dp", "2", "--zero", "0"], capture_output=True).returncode == 0


@pytest.mark.slow
def test_megatron_reduces_its_fp32_buffer_and_comm_says_the_dtype():
    """Megatron-LM under bf16 reduces the fp32 gradient buffer (arguments.py, unless --grad-reduce-in-bf16): its
    distributed optimizer's reduce-scatter moves 4 B per parameter where the recipe alone says 2; `comm --json`
    names the dtype it priced."""
    mega = cost_of(FRAMEWORKS["megatron"], fsdp=8, zero=1, tokens=4096)
    exact = cost_of(FRAMEWORKS["exact"], fsdp=8, zero=1, tokens=4096)
    assert [c.buffer_bytes for c in mega.collectives] == [2 * exact.collectives[0].buffer_bytes,
                                                          exact.collectives[1].buffer_bytes]
    for framework, dtype in (("megatron", "fp32"), ("exact", "bf16")):
        out = subprocess.run([sys.executable, "-m", "costmodel", "comm", "--model", "nanotron-1b", "--hardware",
                              "h100-sxm", "--fsdp", "8", "--zero", "1", "--tokens", "4096", "--framework", framework,
                              "--json"], capture_output=True, text=True, check=True)
        assert json.loads(out.stdout)["gradient_dtype"] == dtype

# ---- the terms measured in PyTorch on CPU ----------------------------------------------------

@pytest.mark.slow
def test_loss_upcast_transient_measured():
    """nanotron's lm_head + cast_to_fp32 + _ShardedCrossEntropy at tp = 1 (functional.py L31-115,
    transcribed without the all-reduces, which are identities on one rank): the peak of live
    tensor bytes grows by (2 + 4 + 4) bytes per logit, the saved softmax (4) plus the transient (6)."""
    torch = pytest.importorskip("torch")
    from live_bytes import LiveBytes
    from costmodel.formulas.overheads import upcast_loss_bytes_per_token

    class ShardedCrossEntropy(torch.autograd.Function):
        @staticmethod
        def forward(ctx, sharded_logits, target):
            logits_max = torch.max(sharded_logits, dim=-1)[0]
            sharded_logits = sharded_logits - logits_max.unsqueeze(dim=-1)
            logits_2d = sharded_logits.view(-1, sharded_logits.shape[-1])
            arange_1d = torch.arange(start=0, end=logits_2d.shape[0])
            predicted_logits = logits_2d[arange_1d, target.view(-1)].clone().view_as(target)
            exp_logits = sharded_logits
            torch.exp(sharded_logits, out=exp_logits)
            sum_exp_logits = exp_logits.sum(dim=-1)
            loss = torch.log(sum_exp_logits) - predicted_logits
            exp_logits.div_(sum_exp_logits.unsqueeze(dim=-1))
            ctx.save_for_backward(exp_logits, target)
            return loss.view_as(target)

    def peak(vocab, tokens=64, hidden=32):
        x = torch.randn(tokens, hidden, dtype=torch.bfloat16, requires_grad=True)
        w = torch.randn(vocab, hidden, dtype=torch.bfloat16, requires_grad=True)
        target = torch.randint(0, vocab, (tokens,))
        with LiveBytes() as live:
            sharded_logits = x @ w.t()  # lm_head (bf16)
            loss = ShardedCrossEntropy.apply(sharded_logits.float(), target)  # cast_to_fp32, then the loss
            return live.peak, loss

    (small, _), (large, _) = peak(1024), peak(2048)
    per_logit_token = (large - small) / (64 * 1024)
    assert per_logit_token == 4 + upcast_loss_bytes_per_token(vocab=1, tp=1, logit_bytes=2)


def test_in_place_loss_transient_measured():
    """Megatron's _VocabParallelCrossEntropy at tp = 1 (cross_entropy.py L25-77: .float(), then the max
    subtracted, exp and the division in place): 2 + 4 bytes per logit at the peak, the fp32 copy being
    the saved softmax, so the transient beyond it is the low-precision logits alone."""
    torch = pytest.importorskip("torch")
    from live_bytes import LiveBytes
    from costmodel.formulas.overheads import upcast_loss_bytes_per_token

    class VocabParallelCrossEntropy(torch.autograd.Function):
        @staticmethod
        def forward(ctx, vocab_parallel_logits, target):
            vocab_parallel_logits = vocab_parallel_logits.float()
            logits_max = torch.max(vocab_parallel_logits, dim=-1)[0]
            vocab_parallel_logits -= logits_max.unsqueeze(dim=-1)
            logits_2d = vocab_parallel_logits.view(-1, vocab_parallel_logits.size(-1))
            predicted = logits_2d[torch.arange(logits_2d.size(0)), target.view(-1)].clone()
            exp_logits = vocab_parallel_logits
            torch.exp(vocab_parallel_logits, out=exp_logits)
            sum_exp_logits = exp_logits.sum(dim=-1)
            loss = torch.log(sum_exp_logits) - predicted.view_as(sum_exp_logits)
            exp_logits.div_(sum_exp_logits.unsqueeze(dim=-1))
            ctx.save_for_backward(exp_logits, target)
            return loss

    def peak(vocab, tokens=64, hidden=32):
        x = torch.randn(tokens, hidden, dtype=torch.bfloat16, requires_grad=True)
        w = torch.randn(vocab, hidden, dtype=torch.bfloat16, requires_grad=True)
        target = torch.randint(0, vocab, (tokens,))
        with LiveBytes() as live:
            logits = x @ w.t()
            loss = VocabParallelCrossEntropy.apply(logits, target)
            return live.peak, loss

    (small, _), (large, _) = peak(1024), peak(2048)
    assert (large - small) / (64 * 1024) == 4 + upcast_loss_bytes_per_token(vocab=1, tp=1, logit_bytes=2,
                                                                            in_place=True)


def test_profile_terms():
    """Which terms each profile adds, and their sizes from the sources' formulas."""
    spec = load_model("llama3-8b")
    d, dh, f, v = 4096, 128, 14336, 128256
    block = 32 * d * dh * 2 + 8 * dh * d * 2 + 3 * d * f + 2 * d  # q, o; k, v; MLP; two norms
    titan = evaluate_layout(spec, load_recipe("cs336"), Layout(fsdp=8, tokens=8192),
                            framework=FRAMEWORKS["torchtitan"]).heaviest.overheads
    assert titan["fsdp_in_flight"] == (3 * 2 + 4) * block + 2 * v * d
    assert "ddp_buckets" not in titan and titan["loss_upcast"] == 8192 * 6 * v
    mega = evaluate_layout(spec, MEGATRON, Layout(fsdp=8, zero=1, tp=2, sp=True, tokens=8192),
                           framework=FRAMEWORKS["megatron"]).heaviest.overheads
    assert mega["loss_upcast"] == 8192 * 2 * v / 2
    assert mega["wgrad_cache"] == 2 * ((2 * 32 * dh * d + 2 * 8 * dh * d + 3 * f * d) // 2 + v // 2 * d)
    assert mega["sp_gather_buffer"] == 2 * 8192 * d and "zero1_gather" not in mega


def test_deepspeed_terms():
    """DeepSpeed ZeRO (microsoft/DeepSpeed@38327e07 runtime/zero/), Llama 3 8B by hand: the 5e8-element 16-bit
    gradient bucket (stages 1-2: in backward only, released before the step; stage 3: kept, plus the
    reduce-scatter's copy in backward); the output layer's whole gradient as backward makes it (stages 2-3);
    the step's copies, max((2 + 4) E, 8 min(E, largest parameter)) with E the partition (a sub-group of at
    most 1e9 elements plus one parameter at stage 3); ZeRO-3's gathered output layer plus the 5e7 prefetch
    overshooting by one MLP matmul, capped by 1e9 live; nothing without data shards."""
    spec, zero = load_model("llama3-8b"), load_recipe("zero")
    d, f, v = 4096, 14336, 128256
    ds = FRAMEWORKS["deepspeed"]

    def terms(framework=ds, **layout):
        layout.setdefault("tokens", 8192)
        top = evaluate_layout(spec, zero, Layout(**layout), framework=framework).heaviest
        return top, {k: val for k, val in top.overheads.items() if k.startswith("zero")}

    held = 1_090_519_040  # the busiest rank's buffer at 8 shards: whole matrices (the test below)
    top, got = terms(fsdp=8, zero=1)
    p = top.stage.params
    buffer = 2 * (p / 8 + held - 8_029_995_008 / 8)  # P / N plus the whole matrices past it
    assert got == {"zero_grad_bucket": 2 * 500_000_000,  # made at every backward, kept until the reduction ends
                   "zero1_grad_buffer": 0, "zero1_sync_buffer": buffer,  # ZeRO-1 reduces after backward
                   "zero_step_grads": (2 + 4) * p / 8,
                   "zero1_freed_grads": buffer - 2 * p}  # the step holds the buffer, not the full gradient
    top, got = terms(fsdp=8, zero=2)
    assert got == {"zero_grad_bucket": 2 * 500_000_000, "zero_output_grad": 2 * v * d,
                   "zero2_partition_overhang": 2 * (held - 8_029_995_008 / 8), "zero2_accumulation_buffer": 0,
                   "zero_step_grads": (2 + 4) * top.stage.params / 8}
    top, got = terms(fsdp=8, zero=3)
    assert top.stage.params / 8 < 1_000_000_000 + v * d  # 8B / 8: one sub-group holds the whole partition
    assert got == {"zero3_grad_bucket": 2 * 500_000_000, "zero3_bucket_copy": 2 * 500_000_000,
                   "zero_output_grad": 2 * v * d, "zero_step_grads": (2 + 4) * top.stage.params / 8,
                   "zero3_live_params": 2 * (v * d + 50_000_000 + d * f)}
    _, got = terms(framework=ds.model_copy(update={"sub_group_size": 100_000_000}), fsdp=8, zero=3)
    sub_group = 100_000_000 + v * d  # it closes one parameter past the size; the fp64 norm slice then peaks
    assert got["zero_step_grads"] == max((2 + 4) * sub_group, 8 * v * d) == 8 * v * d
    _, got = terms(framework=ds.model_copy(update={"max_live_parameters": 600_000_000}), fsdp=8, zero=3)
    assert got["zero3_live_params"] == 2 * 600_000_000  # the output layer kept, the prefetch capped
    _, got = terms(fsdp=64, zero=2)  # a partition smaller than the output layer: the fp64 norm slice peaks
    assert got["zero_step_grads"] == 8 * (8030261248 / 64)
    _, got = terms(framework=ds.model_copy(update={"overlap_comm": True, "reduce_bucket_size": 200_000_000}),
                   fsdp=8, zero=2)
    assert got["zero_grad_bucket"] == 2 * 2 * 200_000_000
    _, hooked = terms(framework=ds.model_copy(update={"overlap_comm": True}), fsdp=8, zero=1)  # hooks in backward
    assert hooked["zero_grad_bucket"] == 2 * 2 * 500_000_000
    assert (hooked["zero1_grad_buffer"], hooked["zero1_sync_buffer"]) == (buffer, 0)
    _, piped = terms(framework=ds.model_copy(update={"overlap_comm": True}), fsdp=4, zero=1, pp=2, microbatches=2)
    assert piped["zero_grad_bucket"] == 2 * 500_000_000 and piped["zero1_sync_buffer"] > 0  # off under pipelines
    assert set(terms(dp=8)[1].values()) == {0} and terms(fsdp=8, zero=0)[1] == {}  # replicas run no ZeRO
    top, _ = terms(fsdp=8, zero=1)  # the step's copies in the step only; the bucket and buffer after backward
    assert top.phase_bytes(OPTIMIZER, fitted=False) == (top.state_bytes + top.overheads["zero_step_grads"]
                                                         + top.overheads["zero1_freed_grads"])
    assert top.phase_bytes(GRAD_SYNC, fitted=False) == top.state_bytes + 2 * 500_000_000 + buffer
    assert top.phase_bytes(GRAD_SYNC) - top.phase_bytes(GRAD_SYNC, fitted=False) == top.overheads["reserve"]
    small, _ = terms(fsdp=8, zero=1, tokens=128)  # little activation: the sync after backward peaks
    assert small.peak_phase == GRAD_SYNC
    grads = top.components["grads"]  # ZeRO-1: the whole 16-bit gradient in backward, the rank's buffer in the step
    assert grads == 2 * top.stage.params and grads + top.overheads["zero1_freed_grads"] == 2 * (
        top.stage.params / 8 + held - 8_029_995_008 / 8)
    with pytest.raises(CostModelError, match="runs ZeRO stage 1 at most"):  # deepspeed/runtime/pipe/engine.py L77-78
        terms(fsdp=4, zero=2, pp=2, microbatches=2)
    with pytest.raises(CostModelError, match="runs --schedule 1f1b, not interleaved"):  # pipe/schedule.py
        terms(fsdp=4, zero=1, pp=2, microbatches=4, schedule="interleaved", chunks=2)
    terms(pp=2, microbatches=2)  # no shards: no ZeRO optimizer, nothing refused
    with pytest.raises(CostModelError, match="shards over the whole data axis"):  # no hybrid below ZeRO-3
        terms(dp=2, fsdp=4, zero=1)
    terms(dp=2, fsdp=4, zero=3)  # ZeRO++'s hpZ shards within replicas at stage 3
    moe = evaluate_layout(load_model("mixtral-8x7b"), zero, Layout(fsdp=8, ep=8, zero=1, tokens=4096),
                          framework=ds).heaviest  # the experts' state sharded over fsdp / ep = 1: whole on each
    assert moe.overheads["zero_step_grads"] == (2 + 4) * ((moe.stage.params - moe.stage.expert_params) / 8
                                                          + moe.stage.expert_params)


def test_deepspeed_accumulation_keeps_a_second_gradient_buffer():
    """Under gradient accumulation ZeRO-2 holds two partition buffers in backward (stage_1_and_2.py: the first
    micro-step's averaged_gradients view its grads_in_partition, released at L802 and allocated anew at L1344-1352
    for the next): b_g (P / N + the whole matrices past it), from the second micro-step on. ZeRO-1 reduces once,
    at the boundary (engine.py L2055-2059): accumulation adds nothing, as a pipeline's micro-batches add nothing;
    ZeRO-3 accumulates in its partition."""
    spec, zero = load_model("llama3-8b"), load_recipe("zero")
    ds = FRAMEWORKS["deepspeed"]

    def top(**layout):
        layout.setdefault("tokens", 8192)
        return evaluate_layout(spec, zero, Layout(**layout), framework=ds).heaviest

    one, four = top(fsdp=8, zero=2), top(fsdp=8, zero=2, grad_accum=4)
    buffer = 2 * (four.stage.params / 8 + 1_090_519_040 - 8_029_995_008 / 8)
    assert four.overheads["zero2_accumulation_buffer"] == buffer and one.overheads["zero2_accumulation_buffer"] == 0
    assert four.peak_bytes - one.peak_bytes == buffer  # in backward, the phase that peaks
    assert top(fsdp=8, zero=1, grad_accum=4).peak_bytes == top(fsdp=8, zero=1).peak_bytes
    assert top(fsdp=4, zero=1, pp=2, microbatches=4).overheads["zero1_grad_buffer"] == 0
    assert not any(k.endswith("accumulation_buffer") for k in top(fsdp=8, zero=3, grad_accum=4).overheads)
    assert top(dp=8, grad_accum=4).overheads.get("zero2_accumulation_buffer", 0) == 0  # replicas run no ZeRO


@pytest.mark.slow
def test_plan_keeps_to_what_deepspeed_runs():
    """plan --framework deepspeed searches ZeRO 1-3, pipelines only with ZeRO-0/1 over shards and 1F1B, as its pipeline
    engine runs them (pipe/engine.py L77-78, pipe/schedule.py TrainSchedule), and replicas of shards only at ZeRO-3
    (hpZ); a row it prints runs."""
    from costmodel.api import plan

    rows = plan("llama3-70b", "h100-sxm", gpus=128, global_batch=1048576, seq=8192, framework="deepspeed",
                top=100_000)  # every feasible row: ZeRO-2's exposed per-micro-batch reductions rank it low
    rows = rows.to_dict("records") if hasattr(rows, "to_dict") else rows
    assert {row["zero"] for row in rows} == {1, 2, 3}
    piped = [row for row in rows if row["pp"] > 1]
    assert piped and all(row["schedule"] == "1f1b" and (row["zero"] <= 1 or row["fsdp"] == 1) for row in piped)
    assert not [row for row in rows if row["dp"] > 1 and row["fsdp"] > 1 and row["zero"] < 3]  # no hybrid ZeRO-1/2
    layout = Layout(**{k: v for k, v in piped[0].items() if k in Layout.model_fields and v is not None})
    assert evaluate_layout(load_model("llama3-70b"), load_recipe("zero"), layout,
                           framework=FRAMEWORKS["deepspeed"]).memory_bytes > 0


def test_zero2_gradient_buffer_holds_whole_parameters():
    """DeepSpeed ZeRO-2's grads_in_partition (stage_1_and_2.py L1344-1352, L1607-1636): every parameter overlapping
    the rank's partition, whole. By brute force on a small list, and Llama 3 8B's busiest rank at 8 shards: the
    embedding (128256 x 4096) and the first layers' matrices up to 1,090,519,040 elements, 8.6% past P / N (a
    reviewer's independent count); 2.12x and 5.46x at 16 and 64 shards. Arrays of shard counts give the same."""
    from costmodel.parallel.data.partition import flat_matrices, held_elements, partition_overhang

    sizes = [7, 3, 12, 1, 5]  # one flat group of 28: partitions of 10, 10, 8
    assert held_elements(sizes, 3) == max(7 + 3, 12, 12 + 1 + 5) == 18
    for n in range(1, 30):
        part, ends = -(-28 // n), np.cumsum(sizes)
        brute = max(sum(z for z, e in zip(sizes, ends) if e - z < min((r + 1) * part, 28) and e > r * part)
                    for r in range(n) if r * part < 28)
        assert held_elements(sizes, n) == brute
    shape = Shape.of(load_model("llama3-8b"))
    flat = flat_matrices(shape, Point())
    assert held_elements(flat, 8) == 1_090_519_040
    assert [round(held_elements(flat, n) / (sum(flat) / n), 2) for n in (16, 64)] == [2.12, 5.46]
    assert "(5.46x P / N for Llama 3 8B on 64 shards)" in (ROOT / "README.md").read_text()
    ds = FRAMEWORKS["deepspeed"]
    top = evaluate_layout(load_model("llama3-8b"), load_recipe("zero"), Layout(fsdp=8, zero=2, tokens=8192),
                          framework=ds).heaviest
    assert top.overheads["zero2_partition_overhang"] == 2 * (1_090_519_040 - sum(flat) / 8)
    pairs = ((1, 8), (2, 8), (8, 64), (16, 16))
    arrays = partition_overhang(shape, Point(tp=np.array([t for t, _ in pairs]), fsdp=np.array([n for _, n in pairs]),
                                             tp_kv="replicate"))
    assert list(arrays) == [partition_overhang(shape, Point(tp=t, fsdp=n, tp_kv="replicate")) for t, n in pairs]


def test_foreach_adamw_temporary_measured():
    """torch.optim.AdamW(foreach=True) allocates one fp32 list the size of the parameters it steps."""
    torch = pytest.importorskip("torch")
    from live_bytes import LiveBytes
    from costmodel.formulas.overheads import foreach_optimizer_bytes

    params = [torch.randn(300, 70, requires_grad=True) for _ in range(3)] + [torch.randn(1000, requires_grad=True)]
    for p in params:
        p.grad = torch.randn_like(p)
    optimizer = torch.optim.AdamW(params, foreach=True)
    optimizer.step()  # the first step allocates m and v
    with LiveBytes() as live:
        optimizer.step()
    assert live.peak == foreach_optimizer_bytes(params=sum(p.numel() for p in params), state_bytes=4)


# ---- the fit: constants in the spec, the README's figures ---------------------------------------

def _fit_module():
    spec = importlib.util.spec_from_file_location("fit_memory_nanotron", ROOT / "benchmarks" / "fit_memory_nanotron.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
@pytest.mark.skipif(not RUNS.is_file(), reason="../shared/data is beside the checkout (CI links it)")
def test_fitted_constants_are_the_fit_and_the_readme_says_what_it_gives():
    fit = _fit_module()
    every = fit.runs(RUNS)
    sample = [x for x in every if x.ok and x.first is not None]
    a, r = fit.fit(sample)
    assert (NANOTRON.activation_factor, NANOTRON.reserve_bytes) == (a, r)
    assert (NANOTRON.error_low, NANOTRON.error_high) == fit.error_band(sample, a, r)
    readme = (ROOT / "README.md").read_text()
    assert f"The reserve ({a:.2f} x the saved activations + {r / 2**30:.2f} GiB)" in readme
    claim = re.search(r"median \|error\| of ([\d.]+)% in-sample over ([\d,]+) runs; leave-one-model-out "
                      r"([\d.]+)% \(1B\) and ([\d.]+)% \(3B\)", readme)
    assert claim, "README states the nanotron memory fit"
    inside, count, out_1b, out_3b = claim.groups()
    assert int(count.replace(",", "")) == len(sample)
    assert float(inside) == round(100 * fit.median_abs(fit.errors(sample, a, r)), 1)
    held = {}
    for model in ("1B", "3B"):
        ha, hr = fit.fit([x for x in sample if x.model != model])
        held[model] = round(100 * fit.median_abs(fit.errors([x for x in sample if x.model == model], ha, hr)), 1)
    assert (float(out_1b), float(out_3b)) == (held["1B"], held["3B"])
    table = fit.confusion(every, a, r, 85520809984, NANOTRON.outside_allocator_bytes)
    accuracy = re.search(r"fits/OOM accuracy ([\d.]+)%", readme)
    right = table["fits_ok"] + table["oom_crashed"]
    runnable = sum(v for k, v in table.items() if not k.startswith("refused"))
    assert float(accuracy.group(1)) == round(100 * right / runnable, 1)
    verdicts = fit.verdicts(every, a, r, *fit.error_band(sample, a, r), 85520809984, NANOTRON.outside_allocator_bytes)
    said = re.search(r'"fits" was right for (\d+) of (\d+) runs.*"does NOT fit" for (\d+) of (\d+)', " ".join(readme.split()))
    assert said, "README states the verdicts"
    assert [int(x) for x in said.groups()] == [
        verdicts["fits_ok"], verdicts["fits_ok"] + verdicts["fits_crashed"],
        verdicts["oom_crashed"], verdicts["oom_crashed"] + verdicts.get("oom_ok", 0)]


def test_memory_json_has_the_framework_fields():
    out = subprocess.run([sys.executable, "-m", "costmodel", "memory", "--model", "nanotron-1b", "--framework", "nanotron",
                          "--fsdp", "8", "--zero", "1", "--tokens", "4096", "--hardware", "h100-sxm", "--json"],
                         capture_output=True, text=True, check=True)
    data = json.loads(out.stdout)
    assert data["framework"] == "nanotron" and data["recipe"] == "megatron" and data["layout"]["split"] == "compute"
    assert data["peak_phase"] in (FORWARD_BACKWARD, OPTIMIZER)
    assert data["reserved_bytes"] >= data["peak_bytes"] >= data["total_bytes"] - data["components"]["activations"]
    assert set(data["overheads"]) >= {"zero1_gather", "activation_reserve", "reserve"}
    assert abs(data["fits"]["needed_bytes"] - data["reserved_bytes"] - data["outside_allocator_bytes"]) <= 1  # whole bytes
    assert data["reserved_bytes_low"] < data["reserved_bytes"] < data["reserved_bytes_high"]
    assert data["fits"]["verdict"] == "fits"


def test_solve_fsdp_with_a_framework_is_the_smallest_n_that_fits():
    """The bisection's N fits by the same need `memory --framework` prints, and N - 1 does not."""
    from costmodel.solve.fsdp import solve_fsdp

    model = load_model("llama3-70b")
    layout = Layout(fsdp=2, zero=1, tokens=4096, tp=8, pp=4, microbatches=8, sp=True, recompute="full")  # ZeRO-1
    limit = 24 * 2**30
    answer = solve_fsdp(model, MEGATRON, layout, limit, NANOTRON)

    def need(n):
        cost = evaluate_layout(model, MEGATRON, layout.model_copy(update={"fsdp": n}), framework=NANOTRON)
        return cost.memory_bytes + NANOTRON.outside_allocator_bytes

    assert answer.searched and answer.n_fsdp > 2
    assert need(answer.n_fsdp) < limit <= need(answer.n_fsdp - 1)


def test_solve_fsdp_with_a_framework_answers_one_where_no_sharding_is_needed():
    """Where the unsharded layout fits, the fewest shards is 1, not the search's first N of 2."""
    from costmodel.solve.fsdp import solve_fsdp

    model = load_model("llama3-70b")
    layout = Layout(fsdp=2, zero=1, tokens=4096, tp=8, pp=4, microbatches=8, sp=True, recompute="full")
    one = evaluate_layout(model, MEGATRON, layout.model_copy(update={"fsdp": 1}), framework=NANOTRON).memory_bytes \
        + NANOTRON.outside_allocator_bytes
    assert solve_fsdp(model, MEGATRON, layout, one * 1.01, NANOTRON).n_fsdp == 1
    assert solve_fsdp(model, MEGATRON, layout, one * 0.99, NANOTRON).n_fsdp > 1


@pytest.mark.parametrize("dp, tokens, limit_gb", [(1, 4096, 85.52), (1, 512, 85.52), (1, 512, 300), (4, 4096, 214.7),
                                                   (4, 4096, 166.4)])
def test_solve_fsdp_with_a_framework_and_experts_searches_the_admissible_n(dp, tokens, limit_gb):
    """With --ep 8 the searched N is one the expert axis admits (8 | dp N, and 8 | N or N | 8): with dp 1 the
    multiples of 8, with dp 4 also 2 and 4. The answer is the smallest admissible N that fits: the one
    before it does not (or it is the first)."""
    from costmodel.solve.fsdp import admissible, memory_at, solve_fsdp

    model, layout, limit = load_model("mixtral-8x7b"), Layout(dp=dp, fsdp=8, ep=8, tokens=tokens), limit_gb * 1e9
    count, shards = admissible(model, layout, 64)
    listed = [shards(i) for i in range(count)]
    assert listed == ([8, 16, 24, 32, 40, 48, 56, 64] if dp == 1 else [2, 4, 8, 16, 24, 32, 40, 48, 56, 64])
    deepspeed = FRAMEWORKS["deepspeed"]  # ZeRO-3 over replicas (nanotron runs ZeRO-1 over one group only)
    answer = solve_fsdp(model, MEGATRON, layout, limit, deepspeed)
    assert answer.searched and answer.n_fsdp in listed
    assert memory_at(model, MEGATRON, layout, answer.n_fsdp, deepspeed) < limit
    before = listed.index(answer.n_fsdp) - 1
    assert before < 0 or memory_at(model, MEGATRON, layout, listed[before], deepspeed) >= limit
    assert answer.threshold == (listed[before] if before >= 0 else 1.0)


# ---- KV heads replicated under wide TP ---------------------------------------------------------

def test_replicated_kv_heads_per_rank():
    """llama3-8b (k = 8, d_h = 128) at t = 16: each rank keeps one KV head, K and V of 128 x 4096 each."""
    spec = load_model("llama3-8b")
    shape = Shape.of(spec)
    with pytest.raises(Exception, match="does not divide the KV heads"):
        evaluate_layout(spec, MEGATRON, Layout(tp=16, sp=True, tokens=8192))
    cost = evaluate_layout(spec, MEGATRON, Layout(tp=16, sp=True, tokens=8192, tp_kv="replicate"))
    d, dh, layers = 4096, 128, 32
    q_o = 2 * d * 32 * dh // 16
    mlp = 3 * d * 14336 // 16
    per_layer = q_o + 2 * dh * d + mlp + 2 * d  # one KV head's K and V, the two norms whole
    ends = 2 * (128256 // 16) * d + d  # vocabulary-parallel embedding and output, final norm
    assert cost.heaviest.stage.params == layers * per_layer + ends
    split = evaluate_layout(spec, MEGATRON, Layout(tp=8, sp=True, tokens=8192, tp_kv="replicate"))
    assert split.heaviest.stage.params == evaluate_layout(spec, MEGATRON, Layout(tp=8, sp=True, tokens=8192)).heaviest.stage.params
    assert cost.params == shape.total_params()  # the model is the model: copies are per rank only
    rows = [c for c in cost.collectives if "replicated K, V" in c.purpose]
    assert len(rows) == 1 and rows[0].group == 2 and rows[0].calls == layers
    assert rows[0].buffer_bytes == 2 * 2 * dh * d  # bf16 gradients of one head's K and V


def test_replicated_kv_heads_refuse_what_neither_divides():
    """48 query heads, 12 KV heads, t = 16: t divides the query heads but neither divides nor is a
    multiple of the KV heads, so no rank can hold whole heads."""
    spec = load_model("nanotron-3b").model_copy(update={"heads": 48, "kv_heads": 12, "hidden": 3072})
    with pytest.raises(Exception, match="divide or be a multiple"):
        evaluate_layout(spec, MEGATRON, Layout(tp=16, tokens=8192, tp_kv="replicate"))


def test_replicated_kv_gradients_sum_inside_the_node():
    """t = 16 over 2 nodes of 8 H100s, 8 KV heads: each head's 2 copies sit on adjacent TP ranks, so their
    gradient all-reduce is a 2-GPU NCCL all-reduce inside one node, not a 16-rank one across nodes."""
    from costmodel.cost.nccl import choice

    spec, h100 = load_model("llama3-8b"), load_hardware("h100-sxm")
    cost = evaluate_layout(spec, MEGATRON, Layout(tp=16, sp=True, tokens=8192, tp_kv="replicate"), h100)
    row = next(r for r in cost.collectives if "replicated K, V" in r.collective.purpose)
    assert (row.placement.domains, row.placement.per_domain, row.level) == (1, 2, "nvlink")
    one_call = max(choice("hgx-h100", "all-reduce", row.collective.buffer_bytes, 1, 2)[2], h100.nccl.launch_s)
    assert row.seconds == pytest.approx(row.collective.calls * one_call, rel=1e-12)


def test_a_profile_file_named_in_capitals_is_a_file(tmp_path, monkeypatch):
    """--framework Mine.JSON in the working folder is a file (read as JSON), not an unknown profile's name."""
    from costmodel.specs.load import load_framework

    monkeypatch.chdir(tmp_path)
    (tmp_path / "Mine.JSON").write_text(json.dumps({"name": "mine", "zero_buffers": True, "reduce_bucket_size": 1}))
    assert load_framework("Mine.JSON").reduce_bucket_size == 1


@pytest.mark.parametrize("written, read", [("5e8", 500_000_000), ("500000000", 500_000_000), ("5.5", None),
                                           ('"5e8"', None), ("true", None)])
def test_element_counts_take_deepspeeds_float_notation(tmp_path, written, read):
    """DeepSpeed's configs write reduce_bucket_size = 5e8 (a float to JSON and TOML): a float without a
    fraction is that whole number; a fraction, a string or a boolean is refused."""
    from costmodel.errors import CostModelError
    from costmodel.specs.load import load_framework

    path = tmp_path / "mine.json"
    path.write_text(f'{{"name": "mine", "zero_buffers": true, "reduce_bucket_size": {written}}}')
    if read is None:
        with pytest.raises(CostModelError, match="reduce_bucket_size"):
            load_framework(str(path))
    else:
        assert load_framework(str(path)).reduce_bucket_size == read


@pytest.mark.parametrize("file, content", [("exact.json", {"zero_buffers": True}),
                                           ("mine.json", {"name": "exact", "zero_buffers": True})])
def test_a_profile_file_named_exact_is_refused(tmp_path, file, content):
    """A file whose profile is named 'exact' (by its name field or its stem) would be taken for the exact
    accounting and its terms dropped without a word: it is refused in one line."""
    from costmodel.errors import CostModelError
    from costmodel.specs.load import load_framework

    path = tmp_path / file
    path.write_text(json.dumps(content))
    with pytest.raises(CostModelError, match="may not be named 'exact'"):
        load_framework(str(path))


@pytest.mark.parametrize("axes", [dict(ep=8), dict(ep=8, dp=4), dict(ep=8, tp=2, sp=True, etp=1),
                                  dict(ep=4, tp=2, sp=True, etp=1, dp=3), dict(ep=2, dp=3)])
def test_admissible_shard_counts_are_those_the_expert_rules_accept(axes):
    """solve.fsdp.admissible lists, up to 100, exactly the N for which parallel.expert's rules hold (checked N
    by N), including above 2 e where it repeats the rules' period instead of asking them."""
    from dataclasses import replace

    from costmodel.cost.point import Point
    from costmodel.cost.shape import Shape
    from costmodel.parallel import expert
    from costmodel.solve.fsdp import admissible

    model = load_model("mixtral-8x7b")
    layout = Layout(**{"fsdp": axes["ep"], **axes})
    count, at = admissible(model, layout, 100)
    point, shape = Point.of(layout), Shape.of(model)
    assert [at(i) for i in range(count)] == [
        n for n in range(2, 101) if all(rule.ok for rule in expert.checks(shape, replace(point, fsdp=n)))]


def test_reserved_and_allocated_peaks_name_their_own_phase():
    """With little activation a ZeRO-1 run allocates most in the gradient sync, while the fitted reserve on the
    activations can make forward-backward the reserved peak: each peak names its own phase."""
    spec, zero = load_model("llama3-8b"), load_recipe("zero")
    for tokens in (128, 384, 8192):
        top = evaluate_layout(spec, zero, Layout(fsdp=8, zero=1, tokens=tokens, seq=tokens),
                              framework=FRAMEWORKS["deepspeed"]).heaviest
        assert top.phase_bytes(top.peak_phase, fitted=False) == top.peak_bytes
        assert top.phase_bytes(top.reserved_phase) == top.reserved_bytes


def test_solve_fsdp_says_the_layout_it_solved_for():
    """solve fsdp names the layout N is solved for (ZeRO stage, the other axes, accumulation, tokens), text and JSON."""
    import json

    from hostile import run

    args = ["solve", "fsdp", "--model", "llama3-8b", "--limit", "80GB", "--tp", "2", "--sp", "--tokens", "8192",
            "--framework", "deepspeed", "--zero", "2", "--grad-accum", "4"]
    text = run(args)
    assert text.code == 0 and text.stdout.startswith(
        "Layout: N_FSDP shards at ZeRO-2, tp=2, sp, 4 accumulation steps; 8,192 tokens per micro-batch")
    layout = json.loads(run(args + ["--json"]).stdout)["layout"]
    assert (layout["zero"], layout["tp"], layout["grad_accum"], layout["tokens"]) == (2, 2, 4, 8192)
    assert "fsdp" not in layout


def test_held_elements_checks_only_ranks_that_start_a_parameter():
    """held_elements looks only at the ranks whose partition holds a parameter's start (a rank inside one parameter
    holds no more than the rank holding its start): equal to every rank's count, on random flat groups."""
    import bisect
    import random

    from costmodel.parallel.data.partition import held_elements

    def every_rank(sizes, n):
        ends = np.cumsum(sizes).tolist()
        starts = [e - z for e, z in zip(ends, sizes)]
        part = -(-ends[-1] // n)
        return max(ends[bisect.bisect_left(starts, min((r + 1) * part, ends[-1])) - 1]
                   - starts[bisect.bisect_right(ends, r * part)] for r in range(n) if r * part < ends[-1])

    rng = random.Random(7)
    for _ in range(300):
        sizes = [rng.choice([1, 3, 64, 1000, 4096]) * rng.randint(1, 9) for _ in range(rng.randint(1, 40))]
        n = rng.randint(1, 3 * len(sizes) + 50)
        assert held_elements(sizes, n) == every_rank(sizes, n), (sizes, n)


@pytest.mark.parametrize("shards", [{"dp": 4}, {"fsdp": 4, "zero": 1}])
def test_nanotron_runs_its_two_pipeline_engines_only(shards):
    """nanotron's pp_engine is afab (all forward, all backward: GPipe) or 1f1b (config/utils_config.py L95-107):
    interleaved stages are refused in one line with or without ZeRO shards, and plan never proposes them."""
    from costmodel.solve.plan import plan
    from costmodel.specs.load import load_hardware

    nanotron, model = FRAMEWORKS["nanotron"], load_model("nanotron-1b")
    recipe = load_recipe("megatron")
    for schedule in ("gpipe", "1f1b"):
        evaluate_layout(model, recipe, Layout(pp=2, microbatches=4, tokens=4096, schedule=schedule, **shards),
                        framework=nanotron)
    with pytest.raises(CostModelError, match=re.escape("runs --schedule gpipe|1f1b, not interleaved")):
        evaluate_layout(model, recipe, Layout(pp=2, microbatches=4, chunks=2, tokens=4096, schedule="interleaved",
                                              **shards), framework=nanotron)
    def schedules(framework):
        found = plan(load_model("nanotron-3b"), recipe, load_hardware("h100-sxm"), devices=128, global_tokens=2**20,
                     seq=4096, framework=framework, top=20).best
        return {p.layout.get("schedule") for p in found if p.layout.get("pp", 1) > 1}

    assert "interleaved" in schedules(nanotron.model_copy(update={"schedules": None}))  # it would rank them
    assert schedules(nanotron) and schedules(nanotron) <= {"gpipe", "1f1b"}


def test_megatron_runs_1f1b_and_interleaved_only():
    """Megatron-core's get_forward_backward_func picks pipelining without or with interleaving: a GPipe or
    zero-bubble schedule is refused in one line."""
    model, recipe = load_model("llama3-8b"), load_recipe("megatron")
    for schedule, chunks in (("1f1b", 1), ("interleaved", 2)):
        evaluate_layout(model, recipe, Layout(pp=2, microbatches=4, chunks=chunks, tokens=4096, schedule=schedule),
                        framework=FRAMEWORKS["megatron"])
    for schedule in ("gpipe", "zb-h1"):
        with pytest.raises(CostModelError, match=re.escape(f"runs --schedule 1f1b|interleaved, not {schedule}")):
            evaluate_layout(model, recipe, Layout(pp=2, microbatches=4, tokens=4096, schedule=schedule),
                            framework=FRAMEWORKS["megatron"])


def test_fsdp2_recipe_runs_the_module_in_bf16_under_fsdp_and_autocast_without():
    """torchtitan's recipe (fsdp2): under FSDP (ZeRO-3 over 8) the gathered bf16 module saves what a bf16 model
    saves (megatron's recipe: bf16 residual stream, one norm output per reader); without FSDP torchtitan runs
    torch.autocast (maybe_enable_amp), and the saved tensors are cs336's (fp32 residual stream, a cast per matmul).
    State is 16 B/param either way."""
    spec = load_model("llama3-8b")

    def saved(recipe, **layout):
        return evaluate_layout(spec, load_recipe(recipe), Layout(tokens=4096, **layout)).heaviest.stage.activation_bytes_per_token

    assert saved("fsdp2", fsdp=8) == saved("megatron", fsdp=8, zero=1) < saved("cs336", fsdp=8)
    assert saved("fsdp2") == saved("cs336") and saved("fsdp2", fsdp=8, zero=1) == saved("cs336", fsdp=8, zero=1)
    assert saved("fsdp2", cp=2) == saved("megatron", cp=2)  # torchtitan shards over the CP ranks too: bf16 module
    d = 4096  # per layer and token: fp32 inputs of both norms (2 x 2 B more), 2 more Q/K/V casts and 1 more gate/up
    # cast (3 x 2 B); the final norm's fp32 input (2 B more)
    assert saved("cs336", fsdp=8) - saved("fsdp2", fsdp=8) == 32 * (2 * 2 + 3 * 2) * d + 2 * d
    assert FRAMEWORKS["torchtitan"].recipe == "fsdp2"
    assert round(100 * (1 - saved("fsdp2", fsdp=8) / saved("cs336", fsdp=8))) == 18  # the README's "18% fewer"
    for layout in (dict(tp=2), dict(pp=2, microbatches=2)):  # no FSDP or CP: torchtitan trains in fp32, refused
        with pytest.raises(CostModelError, match="torchtitan trains in fp32 there"):
            saved("fsdp2", **layout)
    assert saved("fsdp2", tp=2, fsdp=4) == saved("megatron", tp=2, fsdp=4, zero=1)
    assert "matmul: 18% fewer saved bytes on Llama 3 8B" in " ".join((ROOT / "README.md").read_text().split())


def test_readme_op_recompute_figures():
    """The README's torchtitan --recompute op figures: Llama 3 8B, FSDP over 8 h100-sxm, 8,192 tokens a GPU."""
    spec, titan, hardware = load_model("llama3-8b"), FRAMEWORKS["torchtitan"], load_hardware("h100-sxm")
    runs = {r: evaluate_layout(spec, load_recipe("fsdp2"), Layout(fsdp=8, tokens=8192, recompute=r), hardware,
                               framework=titan) for r in ("none", "op", "full")}
    kept = {r: f"{c.heaviest.activation_bytes / 1e9:.1f}" for r, c in runs.items()}
    longer = {r: f"{100 * (runs[r].step.step_s / runs['none'].step.step_s - 1):.1f}%" for r in ("op", "full")}
    text = " ".join((ROOT / "README.md").read_text().split())
    assert (f"it keeps {kept['op']} GB of activations where none keeps {kept['none']} and full {kept['full']} (the fp32 "
            f"logits included), and the step takes {longer['op']} longer than without recomputation (full: "
            f"{longer['full']})") in text
    none = runs["none"].step
    assert (f"(`fsdp_copy_s`; here {1e3 * none.fsdp_copy_s:.1f} ms, {none.fsdp_copy_s / none.step_s:.1%} of the step)"
            in text)


@pytest.mark.parametrize("framework, flags, says", [
    ("megatron", ["--fsdp", "8", "--zero", "1", "--recompute", "op"],
     "--framework megatron recomputes with --recompute none|selective|full, not op (torchtitan's per-op policy)"),
    ("nanotron", ["--recompute", "selective"],
     "--framework nanotron recomputes with --recompute none|full, not selective (Megatron's: the attention core)"),
    ("deepspeed", ["--fsdp", "8", "--zero", "3", "--recompute", "op"],
     "--framework deepspeed recomputes with --recompute none|selective|full|every:K, not op (torchtitan's per-op "
     "policy)"),
])
def test_frameworks_refuse_recompute_modes_they_do_not_run(framework, flags, says):
    """Megatron's --recompute-granularity is full or selective; nanotron's recompute_layer reruns whole layers;
    torchtitan's op policy is torchtitan's alone: one line each, exit 2."""
    out = subprocess.run([sys.executable, "-m", "costmodel", "memory", "--model", "llama3-8b", "--tokens", "4096",
                          "--framework", framework, *flags], capture_output=True, text=True)
    assert out.returncode == 2 and out.stderr.strip().splitlines() == [f"error: {says}"], out.stderr


def test_a_recomputed_layer_adds_beyond_the_output_layers_transients():
    """Full recomputation under a framework: a stage without the output layer adds one layer's saved tensors less
    its input (what its backward's rerun saves again); the last stage only what that exceeds the output layer's
    saved tensors and the loss's transients, freed before backward reaches a layer. None without recomputation."""
    import costs

    spec = load_model("llama3-70b")
    layout = dict(tp=8, sp=True, pp=4, microbatches=8, fsdp=8, zero=1, tokens=8192)
    cost = evaluate_layout(spec, MEGATRON, Layout(**layout, recompute="full"), framework=FRAMEWORKS["megatron"])
    per_layer = (costs.layer_bytes_per_token(spec, 2, Layout(tp=8, sp=True), fused_swiglu=True)  # Megatron's SwiGLU
                 - costs.input_bytes_per_token(spec, 2, Layout(tp=8, sp=True)))
    first, *_, last = cost.stages
    assert first.overheads["recomputed_layer"] == 8192 * per_layer > 0
    inputs = last.stage.layers * costs.input_bytes_per_token(spec, 2, Layout(tp=8, sp=True))
    extras = last.stage.activation_bytes_per_token / last.stage.in_flight - inputs  # the output layer's, per token
    assert last.overheads["recomputed_layer"] == max(0, 8192 * (per_layer - extras) - last.overheads["loss_upcast"])
    plain = evaluate_layout(spec, MEGATRON, Layout(**layout), framework=FRAMEWORKS["megatron"])
    assert all("recomputed_layer" not in s.overheads for s in plain.stages)


@pytest.mark.parametrize("reshard", [True, False])
def test_fsdp_under_a_pipeline_accumulates_unsharded_gradients(reshard):
    """FSDP2 inside torch's pipeline stages syncs gradients once per step: the stage's gradients accumulate
    unsharded in the reduce dtype (fsdp2's and torchtitan's fp32, 4 B per parameter of the stage; cs336's bf16, 2 B)
    and its units stay gathered after each backward, resharded after forward or not (2 B): the exact accounting's,
    as torch holds them (tests/test_torch_distributed_llama.py). Without a pipeline the shard holds fp32
    gradients, 4 B / N, and nothing is unsharded."""
    spec, titan = load_model("llama3-8b"), FRAMEWORKS["torchtitan"]
    layout = Layout(fsdp=4, pp=2, microbatches=4, tokens=8192, reshard_after_forward=reshard)
    for held in evaluate_layout(spec, load_recipe("fsdp2"), layout, framework=titan).stages:
        assert held.components["unsharded_grads"] == 4 * held.stage.params  # torchtitan's fp32 reduce
        assert held.overheads["fsdp_in_flight"] == 0  # the gathered units are the exact accounting's, as torch holds
        assert held.components["weight_copies"] == 2 * held.stage.params
    for held in evaluate_layout(spec, load_recipe("cs336"), layout).stages:
        assert held.components["unsharded_grads"] == 2 * held.stage.params
    titan_bf16 = evaluate_layout(spec, load_recipe("cs336"), layout, framework=titan).heaviest  # its fp32 reduce wins
    assert titan_bf16.components["unsharded_grads"] == 4 * titan_bf16.stage.params
    plain = evaluate_layout(spec, load_recipe("cs336"), Layout(fsdp=4, tokens=8192)).heaviest
    assert plain.components["grads"] == 4 * plain.stage.params / 4 and "unsharded_grads" not in plain.components


@pytest.mark.slow
def test_megatron_and_nanotron_rerun_to_the_layers_end():
    """Megatron's and nanotron's CheckpointFunction reruns a layer's whole forward: torch's early stop
    (--checkpoint non-reentrant) is refused under them in one line; torchtitan sets either (early_stop)."""
    base = [sys.executable, "-m", "costmodel", "step", "--model", "llama3-8b", "--hardware", "h100-sxm", "--tokens",
            "4096", "--recompute", "full", "--checkpoint", "non-reentrant"]
    out = subprocess.run([*base, "--framework", "megatron"], capture_output=True, text=True)
    assert out.returncode == 2 and out.stderr.strip() == (
        "error: --framework megatron reruns recomputed layers to their end: --checkpoint reentrant, not non-reentrant "
        "(torch's early stop)")
    assert subprocess.run([*base, "--framework", "torchtitan", "--fsdp", "8"], capture_output=True).returncode == 0


@pytest.mark.parametrize("framework, stage", [("megatron", 1), ("nanotron", 1), ("torchtitan", 3), ("deepspeed", 3),
                                              ("exact", 3)])
def test_zero_left_open_is_the_frameworks_own_stage(framework, stage):
    """--zero not given: Megatron's distributed optimizer and nanotron's ZeRO run stage 1, so their profiles take it
    (the command ran, where it used to refuse ZeRO-3); the others, and the exact accounting, FSDP's 3."""
    from hostile import run

    flags = ["memory", "--model", "llama3-8b", "--fsdp", "8", "--tokens", "4096", "--framework", framework, "--json"]
    open_, given = (json.loads(run(flags + extra).stdout) for extra in ([], ["--zero", str(stage)]))
    assert open_["layout"]["zero"] == stage and open_["peak_bytes"] == given["peak_bytes"]


def test_memory_says_what_the_reserved_peak_adds_and_its_parts_add_up():
    """The text names what the reserved peak holds beyond the allocated one (the fitted reserves; the ZeRO-1
    gather buffers cached from the optimizer step), and those parts, read from --json, add up to it."""
    args = [sys.executable, "-m", "costmodel", "memory", "--model", "nanotron-3b", "--framework", "nanotron", "--fsdp",
            "8", "--zero", "1", "--tokens", "16384", "--hardware", "h100-sxm"]
    text = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    data = json.loads(subprocess.run([*args, "--json"], capture_output=True, text=True, check=True).stdout)
    said = " ".join(text[text.index("Peak reserved:"):].split("Framework")[0].replace("-\n", "-").split())
    assert data["peak_phase"] == FORWARD_BACKWARD and "forward-backward's allocations" in said
    assert "ZeRO-1 parameter all-gather buffers (8.04 GB) kept cached from the optimizer step" in said
    named = ("activation_reserve", "reserve", "zero1_gather")
    assert all(k in data["overheads"] for k in named)
    assert data["reserved_bytes"] == pytest.approx(data["peak_bytes"] + sum(data["overheads"][k]["bytes"] for k in named),
                                                   abs=3)


@pytest.mark.parametrize("fsdp, shown", [(1, False), (2, True)])
def test_memory_lists_the_pipelined_fsdp_gradients_only_where_fsdp_runs_in_the_stages(fsdp, shown):
    """--pp without FSDP has no unsharded gradients to keep: no row at 0 in the table."""
    out = subprocess.run([sys.executable, "-m", "costmodel", "memory", "--model", "llama3-8b", "--tokens", "8192",
                          "--pp", "2", "--fsdp", str(fsdp)], capture_output=True, text=True, check=True).stdout
    assert ("unsharded gradients (FSDP in pipeline stages)" in out) is shown


@pytest.mark.parametrize("extra, said", [(["--fsdp", "8"], True), (["--fsdp", "8", "--recipe", "megatron"], False),
                                         ([], False)])
def test_memory_says_fsdp_gathers_an_autocast_recipes_weights_in_its_compute_dtype(extra, said):
    """cs336 (fp32 master, bf16 autocast) with FSDP: the weights are gathered in bf16 and no autocast copy is kept,
    a convention the output names; a recipe with bf16 weights, or no FSDP, has nothing to say."""
    out = subprocess.run([sys.executable, "-m", "costmodel", "memory", "--model", "llama3-8b", "--tokens", "8192", *extra],
                         capture_output=True, text=True, check=True).stdout
    assert ("MixedPrecisionPolicy(param_dtype=bf16)" in " ".join(out.split())) is said


def test_megatron_memory_fits_the_dgxc_layouts_that_ran():
    """NVIDIA's DGXC Llama 3.1 8B recipe (TP1 CP2, ZeRO-1 over data x CP, 8,192 tokens, fp32 gradient buffer) and its
    70B fp8 one (TP4 PP8 VP5, bf16 gradients: grad_reduce_in_fp32 = False for fp8) ran on 80 GB H100s
    (shared/data/training-runs): the megatron profile's exact accounting fits them in the usable HBM once its fused
    SwiGLU saves its input only (80.7 and 76.9 GB). So does the 405B one (TP8 PP8 CP2
    VP8, fp32 gradient buffer, data 4: 512 GPUs) once its 126 layers are split as NeMo's recipe splits
    them, the embedding and the loss counting as a layer each (16 a stage, 15 on the first and last); as an even
    split (16 on the first six stages) it needs 87.6 GB."""
    hardware = load_hardware("h100-sxm")
    bf16_grads = MEGATRON.model_copy(update={"grads": "bf16", "grad_comm": "bf16"})
    needs = []
    for model, recipe, layout in (
            ("llama3-8b", MEGATRON, dict(cp=2, fsdp=4, zero=1, tokens=8192, grad_accum=32)),
            ("llama3-70b", bf16_grads, dict(tp=4, sp=True, pp=8, schedule="interleaved", chunks=5, microbatches=64,
                                            fsdp=2, zero=1, tokens=8192)),
            ("llama3-405b", MEGATRON, dict(tp=8, sp=True, pp=8, schedule="interleaved", chunks=8, microbatches=64, cp=2,
                                           fsdp=4, zero=1, tokens=8192, split="ends"))):
        cost = evaluate_layout(load_model(model), recipe, Layout(**layout), hardware, framework=FRAMEWORKS["megatron"])
        assert cost.heaviest.total_bytes < hardware.hbm.usable_bytes, (model, cost.heaviest.total_bytes / 1e9)
        needs.append(round(cost.heaviest.total_bytes / 1e9, 1))
    assert needs == [80.7, 76.9, 84.6] and round(hardware.hbm.usable_bytes / 1e9, 1) == 85.5
    readme = " ".join((Path(__file__).resolve().parents[1] / "README.md").read_text().split())
    assert "80 GB H100s, is 80.7, 76.9 and 84.6 GB, under the usable 85.5" in readme


def test_a_profile_without_a_reserve_says_so_in_the_reserved_sentence(tmp_path):
    """A profile file with no fitted reserve and no cached segment: the reserved peak is the allocations alone, and
    the sentence says that (it printed 'allocations + .')."""
    spec = FRAMEWORKS["torchtitan"].model_copy(update={"name": "mine", "activation_factor": 1.0, "reserve_bytes": 0.0})
    path = tmp_path / "mine.json"
    path.write_text(spec.model_dump_json())
    out = subprocess.run([sys.executable, "-m", "costmodel", "memory", "--model", "llama3-8b", "--fsdp", "8", "--tokens",
                          "8192", "--recipe", "fsdp2", "--framework", str(path)], capture_output=True, text=True,
                         check=True).stdout
    assert "Peak reserved: the forward-backward's allocations, nothing beyond them." in " ".join(out.split())


def test_ends_split_arrays_see_the_first_expert_stage_when_each_stage_holds_one_slot():
    """Review: with --split ends and pp = L + 2 every stage holds one slot, the first one the embedding only, so the
    first stage of expert layers is stage L_d + 1 (DeepSeek-V3: 3 dense layers, stage 4 holds layer 3), beyond
    representative_stages' middles 1..L_d: the arrays must still see it as the single layout does."""
    shape = Shape.of(load_model("deepseek-v3"))
    pp = shape.layers + 2
    arrays = evaluate(shape, MEGATRON, Point(pp=np.array([pp]), microbatches=np.array([pp]), split="ends",
                                             tokens=np.array([4096])))
    one = evaluate(shape, MEGATRON, Point(pp=pp, microbatches=pp, split="ends", tokens=4096))
    assert arrays.memory_bytes[0] == pytest.approx(one.memory_bytes, rel=1e-12)


@pytest.mark.parametrize("split", ["even", "ends"])
def test_symbolic_memory_of_a_moe_with_dense_first_layers_under_a_pipeline(split):
    """`memory --symbolic` on DeepSeek-V3 (3 dense layers) with stages: the letter L_d takes the second stage for the
    middle ones (the ends split's one more middle stage is for whole numbers only; a review found it asked max() of
    a letter and crashed): it prints the formula beside the numbers."""
    out = subprocess.run([sys.executable, "-m", "costmodel", "memory", "--model", "deepseek-v3", "--pp", "4", "--ep", "8",
                          "--fsdp", "8", "--tokens", "4096", "--split", split, "--symbolic", "--json"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-800:]
    data = json.loads(out.stdout)
    assert data["symbolic"] and data["total_bytes"] > 0


def test_megatron_places_whole_equal_layer_counts_on_its_stages_and_chunks():
    """Megatron-core's get_num_layers_to_build asserts that the layers (L + 2 under account_for_*_in_pipeline_split)
    divide over the stages, and with a virtual pipeline each stage's over its chunks: Llama 3.1 405B's 126 layers over
    8 x 8 chunks, or over 8 stages of 1F1B, are refused in one line that names the ends split (128 slots divide),
    which runs; the exact accounting keeps the uneven split."""
    flags = ["--model", "llama3-405b", "--tp", "8", "--sp", "--pp", "8", "--microbatches", "64", "--cp", "2",
             "--fsdp", "4", "--zero", "1", "--tokens", "8192"]

    def run(*extra):
        return subprocess.run([sys.executable, "-m", "costmodel", "memory", *flags, *extra], capture_output=True,
                              text=True)

    refused = run("--framework", "megatron", "--schedule", "interleaved", "--chunks", "8")
    assert refused.returncode != 0 and refused.stderr.strip() == (
        "error: --framework megatron places whole, equal layer counts on its stages and model chunks: its 126 layers "
        "do not divide over --pp 8 x --chunks 8 = 64 (with --split ends, 126 + 2 = 128 would)")
    assert run("--framework", "megatron", "--schedule", "interleaved", "--chunks", "8", "--split", "ends").returncode == 0
    refused = run("--framework", "megatron")
    assert refused.returncode != 0 and refused.stderr.strip() == (
        "error: --framework megatron places whole, equal layer counts on its stages: its 126 layers do not divide over "
        "--pp 8 (with --split ends, 126 + 2 = 128 would)")
    assert run("--schedule", "interleaved", "--chunks", "8").returncode == 0  # the exact accounting's uneven chunks
    assert run().returncode == 0  # and 1F1B's: 16 layers on six stages, 15 on two
