"""The memory-bound bytes of torchtitan's eager Llama code, counted kernel by kernel in real torch, against
cost4d's eager formulas (costmodel/formulas/memory_bound.py, wired in costmodel/cost/memory_bound.py).

tests/torch_eager.py writes the block out and counts, with a dispatch mode, what each non-matmul kernel reads
and writes in one forward and backward (and a recomputed forward). Exact: the same integers.
"""

import pytest

pytest.importorskip("torch", reason="the PyTorch cross-checks need torch: pip install torch==2.13.0 (the README's test command)")
import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint
from torch_eager import EagerBlock, HBMBytes, rope_angles

from costmodel.formulas import memory_bound as mb

B = 2  # bf16 bytes
DIM, HIDDEN, BATCH, SEQ = 64, 96, 2, 16
TOKENS = BATCH * SEQ


def measured(heads, kv_heads, recompute=False):
    torch.manual_seed(0)
    block = EagerBlock(DIM, heads, kv_heads, HIDDEN)
    freqs = rope_angles(SEQ, DIM // heads)
    x = torch.randn(BATCH, SEQ, DIM, dtype=torch.bfloat16, requires_grad=True)
    grad = torch.randn(BATCH, SEQ, DIM, dtype=torch.bfloat16)
    with HBMBytes(constants=[freqs]) as count:
        y = checkpoint(block, x, freqs, use_reentrant=True) if recompute else block(x, freqs)
        y.backward(grad)
    return count.total / TOKENS, count.by_op


def predicted(heads, kv_heads, reruns=0):
    """The block's terms per token: two residual adds, RoPE in complex fp32, GQA's repeats, the q/k/v and
    gate/up input-gradient sums, SwiGLU in two kernels (no norms: the block has none)."""
    q, k = DIM, kv_heads * DIM // heads
    out = 2 * mb.residual_add_bytes(width=DIM, act_bytes=B, reruns=reruns)
    out += mb.rotary_complex_bytes(q_width=q, k_width=k, act_bytes=B, reruns=reruns)
    if kv_heads < heads:
        out += mb.repeat_kv_bytes(q_width=q, k_width=k, act_bytes=B, reruns=reruns, copied=int(kv_heads > 1))
    out += mb.input_grad_sum_bytes(width=DIM, consumers=3, act_bytes=B)
    out += mb.glu_eager_bytes(mlp_width=HIDDEN, act_bytes=B, reruns=reruns)
    out += mb.input_grad_sum_bytes(width=DIM, consumers=2, act_bytes=B)
    return out


@pytest.mark.parametrize("heads, kv_heads", [(8, 2), (8, 8), (4, 1)])
def test_eager_block_moves_what_the_formulas_count(heads, kv_heads):
    per_token, by_op = measured(heads, kv_heads)
    assert per_token == predicted(heads, kv_heads), by_op


@pytest.mark.parametrize("heads, kv_heads", [(8, 2), (8, 8), (4, 1)])
def test_a_recomputed_forward_moves_its_forward_again(heads, kv_heads):
    per_token, by_op = measured(heads, kv_heads, recompute=True)
    assert per_token == predicted(heads, kv_heads, reruns=1), by_op


def test_by_hand_llama3_8b_ratios():
    """The eager ops' bytes per element, by hand: RoPE 20 B (b = 2) each way, SwiGLU 14 B per F element."""
    assert mb.rotary_complex_bytes(q_width=1, k_width=0, act_bytes=2, reruns=0) == 40
    assert mb.glu_eager_bytes(mlp_width=1, act_bytes=2, reruns=0) == 28
    assert mb.repeat_kv_bytes(q_width=4, k_width=1, act_bytes=2, reruns=0) == 40
    assert mb.repeat_kv_bytes(q_width=4, k_width=1, act_bytes=2, reruns=0, copied=0) == 20  # one KV head: a view
    assert mb.cross_entropy_upcast_bytes(vocab=1, act_bytes=2) == 36


@pytest.mark.parametrize("vocab", [1000, 4097])
def test_loss_on_an_fp32_copy(vocab):
    """torchtitan's loss: cross_entropy(pred.flatten(0, 1).float(), labels) (components/loss.py)."""
    torch.manual_seed(0)
    logits = torch.randn(TOKENS, vocab, dtype=torch.bfloat16, requires_grad=True)
    labels = torch.randint(0, vocab, (TOKENS,))
    with HBMBytes() as count:
        F.cross_entropy(logits.float(), labels).backward()
    assert count.total == TOKENS * mb.cross_entropy_upcast_bytes(vocab=vocab, act_bytes=B), count.by_op


def test_llama3_8b_eager_wiring_by_hand():
    """cost/memory_bound.py on Llama 3 8B (D 4096, 32/8 heads of 128, F 14336, V 128256), bf16, one device: eager
    adds RoPE 40 - 8 B on q + k = 5120, repeats 2 x 2 x 5120 x 2, the q/k/v and gate/up gradient sums 3 x 2 x 4096
    x 2 + 3 x 4096 x 2, SwiGLU 28 - 16 B on 14336, torch's norms' second backward kernel 2 x 4096 x 2 each (two a
    layer, one at the end); the loss on the fp32 copy takes 36 B per logit, not 52."""
    from costmodel.cost import memory_bound as wiring
    from costmodel.cost.point import Point
    from costmodel.cost.shape import Shape
    from costmodel.specs.load import load_model

    shape, point = Shape.of(load_model("llama3-8b")), Point(tokens=8192)
    layer = wiring.layer_bytes(shape, point, 2, "eager") - wiring.layer_bytes(shape, point, 2, "fused")
    assert layer == 32 * 5120 + 40960 + 49152 + 24576 + 12 * 14336 + 2 * 16384
    ends = wiring.ends_bytes(shape, point, 2, "eager") - wiring.ends_bytes(shape, point, 2, "fused")
    assert ends == (36 - 52) * 128256 + 16384
    tp8 = Point(tokens=8192, tp=8, sp=True)  # one KV head a rank: the repeat is a view, only its gradient sums
    layer8 = wiring.layer_bytes(shape, tp8, 2, "eager") - wiring.layer_bytes(shape, tp8, 2, "fused")
    assert layer8 == 32 * 640 + 2 * 640 * 2 + 49152 + 24576 + 12 * 14336 / 8 + 2 * 16384 / 8  # SP: norms on D / 8


@pytest.mark.parametrize("recompute", ["none", "every:4"])
def test_eager_step_in_letters_evaluates_to_the_numbers(recompute):
    """The same wiring with letters for the shape and layout (cost/symbolic.py): GQA's switch and every:K's
    recomputed layers stay expressions, and evaluate to the numeric step."""
    from costmodel.cost.evaluate import evaluate_layout
    from costmodel.cost.symbolic import at, formula
    from costmodel.specs.layout import Layout
    from costmodel.specs.load import load_hardware, load_model, load_recipe

    model, recipe, hardware = load_model("llama3-8b"), load_recipe("megatron"), load_hardware("h100-sxm")
    kind, _, every = recompute.partition(":")
    layout = Layout(fsdp=8, tp=2, sp=True, tokens=8192, recompute=kind,
                    **({"recompute_layers": int(every)} if every else {}))
    lettered = formula(model, recipe, layout, hardware, kernels="eager")
    numeric = evaluate_layout(model, recipe, layout, hardware, kernels="eager")
    assert at(lettered.cost.step.elementwise_s, lettered.values) == pytest.approx(numeric.step.elementwise_s, rel=1e-9)
