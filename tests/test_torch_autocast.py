"""Whole decoders in real torch under both recipes against cost4d, exact (issue 16).

The expected side is torch: a Llama-family decoder (tests/torch_autocast.py) built from each spec,
one forward and backward on CPU, measured with ``saved_tensors_hooks`` (each storage once) and
``FlopCounterMode``. Recipes: ``cs336`` (fp32 parameters, ``torch.autocast("cpu", bfloat16)``) and
``megatron`` (bf16 parameters, no autocast). The cost4d side is ``evaluate_layout(spec, RECIPES[r],
Layout(tokens=T, recompute, flash, eager, checkpoint))`` on one device (pp = 1: the one stage is first
and last, so model ends are included):

* parameters by part: ``Shape.param_parts()`` (costmodel/formulas/params.py);
* saved bytes: ``heaviest.stage.activation_bytes_per_token`` x T (costmodel/cost/stage.py: L layers,
  recomputed ones keeping their input, plus the last stage's final norm, logits input and fp32
  log-softmax). Measured: every saved storage less the parameters, the token ids, the RoPE tables
  (per-model constants) and the bf16 weight copies (their own component); the loss's int64 targets
  and 0-d fp32 total weight are recorded apart (nll_loss), not per token, as the existing tests do;
* weight copies: ``heaviest.components["weight_copies"]`` (costmodel/cost/memory.py). Measured: the
  saved storages that hold, value for value, a bf16 cast of a parameter (autocast's cached casts).
  Under megatron autograd saves the bf16 parameters themselves: no copy, 0 on both sides;
* FLOPs: ``flops.forward_per_token`` x T forward, ``(backward_per_token + recompute_per_token)`` x T
  backward (recomputation runs inside backward). torch's CPU flash kernel is invisible to
  FlopCounterMode (pinned below), so with flash the attention core's 4 a s d_h per layer and token
  (Q K^T and A V over the full s x s, forward; twice that backward) is taken off the prediction.

What torch does under autocast that the spec must model (pinned torch-alone below): the embedding's
output and the residual adds are fp32, so each RMSNorm saves a 4-byte input; each consumer of an fp32
tensor casts it to bf16 itself (q, k, v: 3 copies; gate, up: 2; a fused projection: 1); autocast
copies only the matmul weights (not norm weights, biases, or an untied embedding table), and under full
recomputation only the output layer's copy is saved. A failing case prints measured and predicted
bytes per token and the measured storages by label (summed over layers, 'L*.').
"""

from __future__ import annotations

import functools

import pytest

pytest.importorskip("torch", reason="the PyTorch cross-checks need torch: pip install torch==2.13.0 (the README's test command)")
import torch
import torch.nn.functional as F
from torch_autocast import Decoder, train_step
from torch_models import SavedStorages

from costmodel.cost.evaluate import evaluate_layout
from costmodel.cost.shape import Shape
from costmodel.specs.layout import Layout
from costmodel.specs.model import Transformer
from costmodel.specs.recipe import RECIPES

