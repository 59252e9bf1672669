"""Bytes one Llama block saves for backward in real torch (bf16, CPU) against the activation formula, exact.

Source of the prediction: costmodel/cost/shape.py ``layer_activation_bytes_per_token`` (recompute
"none") and ``input_bytes_per_token`` (recompute "full"), built from costmodel/formulas/activations.py
(outside_tp, inside_tp, attention_core, layer_input). No TP, no SP; 2 = bf16 activation bytes.

What is measured: ``torch.autograd.graph.saved_tensors_hooks`` around the block's forward record every
tensor autograd saves; each distinct storage counts once (key ``untyped_storage().data_ptr()``, size
``untyped_storage().nbytes()``), so views of one tensor saved by two ops count once. Left out:
the parameters' storages (weights, not activations) and the RoPE cos/sin tables (per-model constants
built once outside the block and passed in; the two muls of RoPE save them).

The block (tests/torch_llama.py), bf16 parameters and input, no autocast:
x -> RMSNorm -> q, k, v (GQA) -> RoPE on q, k -> causal attention -> o -> + x -> RMSNorm ->
down(silu(gate) * up) -> + residual.

* RMSNorm is a ``torch.autograd.Function`` that saves (x, weight, rstd_fp32), as fused kernels do
  (Apex, Transformer Engine, Liger, torch's fused CUDA path); this is what the formula models
  (norm input in the activation dtype + 4 B of fp32 rstd per token, Layout.norm_stats). torch's
  eager ``F.rms_norm`` on CPU saves fp32 copies instead: pinned in test_eager_rms_norm_saves_fp32_copies.
* flash=True: ``F.scaled_dot_product_attention(is_causal=True, enable_gqa=True)``; the CPU kernel
  saves q, k (kv heads), v (kv heads), the output and the fp32 logsumexp.
* flash=False: explicit q k^T, additive causal mask (adding saves nothing), bf16 softmax (saves its
  output), @ v. GQA groups the g = a / a_kv query heads of one KV head into the matmul's rows, so K and
  V are saved at a_kv heads, as the formula counts; copying them up to a heads (HF eager ``repeat_kv``)
  saves more: pinned in test_repeated_kv_saves_more.
* Full recompute: ``torch.utils.checkpoint.checkpoint(block, x, cos, sin, use_reentrant=...)``. Both
  variants are visible to an outer hook in torch 2.13: reentrant saves the tensor inputs with
  ``ctx.save_for_backward`` in CheckpointFunction.forward and runs the block under no_grad;
  non-reentrant saves them with ``_CheckpointFrame.save_inputs`` (``_make_saved_tensor``, which runs
  the pack hooks active then, i.e. ours) before entering its own ``_checkpoint_hook``, whose pack
  returns an empty ``_Holder`` for every tensor the block saves (innermost hooks win), so nothing
  else is kept. Measured either way: x, cos, sin; x alone once the constants are left out.

Flash attention's output is counted once: the kernel allocates it as (b, s, a, d_h) and returns a
transposed view, so ``out.transpose(1, 2).reshape(b, s, a d_h)`` is a view and the o projection saves
the tensor SDPA saved (test_flash_output_is_the_o_input). This test first found the formula counting it
twice (2 a d_h B per token too many); the formula's flash core is now the fp32 log-sum-exp alone.
"""

import pytest

pytest.importorskip("torch", reason="the PyTorch cross-checks need torch: pip install torch==2.13.0 (the README's test command)")
import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint
from torch_llama import LlamaBlock, RMSNormFn, rope_tables, storage_breakdown, storage_bytes
from torch_models import SavedStorages

from costmodel.specs.layout import Layout
from costmodel.specs.model import Transformer
import costs

# h != a d_h, a != a_kv (real GQA), s != d_h: every term differs from the others and none is zero
H, FFN, HEADS, KV_HEADS, HEAD_DIM, VOCAB = 48, 176, 4, 2, 16, 100
BATCH, SEQ = 2, 12
TOKENS = BATCH * SEQ
ACT_BYTES = 2  # bf16

