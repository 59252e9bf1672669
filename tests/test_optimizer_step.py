"""The optimizer step's time: each parameter the device updates moves its state over HBM once (read) and all
but the gradient once more (written), after the last backward. Checked by hand on Llama 3 8B."""

from __future__ import annotations

import pytest

from costmodel.cost.evaluate import evaluate_layout
from costmodel.specs.layout import Layout
from costmodel.specs.load import load_hardware, load_model, load_recipe

LLAMA3_8B = 8_030_261_248  # parameters (Hugging Face meta-llama/Meta-Llama-3-8B)
HBM = 3.35e12 * 0.897  # h100-sxm: W_HBM x the measured memory-bound kernel's efficiency, B/s


def _step(recipe: str, layout: Layout):
    return evaluate_layout(load_model("llama3-8b"), load_recipe(recipe), layout, load_hardware("h100-sxm")).step


def test_fsdp_cs336_by_hand():
    """cs336: fp32 params (the master) read and written, fp32 grads read, two fp32 Adam states read and
    written: 8 + 4 + 16 = 28 B per parameter of the device's 1/8 shard."""
    step = _step("cs336", Layout(fsdp=8, tokens=8192))
    assert step.optimizer_s == pytest.approx(LLAMA3_8B / 8 * 28 / HBM, rel=1e-12)


def test_zero1_megatron_by_hand():
    """megatron: the fp32 master, fp32 grads and Adam states as above, and the kept bf16 weights rewritten
    from the master: 30 B per parameter of the ZeRO-1 shard (1/4)."""
    step = _step("megatron", Layout(fsdp=4, zero=1, tokens=8192))
    assert step.optimizer_s == pytest.approx(LLAMA3_8B / 4 * 30 / HBM, rel=1e-12)


def test_it_adds_once_per_step_after_the_pipeline():
    one = _step("megatron", Layout(fsdp=4, zero=1, tokens=8192))
    more = _step("megatron", Layout(fsdp=4, zero=1, tokens=8192, grad_accum=4))
    assert more.optimizer_s == one.optimizer_s  # not per micro-batch
    assert sum(more.critical_parts.values()) == pytest.approx(more.step_s, rel=1e-12)
    assert more.critical_parts["optimizer_s"] == more.optimizer_s
