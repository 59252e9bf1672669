"""The memory-bound ops of a step, op by op (formulas/memory_bound.py, cost/memory_bound.py): a Llama layer and
the model's ends by hand, what TP, SP and recomputation change, and `step`'s part equal to those bytes over the
achieved HBM bandwidth."""

from __future__ import annotations

from pathlib import Path

import pytest

from costmodel.cost.evaluate import evaluate_layout, layout_shape
from costmodel.cost.memory_bound import ends_bytes, layer_bytes
from costmodel.cost.point import Point
from costmodel.specs.layout import Layout
from costmodel.specs.load import load_hardware, load_model, load_recipe

LLAMA = load_model("llama3-8b")  # D 4096, F 14336, 32 heads and 8 KV heads of 128, V 128,256, RoPE, RMSNorm
D, F, Q, K, V, B = 4096, 14336, 32 * 128, 8 * 128, 128_256, 2  # widths and bf16 bytes


def _bytes(fn, **layout):
    point = Point.of(Layout(tokens=8192, **layout))
    return fn(layout_shape(LLAMA, Layout(tokens=8192, **layout)), point, B)


def test_a_llama_layer_by_hand():
    """Per token: two norms (forward 2 D, backward 3 D), two residual adds (3 D + 3 D), RoPE on q and k
    (2 (q + k) each way) and SwiGLU (3 F forward, 5 F backward), in bf16."""
    by_hand = (2 * 5 * D + 2 * 6 * D + 4 * (Q + K) + 8 * F) * B
    assert _bytes(layer_bytes) == by_hand == 450_560


def test_tp_splits_the_residual_stream_only_with_sp():
    """TP 4 splits RoPE's heads and SwiGLU's F; the norms and residual adds only with SP (which splits tokens)."""
    split = (4 * (Q + K) + 8 * F) * B / 4
    assert _bytes(layer_bytes, tp=4, sp=True) == 450_560 / 4
    assert _bytes(layer_bytes, tp=4) == (2 * 5 * D + 2 * 6 * D) * B + split


def test_full_recomputation_reruns_each_forward_and_selective_none_with_flash():
    forward = (2 * 2 * D + 2 * 3 * D + 2 * (Q + K) + 3 * F) * B
    assert _bytes(layer_bytes, recompute="full") == 450_560 + forward
    assert _bytes(layer_bytes, recompute="selective") == 450_560  # flash keeps the softmax on chip


def test_math_attention_adds_the_softmax_and_selective_reruns_it():
    """Without flash, the a s scores per token: softmax forward 2 a s, backward 3 a s; selective recomputation
    reruns the attention core, so its forward once more."""
    s = LLAMA.seq_len
    assert _bytes(layer_bytes, flash=False) == 450_560 + 5 * 32 * s * B
    assert _bytes(layer_bytes, flash=False, recompute="selective") == 450_560 + 7 * 32 * s * B


def test_the_ends_by_hand():
    """Last stage: the final norm and Megatron's fp32 cross-entropy, (48 + 2 b) bytes per logit (V / t of them
    vocab-parallel); one stage also runs the embedding's lookup (2 D forward, 3 D backward)."""
    ce = (48 + 2 * B) * V
    assert _bytes(ends_bytes) == 5 * D * B + ce + 5 * D * B
    assert _bytes(ends_bytes, pp=2) == 5 * D * B + ce
    assert _bytes(ends_bytes, tp=2, sp=True, pp=2) == 5 * D * B / 2 + ce / 2


def test_step_times_those_bytes_at_the_achieved_hbm_bandwidth():
    """`step`'s memory-bound part: tokens a device runs x (its layers x a layer's bytes + the ends) over
    W_HBM x e_HBM (h100-sxm: a measured kernel's 89.7%)."""
    h100 = load_hardware("h100-sxm")
    layout = Layout(tokens=8192, fsdp=8, grad_accum=2)
    step = evaluate_layout(LLAMA, load_recipe("megatron"), layout, h100).step
    per_token = 32 * _bytes(layer_bytes, fsdp=8) + _bytes(ends_bytes, fsdp=8)
    assert step.elementwise_s == pytest.approx(
        2 * 8192 * per_token / (h100.hbm.bandwidth_bytes_per_s * h100.step_model.hbm_efficiency), rel=1e-12)
    readme = " ".join((Path(__file__).resolve().parents[1] / "README.md").read_text().split())
    assert f"(H100: {100 * h100.step_model.hbm_efficiency:.1f}%, Dao-AILab/quack's softmax" in readme