CASES = [  # (case, flash, recompute, use_reentrant, marks); prediction source in the module docstring
    ("flash-none", True, "none", None, ()),
    ("math-none", False, "none", None, ()),
    ("flash-full-reentrant", True, "full", True, ()),
    ("flash-full-nonreentrant", True, "full", False, ()),
    ("math-full-reentrant", False, "full", True, ()),
    ("math-full-nonreentrant", False, "full", False, ()),
]


def spec(block="sequential"):
    return Transformer(name="tiny", hidden=H, ffn_hidden=FFN, layers=1, heads=HEADS, kv_heads=KV_HEADS,
                       head_dim=HEAD_DIM, vocab=VOCAB, seq_len=SEQ, block=block)


def block_and_inputs(flash, gqa="grouped", kind="sequential"):
    torch.manual_seed(0)
    block = LlamaBlock(H, FFN, HEADS, KV_HEADS, HEAD_DIM, flash=flash, gqa=gqa, block=kind).to(torch.bfloat16)
    with torch.no_grad():  # norm weights away from 1 so their gradients matter
        for norm in (block.norm1, block.norm2):
            if norm is not None:
                norm.uniform_(0.5, 1.5)
    cos, sin = rope_tables(SEQ, HEAD_DIM, torch.bfloat16)
    x = torch.randn(BATCH, SEQ, H, dtype=torch.bfloat16, requires_grad=True)
    return block, x, cos, sin


def measure(block, x, cos, sin, recompute="none", use_reentrant=None):
    """(kept bytes, {storage label: bytes}, block output) of one forward, constants and weights left out."""
    names = {"cos": cos, "sin": sin}
    with SavedStorages() as saved:
        if recompute == "full":
            out = checkpoint(block, x, cos, sin, use_reentrant=use_reentrant)
            names["x"] = x
        else:
            out = block(x, cos, sin, trace=names)
    exclude = [cos, sin, *block.parameters()]
    return storage_bytes(saved, exclude), storage_breakdown(saved, names, exclude), out


@pytest.mark.parametrize("kind", ["sequential", "parallel", "parallel-two-norms"])
@pytest.mark.parametrize("flash, recompute, use_reentrant",
                         [pytest.param(f, r, u, id=c, marks=m) for c, f, r, u, m in CASES])
def test_saved_bytes_match_formula(flash, recompute, use_reentrant, kind):
    """Parallel blocks (x + attn(n(x)) + mlp(n(x))) save one norm input, and with one norm one norm
    output and one rstd, for both halves; two norms of the same x save x once."""
    block, x, cos, sin = block_and_inputs(flash, kind=kind)
    kept, parts, out = measure(block, x, cos, sin, recompute, use_reentrant)

    out.float().sum().backward()  # sanity: the block trains
    assert torch.isfinite(x.grad).all() and all(torch.isfinite(p.grad).all() for p in block.parameters())

    layout = Layout(flash=flash, recompute=recompute)
    if recompute == "full":
        per_token = costs.input_bytes_per_token(spec(kind), ACT_BYTES, layout)
    else:
        per_token = costs.layer_bytes_per_token(spec(kind), ACT_BYTES, layout)
    assert kept == TOKENS * per_token, {k: v / TOKENS for k, v in parts.items()}  # per token, by storage


@pytest.mark.parametrize("flash", [True, False], ids=["flash", "math"])
def test_fused_swiglu_saves_its_input_only(flash):
    """Megatron-core's SwiGLUFunction (bias_activation_fusion) keeps [gate | up] and recomputes SiLU: the layer
    saves b_a F per token less than torch's silu(gate) * up, which keeps SiLU(gate) too (the megatron profile's
    fused_swiglu); both blocks compute the same output and input gradient."""
    torch_block, x, cos, sin = block_and_inputs(flash)
    fused = LlamaBlock(H, FFN, HEADS, KV_HEADS, HEAD_DIM, flash=flash, swiglu="fused").to(torch.bfloat16)
    fused.load_state_dict({**torch_block.state_dict(), "fc1": torch.cat((torch_block.gate.weight,
                                                                         torch_block.up.weight)).detach()})
    kept_torch, _, out_torch = measure(torch_block, x, cos, sin)
    kept, parts, out = measure(fused, x, cos, sin)
    assert torch.equal(out, out_torch)
    assert kept == TOKENS * costs.layer_bytes_per_token(spec(), ACT_BYTES, Layout(flash=flash), fused_swiglu=True), \
        {k: v / TOKENS for k, v in parts.items()}
    assert kept_torch - kept == TOKENS * ACT_BYTES * FFN
    grads = [torch.autograd.grad(o.float().sum(), x)[0] for o in (out_torch, out)]
    assert torch.allclose(grads[0].float(), grads[1].float(), atol=2e-2, rtol=2e-2)