BATCH = 2
CONFIGS = {  # name -> Transformer fields (seq_len is the measured sequence); every width distinct
    # Llama-3 style GQA, untied
    "gqa": dict(hidden=64, ffn_hidden=160, layers=2, heads=8, kv_heads=2, vocab=101, seq_len=12),
    # Qwen2 style: multi-query, q/k/v biases only, tied embeddings
    "mqa-tied-qkv-bias": dict(hidden=48, ffn_hidden=136, layers=2, heads=6, kv_heads=1, vocab=97, seq_len=10,
                              qkv_bias=True, tied_embeddings=True),
    # Mistral style: explicit head_dim (a d_h = 48 != h = 40), attention_bias on q, k, v and o, MHA
    "mha-head-dim-attention-bias": dict(hidden=40, ffn_hidden=112, layers=2, heads=4, kv_heads=4, head_dim=12,
                                        vocab=89, seq_len=9, attention_bias=True),
    # odd sizes: h = 72, 6 heads of 12, 3 KV heads, 3 layers, MLP biases, tied
    "odd-mlp-bias-tied": dict(hidden=72, ffn_hidden=200, layers=3, heads=6, kv_heads=3, vocab=113, seq_len=7,
                              mlp_bias=True, tied_embeddings=True),
    # every linear biased, GeLU MLP, MHA
    "mha-gelu-bias": dict(hidden=32, ffn_hidden=128, layers=2, heads=4, kv_heads=4, vocab=71, seq_len=11,
                          bias=True, mlp="gelu"),
}
FAST_CONFIG = "gqa"  # the quick loop: its flash cases and its math and eager without recompute; the others' flash
# without recompute; the rest is marked slow (about 0.1-1 s a case, a minute in all)
RECOMPUTE = [  # (id, recompute, use_reentrant)
    ("none", "none", True),
    ("selective-reentrant", "selective", True),  # Megatron's selective recompute (its CheckpointFunction)
    ("selective-nonreentrant", "selective", False),
    ("full-reentrant", "full", True),
    ("full-nonreentrant", "full", False),
]
IMPLS = ["flash", "math", "eager"]  # Layout.flash; grouped math attention; Layout.eager (HF eager)


def spec_of(config: str, **extra) -> Transformer:
    return Transformer(name=config, **CONFIGS[config], **extra)


def layout_of(config, impl, recompute, reentrant) -> Layout:
    tokens = BATCH * CONFIGS[config]["seq_len"]
    return Layout(tokens=tokens, recompute=recompute, flash=impl == "flash", eager=impl == "eager",
                  checkpoint="reentrant" if reentrant else "non-reentrant")


@functools.cache
def measured(config, recipe, impl, recompute, reentrant, flops=False, fused=False):
    return train_step(spec_of(config), recipe, impl=impl, recompute=recompute, reentrant=reentrant, batch=BATCH,
                      fused=fused, flops=flops)


def matrix(recipes=("cs336", "megatron"), impls=IMPLS):
    out = []
    for config in CONFIGS:
        for recipe in recipes:
            for impl in impls:
                for rid, recompute, reentrant in RECOMPUTE:
                    fast = (config == FAST_CONFIG and (impl == "flash" or recompute == "none")
                            or impl == "flash" and recompute == "none")
                    out.append(pytest.param(config, recipe, impl, recompute, reentrant,
                                            id=f"{config}-{recipe}-{impl}-{rid}",
                                            marks=() if fast else pytest.mark.slow))
    return out


def explain(m, measured_bytes, predicted_bytes, kind) -> str:
    """The failure message: measured and predicted per token, their difference, the storages by label."""
    t = m.tokens
    rows = "\n".join(f"    {b:10.2f}  {label}" for label, b in m.per_token(kind).items())
    return (f"\n  {kind}: measured {measured_bytes / t} B/token, predicted {predicted_bytes / t}, "
            f"measured - predicted = {(measured_bytes - predicted_bytes) / t} B/token (T = {t})\n{rows}")


@pytest.mark.parametrize("config", CONFIGS)
def test_params_by_part_match_torch(config):
    m = measured(config, "megatron", "flash", "none", True)
    assert Shape.of(spec_of(config)).param_parts() == m.params_by_part


@pytest.mark.parametrize("config, recipe, impl, recompute, reentrant", matrix())
def test_saved_bytes_match_torch(config, recipe, impl, recompute, reentrant):
    m = measured(config, recipe, impl, recompute, reentrant)
    cost = evaluate_layout(spec_of(config), RECIPES[recipe], layout_of(config, impl, recompute, reentrant))
    predicted = m.tokens * cost.heaviest.stage.activation_bytes_per_token
    assert m.activation_bytes == predicted, explain(m, m.activation_bytes, predicted, "activation")


