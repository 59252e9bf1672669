"""The FFN stack (XXL family) against one real torch training step: counts, bytes and FLOPs, exact.

The expected side is what torch measures on a small stack under the CS336 recipe: fp32 parameters,
torch.autocast(cpu, bf16), torch.optim.AdamW. Sources of each costmodel quantity:
params -> formulas/params.py ffn_block_params; state -> formulas/memory.py state_bytes_per_device;
saved tensors -> formulas/memory.py ffn_activation_elements_per_token,
autocast_input_cast_elements_per_token, autocast_weight_copy_bytes;
FLOPs -> formulas/flops.py ffn_forward_flops_per_token, ffn_backward_flops_per_token.
"""

import itertools
import math

import pytest

pytest.importorskip("torch", reason="the PyTorch cross-checks need torch: pip install torch==2.13.0 (the README's test command)")
import torch
from torch_models import SavedStorages, count_flops, ffn_stack

from costmodel.specs.layout import Layout
from costmodel.specs.model import FFNStack
from costmodel.specs.recipe import RECIPES
from costmodel.cost.evaluate import evaluate_layout
from costmodel.cost.shape import Shape

CS336 = RECIPES["cs336"]

SHAPES = [  # (D, F, L, input shape batch x seq); T = batch * seq tokens
    (64, 208, 3, (2, 5)),
    (32, 48, 1, (3, 4)),
    (16, 96, 2, (1, 7)),
]
CASES = [
    pytest.param(d, f, layers, batch_seq, activation, gated, input_grad,
                 id=f"D{d}-F{f}-L{layers}-T{math.prod(batch_seq)}-{activation}"
                    f"{'-gated' if gated else ''}{'-input_grad' if input_grad else ''}")
    for (d, f, layers, batch_seq), activation, gated, input_grad in itertools.product(
        SHAPES, ["none", "relu", "gelu", "silu"], [False, True], [False, True])
]


def stack_input(batch_seq, d_model, requires_grad):
    """fp32 input of the stack.

    When it needs a gradient it is made a non-leaf (the output of an op), which is what
    ``input_requires_grad`` stands for: something trainable sits before the stack. A *leaf* fp32
    tensor that requires grad is treated by autocast like a weight: its bf16 cast is cached and
    shared by the gate and up matmuls (see test_autocast_caches_the_cast_of_a_leaf_input).
    """
    x = torch.randn(*batch_seq, d_model, requires_grad=requires_grad)
    return x.clone() if requires_grad else x


def training_step(model, x):
    """One step as CS336 A2 trains XXL; returns what torch measured."""
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        with SavedStorages() as saved:
            out, forward_flops = count_flops(lambda: model(x))
        loss = out.sum()  # sum saves no tensor for backward, so the stack's saved bytes stand alone
    _, backward_flops = count_flops(loss.backward)
    params = list(model.parameters())
    grad_bytes = sum(p.grad.nbytes for p in params)
    opt.step()
    # AdamW also keeps a 0-dim 'step' tensor per parameter tensor; it is excluded on purpose:
    # the formula counts the per-parameter states m and v (recipe.optimizer_states = 2).
    optimizer_bytes = sum(opt.state[p][key].nbytes for p in params for key in ("exp_avg", "exp_avg_sq"))
    return {
        "params": sum(p.numel() for p in params),
        "master_weights": sum(p.nbytes for p in params),
        "grads": grad_bytes,
        "optimizer": optimizer_bytes,
        "saved_for_backward": saved.nbytes,
        "forward_flops": forward_flops,
        "backward_flops": backward_flops,
    }


@pytest.mark.parametrize("d, f, layers, batch_seq, activation, gated, input_grad", CASES)
def test_ffn_stack_matches_torch(d, f, layers, batch_seq, activation, gated, input_grad):
    torch.manual_seed(0)
    spec = FFNStack(name="ffn", d_model=d, d_ff=f, layers=layers, gated=gated,
                    activation=activation, input_requires_grad=input_grad)
    tokens = math.prod(batch_seq)
    measured = training_step(ffn_stack(spec), stack_input(batch_seq, d, input_grad))

    cost = evaluate_layout(spec, CS336, Layout(tokens=tokens))
    c = cost.heaviest.components
    assert Shape.of(spec).total_params() == cost.params
    predicted = {
        "params": cost.params,
        "master_weights": c["master_weights"],
        "grads": c["grads"],
        "optimizer": c["optimizer"],
        "saved_for_backward": c["activations"] + c["weight_copies"],
        "forward_flops": tokens * cost.flops.forward_per_token,
        "backward_flops": tokens * cost.flops.backward_per_token,
    }
    assert predicted == measured


def test_autocast_caches_the_cast_of_a_leaf_input():
    """torch alone: an fp32 leaf input that requires grad is cast to bf16 once, not once per matmul.

    autocast caches casts of fp32 leaves that require grad (meant for weights), so the gate and up
    matmuls of a gated first block share one bf16 copy of x: 2 B x T x D fewer saved bytes than
    with a non-leaf input (the stack's real situation, which the table above measures).
    """
    torch.manual_seed(0)
    d, f, layers, batch_seq = 64, 208, 3, (2, 5)
    spec = FFNStack(name="ffn", d_model=d, d_ff=f, layers=layers, gated=True, input_requires_grad=True)
    model = ffn_stack(spec)
    leaf = torch.randn(*batch_seq, d, requires_grad=True)
    saved = {}
    for kind, x in (("leaf", leaf), ("non-leaf", leaf.clone())):
        with torch.autocast("cpu", dtype=torch.bfloat16), SavedStorages() as s:
            model(x)
        saved[kind] = s.nbytes
    assert saved["non-leaf"] - saved["leaf"] == 2 * 10 * 64  # bf16 bytes x T x D: one copy of x


def test_xxl_closed_form():
    """CS336 A2 communication_accounting (a), by hand (shared/reference/conventions.md)."""
    d, f, layers = 16384, 53248, 126
    assert 2 * d * f * layers == 219_848_638_464  # the hand arithmetic itself: P = 2 D F L
    xxl = FFNStack(name="xxl", d_model=d, d_ff=f, layers=layers)
    tokens = 4096
    cost = evaluate_layout(xxl, CS336, Layout(tokens=tokens))
    c = cost.heaviest.components
    assert cost.params == 219_848_638_464
    # 16 B/param = fp32 master 4 + fp32 grads 4 + AdamW m, v fp32 4 + 4
    assert c["master_weights"] + c["grads"] + c["optimizer"] == 3_517_578_215_424
    assert cost.heaviest.stage.activation_bytes_per_token == 17_547_264  # bf16 2 B x (D + F) x L
    assert c["activations"] == 17_547_264 * tokens