@pytest.mark.parametrize("flash", [True, False], ids=["flash", "math"])
def test_qk_norm_saves_each_heads_input_and_statistic(flash):
    """Qwen3's per-head norms of the queries and keys save their input (the projections' output) and an fp32 rstd
    per head: (a + a_kv)(b_a d_h + 4) bytes per token beyond the same block without them, as the formula counts."""
    plain, x, cos, sin = block_and_inputs(flash)
    normed = LlamaBlock(H, FFN, HEADS, KV_HEADS, HEAD_DIM, flash=flash, qk_norm=True).to(torch.bfloat16)
    normed.load_state_dict({**plain.state_dict(), "q_norm": torch.ones(HEAD_DIM), "k_norm": torch.ones(HEAD_DIM)})
    with torch.no_grad():
        normed.q_norm.uniform_(0.5, 1.5)
        normed.k_norm.uniform_(0.5, 1.5)
    kept_plain, _, _ = measure(plain, x, cos, sin)
    kept, parts, out = measure(normed, x, cos, sin)
    out.float().sum().backward()
    assert torch.isfinite(normed.q_norm.grad).all() and torch.isfinite(x.grad).all()
    assert kept - kept_plain == TOKENS * (HEADS + KV_HEADS) * (ACT_BYTES * HEAD_DIM + 4)
    qwen = spec().model_copy(update={"qk_norm": True})
    assert kept == TOKENS * costs.layer_bytes_per_token(qwen, ACT_BYTES, Layout(flash=flash)), \
        {k: v / TOKENS for k, v in parts.items()}


def test_eager_attention_saves_what_the_formula_counts():
    """Hugging Face's eager attention (K, V repeated to all heads, fp32 softmax cast back), measured:
    equal to the formula with --attention eager, and more than grouped math attention by
    4 a s + 2 b d_h (a - a_kv) per token."""
    block, x, cos, sin = block_and_inputs(flash=False, gqa="eager")
    kept, parts, _ = measure(block, x, cos, sin)
    layout = Layout(flash=False, eager=True)
    assert kept == TOKENS * costs.layer_bytes_per_token(spec(), ACT_BYTES, layout), {k: v / TOKENS for k, v in parts.items()}
    math, _, _ = measure(*block_and_inputs(flash=False))
    assert kept - math == TOKENS * (4 * HEADS * SEQ + 2 * ACT_BYTES * HEAD_DIM * (HEADS - KV_HEADS))
    selective = [costs.layer_bytes_per_token(spec(), ACT_BYTES, Layout(flash=False, eager=e, recompute="selective"))
                 for e in (False, True)]
    assert selective[0] == selective[1]  # selective recomputation drops the whole core, repeated K, V included


def test_flash_output_is_the_o_input():
    """torch alone: the output SDPA saves and the o projection's saved input are one storage.

    So the flash core adds only the fp32 log-sum-exp to what the TP region already counts.
    """
    block, x, cos, sin = block_and_inputs(flash=True)
    _, parts, _ = measure(block, x, cos, sin)
    assert parts["attn_out+o_in"] == TOKENS * 2 * HEADS * HEAD_DIM  # bf16 (b, s, a, d_h), counted once
    assert "o_in" not in parts and "attn_out" not in parts


def test_repeated_kv_saves_more():
    """torch alone: math attention with K, V repeated to a heads (HF eager repeat_kv) keeps
    2 B x 2 x d_h (a - a_kv) more per token than the grouped matmul: the two repeated copies are
    saved by the matmuls instead of K, V at a_kv heads."""
    kept = {}
    for gqa in ("grouped", "repeat"):
        kept[gqa], _, _ = measure(*block_and_inputs(flash=False, gqa=gqa))
    assert kept["repeat"] - kept["grouped"] == TOKENS * 2 * 2 * HEAD_DIM * (HEADS - KV_HEADS)  # = 128 B/token