@pytest.mark.parametrize("config, recipe, impl, recompute, reentrant", matrix(impls=("flash",)))
def test_weight_copies_match_torch(config, recipe, impl, recompute, reentrant):
    """Saved bf16 casts of parameters against the 'weight_copies' component (0 under megatron, whose
    bf16 parameters autograd saves themselves)."""
    m = measured(config, recipe, impl, recompute, reentrant)
    cost = evaluate_layout(spec_of(config), RECIPES[recipe], layout_of(config, impl, recompute, reentrant))
    predicted = cost.heaviest.components["weight_copies"]
    assert m.weight_copy_bytes == predicted, explain(m, m.weight_copy_bytes, predicted, "weight copy")


def flops_matrix():
    out = []
    for config in CONFIGS:
        for impl in IMPLS:
            for rid, recompute, reentrant in RECOMPUTE:
                fast = config == FAST_CONFIG and impl == "math" and rid in ("none", "full-nonreentrant")
                out.append(pytest.param(config, impl, recompute, reentrant, id=f"{config}-{impl}-{rid}",
                                        marks=() if fast else pytest.mark.slow))
    return out


@pytest.mark.parametrize("config, impl, recompute, reentrant", flops_matrix())
def test_flops_match_torch(config, impl, recompute, reentrant):
    """cs336 (autocast does not change what the matmuls count); flash: the core's FLOPs taken off.

    Recompute adds the recomputed forward to backward: the whole layer (full, reentrant), all but its
    last matmul (full, non-reentrant: early stop), the core's Q K^T and A V (selective)."""
    m = measured(config, "cs336", impl, recompute, reentrant, flops=True)
    spec = spec_of(config)
    f = evaluate_layout(spec, RECIPES["cs336"], layout_of(config, impl, recompute, reentrant)).flops
    core = 0  # forward FLOPs per token of one layer's attention core that FlopCounterMode cannot see
    if impl == "flash":
        core = 4 * spec.heads * spec.seq_len * spec.dim_per_head  # Q K^T and A V: 2 a s d_h each
    again = 0 if recompute == "none" else spec.layers  # cores run again in backward (selective or full)
    assert m.forward_flops == m.tokens * (f.forward_per_token - spec.layers * core)
    assert m.backward_flops == m.tokens * (f.backward_per_token + f.recompute_per_token
                                           - 2 * spec.layers * core - again * core)


FUSED_FIELD = "fused_projections"  # the Transformer option for one QKV and one gate-up matmul (issue 16)


@pytest.mark.parametrize("recipe", ["cs336", "megatron"])
@pytest.mark.parametrize("impl", ["flash", "math"])
def test_fused_projections_saved_bytes(recipe, impl):
    """One QKV and one gate-up projection (split by views): under autocast each casts the norm output once.

    Measured (torch 2.13 CPU): with flash, SDPA saves v, a view of the fused QKV output, so that whole
    storage stays saved, b_a (a + 2 a_kv) d_h per layer and token where unfused v is b_a a_kv d_h; math
    attention's bmm saves a re-laid copy of v instead, and the QKV output is freed. The gate-up output is
    saved whole either way (silu saves gate, the product saves up: views of the one storage)."""
    m = measured("gqa", recipe, impl, "none", True, fused=True)
    try:
        spec = spec_of("gqa", **{FUSED_FIELD: True})
    except ValueError as error:
        pytest.fail(f"no Transformer option {FUSED_FIELD!r} ({type(error).__name__}); measured:"
                    + explain(m, m.activation_bytes, 0, "activation"))
    cost = evaluate_layout(spec, RECIPES[recipe], layout_of("gqa", impl, "none", True))
    predicted = m.tokens * cost.heaviest.stage.activation_bytes_per_token
    assert m.activation_bytes == predicted, explain(m, m.activation_bytes, predicted, "activation")
    assert m.weight_copy_bytes == cost.heaviest.components["weight_copies"], \
        explain(m, m.weight_copy_bytes, cost.heaviest.components["weight_copies"], "weight copy")


# ---------------------------------------------------------------- torch alone: the rules the spec models

H, T = 24, 10


