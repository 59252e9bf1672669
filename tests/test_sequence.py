"""The sequence a layout runs (--seq): attention's reach in FLOPs, memory and time; by default the model's,
shortened to --tokens when a micro-batch holds fewer (a replica cannot attend over tokens it does not hold)."""

from __future__ import annotations

from costmodel.cost.evaluate import evaluate_layout
from costmodel.specs.layout import Layout
from costmodel.specs.load import load_hardware, load_model, load_recipe

LLAMA, CS336 = load_model("llama3-8b"), load_recipe("cs336")


def _flops_per_token(model, **layout):
    return evaluate_layout(model, CS336, Layout(**layout)).flops.per_token


def test_a_micro_batch_shorter_than_the_models_sequence_attends_over_what_it_holds():
    assert _flops_per_token(LLAMA, tokens=100) == _flops_per_token(LLAMA, tokens=100, seq=100)
    assert _flops_per_token(LLAMA, tokens=100) < _flops_per_token(LLAMA, tokens=8192)


def test_a_long_context_config_at_the_usual_sequence_costs_what_the_short_one_does():
    """A Llama 3.1-style config (131,072 positions) trained on 8,192-token micro-batches: the same FLOPs per token
    as llama3-8b (8,192), not 4x (attention over 131,072)."""
    long_context = LLAMA.model_copy(update={"seq_len": 131072})
    assert _flops_per_token(long_context, tokens=8192) == _flops_per_token(LLAMA, tokens=8192)
    assert _flops_per_token(long_context, tokens=8192, seq=4096) == _flops_per_token(LLAMA, tokens=8192, seq=4096)


def test_seq_reaches_memory_and_the_step():
    """Math attention keeps s x s scores per head: halving s halves them; the step's MFU numerator follows."""
    h100, megatron = load_hardware("h100-sxm"), load_recipe("megatron")
    full = evaluate_layout(LLAMA, megatron, Layout(tokens=8192, flash=False), h100)
    half = evaluate_layout(LLAMA, megatron, Layout(tokens=8192, seq=4096, flash=False), h100)
    assert half.heaviest.activation_bytes < full.heaviest.activation_bytes
    assert half.step.model_flops < full.step.model_flops
    assert half.step.model_flops == half.flops.per_token * 8192