def test_math_attention_matches_sdpa():
    """The builders compute the same block: grouped and repeated math attention equal SDPA's.

    Tolerance: bf16 (8-bit mantissa) with different summation orders; atol/rtol 2e-2.
    """
    outs = []
    for flash, gqa in ((True, "grouped"), (False, "grouped"), (False, "repeat")):
        block, x, cos, sin = block_and_inputs(flash, gqa)
        outs.append(block(x, cos, sin).float())
    torch.testing.assert_close(outs[1], outs[0], atol=2e-2, rtol=2e-2)
    torch.testing.assert_close(outs[2], outs[0], atol=2e-2, rtol=2e-2)


def test_rms_norm_function_is_correct():
    """RMSNormFn: forward equals F.rms_norm and the backward passes gradcheck (fp64)."""
    torch.manual_seed(0)
    x = torch.randn(3, 5, 8, dtype=torch.float64, requires_grad=True)
    w = torch.rand(8, dtype=torch.float64).add(0.5).requires_grad_()
    torch.testing.assert_close(RMSNormFn.apply(x, w, 1e-6), F.rms_norm(x, (8,), w, 1e-6))
    assert torch.autograd.gradcheck(RMSNormFn.apply, (x, w, 1e-6))


def test_rms_norm_function_saves_like_a_fused_kernel():
    """RMSNormFn on bf16 keeps the input (2h B) and the fp32 rstd (4 B) per token, weight left out."""
    torch.manual_seed(0)
    x = torch.randn(BATCH, SEQ, H, dtype=torch.bfloat16, requires_grad=True)
    w = torch.nn.Parameter(torch.ones(H, dtype=torch.bfloat16))
    with SavedStorages() as saved:
        RMSNormFn.apply(x, w, 1e-6)
    assert storage_bytes(saved, [w]) == TOKENS * (2 * H + 4)


def test_eager_rms_norm_saves_fp32_copies():
    """Informational, torch 2.13 CPU: eager F.rms_norm on bf16 is a composite that upcasts.

    It saves x in fp32 (for pow: 4h B), rstd in fp32 (for the x * rstd mul: 4 B), x * rstd in fp32
    (for the mul by the weight: 4h B) and the bf16 weight (a parameter, left out): 8h + 4 B per token,
    not the fused kernel's 2h + 4. A change here means torch's eager norm changed.
    """
    torch.manual_seed(0)
    x = torch.randn(BATCH, SEQ, H, dtype=torch.bfloat16, requires_grad=True)
    w = torch.nn.Parameter(torch.ones(H, dtype=torch.bfloat16))
    with SavedStorages() as saved:
        F.rms_norm(x, (H,), w, 1e-6)
    assert storage_bytes(saved, [w]) == TOKENS * (4 * H + 4 * H + 4)  # = 24 x 388 = 9,312 B


def test_model_end_saves_what_the_output_term_counts():
    """The last stage's extras, measured: final RMSNorm (x, rstd), the output matmul's input, the fp32
    logits' log-softmax output; the loss's int64 targets (8 B/token) and its scalar total weight (4 B)
    are measured and named here, and not counted by the formula (token ids, like the first stage's)."""
    from costmodel.cost.shape import Shape

    torch.manual_seed(0)
    x = torch.randn(BATCH, SEQ, H, dtype=torch.bfloat16, requires_grad=True)
    norm_weight = torch.nn.Parameter(torch.ones(H, dtype=torch.bfloat16))
    head = torch.nn.Parameter(torch.randn(VOCAB, H, dtype=torch.bfloat16) / H**0.5)
    targets = torch.randint(0, VOCAB, (BATCH * SEQ,))
    with SavedStorages() as saved:
        h = RMSNormFn.apply(x, norm_weight, 1e-6)
        logits = (h @ head.t()).float()
        F.cross_entropy(logits.view(-1, VOCAB), targets)
    measured = storage_bytes(saved, exclude=(norm_weight, head, targets))
    spec = Transformer(name="end", hidden=H, ffn_hidden=FFN, layers=1, heads=HEADS, kv_heads=KV_HEADS,
                       head_dim=HEAD_DIM, vocab=VOCAB, seq_len=SEQ)
    per_token = Shape.of(spec).last_stage_extra_bytes_per_token(act_bytes=ACT_BYTES, tp=1)
    scalar = 4  # nll_loss's total_weight (fp32, 0-d)
    assert measured == per_token * TOKENS + scalar
    assert storage_bytes(saved, exclude=(norm_weight, head)) - measured == 8 * TOKENS  # the int64 targets