def test_autocast_residual_stream_is_fp32():
    """An fp32 embedding's output stays fp32 under autocast (embedding is on no autocast list), and
    adding a bf16 matmul output to it promotes to fp32: the residual stream is fp32 throughout."""
    emb, lin = torch.nn.Embedding(7, H), torch.nn.Linear(H, H, bias=False)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        x = emb(torch.randint(7, (1, T)))
        y = lin(x)
        assert (x.dtype, y.dtype, (x + y).dtype) == (torch.float32, torch.bfloat16, torch.float32)


@pytest.mark.parametrize("consumers, fused", [(3, False), (2, False), (1, True)])
def test_autocast_casts_once_per_consumer(consumers, fused):
    """A non-leaf fp32 tensor read by n linears is cast to bf16 n times and each cast is saved
    (autocast caches only leaves that require grad); one fused linear casts it once. Bias copies
    are not saved (addmm saves its two matrix operands only)."""
    torch.manual_seed(0)
    x = torch.randn(1, T, H, requires_grad=True).clone()  # non-leaf, like a norm's output
    linears = [torch.nn.Linear(H, 16, bias=True) for _ in range(1 if fused else consumers)]
    with torch.autocast("cpu", dtype=torch.bfloat16), SavedStorages() as saved:
        for lin in linears:
            lin(x)
    weights = sum(2 * lin.weight.numel() for lin in linears)  # their saved bf16 copies
    assert saved.nbytes - weights == len(linears) * 2 * T * H


def test_autocast_copies_matmul_weights_only():
    """Saved bf16 copies under autocast: the matmul weights; not the norm weights (RMSNormFn is not
    cast), nor biases, nor the embedding table when untied; the table when tied (the output layer reads it)."""
    for tied in (False, True):
        spec = Transformer(name="c", hidden=H, ffn_hidden=40, layers=1, heads=4, kv_heads=2, vocab=31, seq_len=T,
                    attention_bias=True, mlp_bias=True, tied_embeddings=tied)
        m = train_step(spec, "cs336", impl="math", batch=1)
        model = Decoder(spec)
        matmul = sum(p.numel() for n, p in model.named_parameters()
                     if n.endswith(".weight") and "norm" not in n and (tied or not n.startswith("embed")))
        assert m.weight_copy_bytes == 2 * matmul


@pytest.mark.parametrize("use_reentrant", [True, False])
def test_full_recompute_keeps_only_the_output_copy(use_reentrant):
    """Checkpointed blocks save no weight copy (reentrant: under no_grad; non-reentrant: holders only);
    the output layer outside them saves its bf16 copy of the V x h matrix."""
    spec = spec_of("gqa")
    m = train_step(spec, "cs336", impl="flash", recompute="full", reentrant=use_reentrant, batch=1)
    assert m.weight_copy_bytes == 2 * spec.vocab * spec.hidden


def test_flash_kernel_is_invisible_to_the_flop_counter():
    """torch 2.13 CPU: FlopCounterMode counts nothing for F.scaled_dot_product_attention's CPU kernel
    (forward or backward); the flash FLOP cases above take the core off for this reason."""
    from torch.utils.flop_counter import FlopCounterMode

    q = torch.randn(1, 4, T, 8, requires_grad=True)
    kv = torch.randn(1, 2, T, 8, requires_grad=True)
    with FlopCounterMode(display=False) as counter:
        F.scaled_dot_product_attention(q, kv, kv, is_causal=True, enable_gqa=True).sum().backward()
    assert counter.get_total_flops() == 0


def test_loss_saves_targets_and_a_scalar():
    """nll_loss's own saved storages (the int64 targets, 8 B/token, and the 0-d fp32 total weight, 4 B
    per step) are kept apart from the per-token count."""
    m = measured("gqa", "megatron", "flash", "none", True)
    assert m.loss_bytes == 8 * m.tokens + 4


def test_labels_cover_every_storage():
    """The harness names every saved storage under autocast (no 'unnamed' rows), so a failure's
    breakdown attributes each byte."""
    m = measured("gqa", "cs336", "math", "none", True)
    assert not [label for label in m.per_token("activation") if label.startswith("unnamed")], m.per_token("activation")