def test_a_variant_with_slower_hbm_moves_only_the_memory_bound_parts():
    """h100-96gb-500w (torchtitan's hosts) extends h100-sxm with 96 GB of HBM2e at 2.4 TB/s: the GEMMs take as
    long, the memory-bound parts the ratio of the achieved bandwidths longer."""
    h100, variant = load_hardware("h100-sxm"), load_hardware("h100-96gb-500w")
    assert (variant.hbm.capacity_bytes, variant.hbm.bandwidth_bytes_per_s) == (96 * 2**30, 2.4e12)
    layout = Layout(tokens=8192, fsdp=8)
    fast, slow = (evaluate_layout(LLAMA, load_recipe("megatron"), layout, hw).step for hw in (h100, variant))
    assert slow.matmul_s == fast.matmul_s
    ratio = (3.35e12 * h100.step_model.hbm_efficiency) / (2.4e12 * variant.step_model.hbm_efficiency)
    assert slow.elementwise_s == pytest.approx(fast.elementwise_s * ratio, rel=1e-12)
    assert slow.optimizer_s == pytest.approx(fast.optimizer_s * ratio, rel=1e-12)


def test_fp8_casts_of_a_llama_layer_by_hand():
    """Transformer Engine's fp8 casts per token of one Llama 3 8B layer (TP 1, no recomputation, b = 2): forward,
    the two fused norms write fp8 and their transposes are made apart ((3 - b) D each), the attention output's
    and the SwiGLU output's cast-transpose ((b + 2) a d_h, (b + 2) F); backward, each linear's output gradient
    ((b + 2) x (QKV: a d_h + 2 k d_h, proj: D, FC1: 2 F, FC2: D)). Full recomputation reruns the forward casts."""
    from costmodel.cost import memory_bound
    from costmodel.cost.point import Point
    from costmodel.cost.shape import Shape
    from costmodel.specs.load import load_model

    shape = Shape.of(load_model("llama3-8b"))
    d, f, q, kv = 4096, 14336, 32 * 128, 8 * 128
    forward = 2 * (3 - 2) * d + 4 * q + 4 * f
    backward = 4 * (q + 2 * kv) + 4 * d + 4 * 2 * f + 4 * d
    assert memory_bound.fp8_cast_bytes(shape, Point(), 2) == forward + backward == 253_952
    assert memory_bound.fp8_cast_bytes(shape, Point(recompute="full"), 2) == 2 * forward + backward
    tp = memory_bound.fp8_cast_bytes(shape, Point(tp=4), 2)  # TP without SP: the same kernels on t-split widths
    assert tp == 2 * d + 4 * q / 4 + 4 * f / 4 + 4 * (q + 2 * kv) / 4 + 4 * d + 4 * 2 * f / 4 + 4 * d
    # SP: the norms write fp8 on their D / t and the gathered D is transposed apart (2 D - D / 4 each); a
    # row-parallel input is cast (3 per element) and transposed (2) apart; a row-parallel output gradient is cast on
    # the local D / t (3) and its gathered D transposed (2); column-parallel output gradients as before
    sp = memory_bound.fp8_cast_bytes(shape, Point(tp=4, sp=True), 2)
    assert sp == (2 * (2 * d - d / 4) + 5 * q / 4 + 5 * f / 4
                  + 4 * (q + 2 * kv) / 4 + (3 * d / 4 + 2 * d) + 4 * 2 * f / 4 + (3 * d / 4 + 2 * d))


def test_fp8_step_counts_the_casts():
    """--precision fp8 adds the casts to the memory-bound time (and only then)."""
    from costmodel.cost import memory_bound
    from costmodel.cost.evaluate import evaluate_layout
    from costmodel.cost.point import Point
    from costmodel.cost.shape import Shape
    from costmodel.formulas.memory_bound import hbm_seconds
    from costmodel.specs.layout import Layout
    from costmodel.specs.load import load_hardware, load_model, load_recipe

    spec, h100 = load_model("llama3-8b"), load_hardware("h100-sxm")
    layout = Layout(tokens=8192, fsdp=8, zero=1)
    bf16, fp8 = (evaluate_layout(spec, load_recipe("megatron"), layout, h100, precision=p).step for p in ("bf16", "fp8"))
    casts = memory_bound.fp8_cast_bytes(Shape.of(spec), Point(), 2) * 32 * 8192
    added = hbm_seconds(hbm_bytes=casts, hbm_bandwidth=h100.hbm.bandwidth_bytes_per_s,
                        efficiency=h100.step_model.hbm_efficiency)
    assert fp8.elementwise_s - bf16.elementwise_s == pytest.approx(added, rel=1e-12)


