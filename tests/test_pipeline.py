"""Pipeline schedules and stages: bubble, micro-batches in flight, uneven splits."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costmodel.errors import CostModelError
from costmodel.formulas import pipeline as pl
from costmodel.specs.layout import Layout
from costmodel.specs.load import load_model
from costmodel.specs.recipe import RECIPES
from costmodel.cost.evaluate import evaluate_layout
from costmodel.cost.shape import Shape
from costmodel.cost.stage import stage
from costmodel.cost.point import Point
from costmodel.parallel.pipeline.stages import every_stage


def test_1f1b_four_stages_four_microbatches():
    """Efficiency 4/7 = 57.1% (bubble (p-1)/(m+p-1) = 3/7)."""
    assert 1 - pl.bubble_fraction(stages=4, microbatches=4) == pytest.approx(4 / 7, rel=1e-15)


def test_interleaving_shrinks_the_bubble_v_fold_and_costs_first_stage_memory():
    assert pl.bubble_fraction(stages=4, microbatches=8, chunks=2, schedule="interleaved") == pytest.approx(3 / 19)
    assert pl.interleave_factor(stages=8, chunks=3) == 1 + 7 / 24  # Korthikanti Sec. 4.2.3


def test_zb_h1_has_a_third_of_the_bubble_time():
    p, m = 8, 16
    zb_idle = pl.bubble_fraction(stages=p, microbatches=m, schedule="zb-h1")
    assert zb_idle / (1 - zb_idle) == pytest.approx((p - 1) / (3 * m))  # idle / work, vs (p-1)/m for 1F1B


def test_microbatches_in_flight():
    assert [pl.microbatches_in_flight(stage=i, stages=4, microbatches=8) for i in range(4)] == [4, 3, 2, 1]
    assert pl.microbatches_in_flight(stage=0, stages=4, microbatches=8, schedule="gpipe") == 8


def test_uneven_split_puts_the_extra_layers_first():
    layout = Layout(pp=16)
    counts = [stage(Shape.of(load_model("xxl")), RECIPES["cs336"], Point.of(layout), role).layers
              for role in every_stage(16)]
    assert counts == [8] * 14 + [7] * 2


@settings(max_examples=40, deadline=None)
@given(name=st.sampled_from(["xxl", "llama3-8b", "gpt2", "llama2-70b"]), pp=st.integers(1, 12))
def test_stage_parameters_add_up_to_the_model(name, pp):
    """Every parameter sits on exactly one stage (plus the last stage's copy of tied embeddings)."""
    model = load_model(name)
    if pp > model.layers:
        return
    shape, point = Shape.of(model), Point.of(Layout(pp=pp))
    held = sum(stage(shape, RECIPES["cs336"], point, role).params for role in every_stage(pp))
    tied_copy = model.vocab * model.hidden if model.kind == "transformer" and model.tied_embeddings and pp > 1 else 0
    assert held == shape.total_params() + tied_copy


def test_first_stage_is_the_heaviest_under_1f1b():
    cost = evaluate_layout(load_model("llama3-70b"), RECIPES["megatron"],
                           Layout(tp=8, pp=8, sp=True, tokens=8192, recompute="selective"))
    assert cost.heaviest.stage.role.index == 0 and len(cost.stages) == 8
    assert cost.memory_bytes == max(s.total_bytes for s in cost.stages)


def test_1f1b_with_fewer_micro_batches_than_stages():
    """Legal in Megatron and nanotron: each stage holds min(p - i, m) micro-batches, the bubble is
    (p - 1)/(m + p - 1) (with m = 1: the stages run one after another)."""
    from costmodel.cost.point import Point
    from costmodel.parallel.pipeline import bubble

    layout = Layout(pp=4, microbatches=1, tokens=4096)
    assert bubble(Point.of(layout)) == pytest.approx(3 / 4)
    cost = evaluate_layout(load_model("llama3-8b"), RECIPES["megatron"], layout)
    full = evaluate_layout(load_model("llama3-8b"), RECIPES["megatron"], Layout(pp=4, microbatches=4, tokens=4096))
    assert cost.heaviest.total_bytes < full.heaviest.total_bytes  # one micro-batch in flight, not four


@pytest.mark.parametrize("fields, message", [
    (dict(pp=4, microbatches=2, schedule="zb-h1"), "needs --microbatches >= --pp"),
    (dict(pp=4, microbatches=6, schedule="interleaved", chunks=2), "multiple of --pp"),
    (dict(chunks=2), "--chunks needs --schedule interleaved"),
])
def test_schedules_reject_impossible_micro_batching(fields, message):
    with pytest.raises(ValueError, match=message):
        Layout(**fields)


def test_more_stages_than_layers():
    with pytest.raises(CostModelError, match="more than the model's 32 layers"):
        evaluate_layout(load_model("llama3-8b"), RECIPES["cs336"], Layout(pp=64))


def test_interleaved_last_stage_holds_one_micro_batch_of_the_output_layer():
    """Interleaved 1F1B: the last rank's warm-up holds only earlier chunks, and each forward of the last chunk runs
    straight into its backward (Megatron's forward_backward_pipelining_with_interleaving), so the output layer's
    saved tensors are there for one micro-batch while its layers count (v - 1) p + 1 chunk-micro-batches, here
    (2 - 1) 4 + 1 = 5 chunks = 2.5 micro-batches; under 1F1B the last stage holds one of each. A vocabulary of
    256,000 makes the output layer the larger part (it was counted 2.5 times)."""
    import costs
    from costmodel.specs.model import Transformer

    spec = Transformer(name="bigvocab", hidden=2048, ffn_hidden=8192, layers=16, heads=16, kv_heads=8, head_dim=128,
                       vocab=256000, seq_len=8192)
    tokens, act = 8192, 2  # the megatron recipe: bf16 activations, no autocast
    layers = 4 * tokens * costs.layer_bytes_per_token(spec, act, Layout())  # the last stage's 4 layers, one micro-batch

    def last(schedule, chunks):
        layout = Layout(pp=4, schedule=schedule, chunks=chunks, microbatches=4, tokens=tokens)
        return evaluate_layout(spec, RECIPES["megatron"], layout).stages[-1].activation_bytes

    extras_1f1b = last("1f1b", 1) - 1 * layers  # 1F1B's last stage: one micro-batch in flight
    assert extras_1f1b > layers  # the output layer's logits dominate
    assert last("interleaved", 2) == 2.5 * layers + 1 * extras_1f1b