@pytest.mark.parametrize("use_reentrant", [True, False])
def test_recompute_flops_by_checkpoint_flavour(use_reentrant):
    """FlopCounterMode over forward + backward of one block (math attention, so every matmul is
    counted): full checkpointing adds the layer's forward again when reentrant, and all of it but the
    last matmul (down: 2 F D per token) when non-reentrant, which stops early. The formula's
    recomputed FLOPs for --checkpoint reentrant|non-reentrant equal the difference."""
    from torch.utils.flop_counter import FlopCounterMode

    from costmodel.cost.flops import recompute_flops_per_token
    from costmodel.cost.point import Point
    from costmodel.cost.shape import Shape

    def flops(checkpointed: bool) -> int:
        block, x, cos, sin = block_and_inputs(flash=False)
        with FlopCounterMode(display=False) as counter:
            out = checkpoint(block, x, cos, sin, use_reentrant=use_reentrant) if checkpointed else block(x, cos, sin)
            out.float().sum().backward()
        return counter.get_total_flops()

    extra = flops(True) - flops(False)
    flavour = "reentrant" if use_reentrant else "non-reentrant"
    per_token = recompute_flops_per_token(Shape.of(spec()), Point(recompute="full", checkpoint=flavour))
    assert extra == TOKENS * per_token


@pytest.mark.parametrize("recompute, autocast", [("full", False), ("op", False), ("full", True)],
                         ids=["full", "op", "full-autocast"])
def test_a_recomputed_layer_saves_again_what_it_did_not_keep(recompute, autocast):
    """During a checkpointed layer's backward its rerun forward saves its tensors again: live bytes grow, from the
    rerun's start to its end (less its output, which backward drops), by what the layer saves without
    recomputation less what the policy kept (full: the input; torchtitan's op policy, tests/torch_sac.py: its kept
    matmul and attention outputs), the memory term cost4d adds (formulas/activations.rerun_layer_bytes_per_token,
    cost/stage.py). Measured with the rerun going to the layer's end (torchtitan's early_stop=False); torch's
    early stop ends it after the last tensor backward needs, no more. Under autocast (fp32 block, bf16 matmuls) the
    rerun also casts the layer's weights again, and its matmuls save the copies (Stage.rerun_copy_bytes)."""
    from live_bytes import LiveBytes
    from torch_sac import context_fn

    from costmodel.cost.point import Point
    from costmodel.cost.shape import Shape
    from costmodel.cost.stage import stage
    from costmodel.parallel.pipeline import StageRole
    from costmodel.specs.load import load_recipe

    block, x, cos, sin = block_and_inputs(flash=True)
    if autocast:  # the model in fp32, its matmuls in bf16
        block, x = block.float(), x.detach().float().requires_grad_()
        cos, sin = cos.float(), sin.float()
    growth = []

    def run(x, cos, sin):
        start = live.live
        out = block(x, cos, sin)
        growth.append(live.live - start - out.untyped_storage().nbytes())
        return out

    options = dict(context_fn=context_fn) if recompute == "op" else {}
    with LiveBytes() as live:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            out = checkpoint(run, x, cos, sin, use_reentrant=False, early_stop=False, preserve_rng_state=False,
                             **options)
        out.float().sum().backward()
    middle = StageRole(0, 0, 0)  # a stage with neither end: the layers alone
    held = stage(Shape.of(spec()), load_recipe("cs336" if autocast else "megatron"),
                 Point(recompute=recompute, tokens=TOKENS), middle)
    assert held.autocast is autocast and (held.rerun_copy_bytes > 0) is autocast
    assert len(growth) == 2 and growth[1] == TOKENS * held.rerun_bytes_per_token + held.rerun_copy_bytes > 0, growth