def test_fp8_casts_arrays_equal_numbers():
    """The planner evaluates SP layouts with TP as an array, TP 1 among them: each element is what the number
    gives (TP 1 has no SP gather, so its casts are the fused ones)."""
    import numpy as np

    from costmodel.cost import memory_bound
    from costmodel.cost.point import Point
    from costmodel.cost.shape import Shape
    from costmodel.specs.load import load_model

    shape = Shape.of(load_model("llama3-8b"))
    arrays = memory_bound.fp8_cast_bytes(shape, Point(tp=np.array([1, 2, 4, 8]), sp=True), 2)
    numbers = [memory_bound.fp8_cast_bytes(shape, Point(tp=t, sp=t > 1), 2) for t in (1, 2, 4, 8)]
    assert list(arrays) == numbers


def test_torch_ring_attention_traffic_per_layer_as_the_readme_says():
    """Llama (K, V repeated to the query heads, d_h = 128, torchtitan's transposed layout) on 2 CP ranks: the busiest
    rank's forward and backward around the attention kernels move about 113 x the rank's query bytes a layer, the
    figure the README gives; the step's term (per local token) is that over the local tokens."""
    from pathlib import Path

    from costmodel.cost.memory_bound import torch_ring_attention_bytes
    from costmodel.cost.point import Point
    from costmodel.cost.shape import Shape
    from costmodel.formulas.memory_bound import torch_ring_backward_bytes, torch_ring_forward_bytes
    from costmodel.specs.load import load_model

    q, lse = 1.0, 4 / (2 * 128)  # per query byte: the fp32 lse of a head over its 128 bf16 elements
    total = (torch_ring_forward_bytes(q=q, kv=2 * q, out=q, lse=lse, cp=2, rank=1, noncontiguous=1)
             + torch_ring_backward_bytes(q=q, kv=2 * q, lse=lse, cp=2, rank=1, noncontiguous=1, lse_copied=1))
    assert round(total) == 113
    assert "about 113 local query-bytes a layer on 2 ranks" in " ".join(
        (Path(__file__).resolve().parents[1] / "README.md").read_text().split())
    shape, point = Shape.of(load_model("llama3-8b")), Point(cp=2, tokens=8192, cp_kind="allgather")
    query_bytes_per_token = shape.heads * shape.head_dim * 2
    assert torch_ring_attention_bytes(shape, point, 2, 0) == pytest.approx(total * query_bytes_per_token, rel=1e-12)
    assert torch_ring_attention_bytes(shape, Point(cp=1, tokens=8192, cp_kind="allgather"), 2, 0) == 0


def test_torch_ring_attention_traffic_does_not_rerun_under_the_op_policy():
    """torchtitan's op policy saves the SDPA op whole, torch's ring attention inside it: a layer's memory-bound bytes
    under op with torch's ring attention exceed those with TE's ring (no such term) by the ring's traffic once; under
    full recomputation its forward counts twice."""
    from costmodel.cost.memory_bound import layer_bytes, torch_ring_attention_bytes
    from costmodel.cost.point import Point
    from costmodel.cost.shape import Shape
    from costmodel.specs.load import load_model

    shape = Shape.of(load_model("llama3-8b"))
    for recompute, reruns in (("op", 0), ("full", 1)):
        torch_ring, te_ring = (Point(cp=2, tokens=8192, cp_kind=kind, recompute=recompute) for kind in ("allgather", "ring"))
        extra = layer_bytes(shape, torch_ring, 2) - layer_bytes(shape, te_ring, 2)
        assert extra == pytest.approx(torch_ring_attention_bytes(shape, torch_ring, 2, reruns), rel=1e-12)
    assert torch_ring_attention_bytes(shape, torch_ring, 2, 1) > torch_ring_attention_bytes(shape, torch_ring, 2, 0)
