"""Multi-head latent attention (MLA) in real torch against cost4d: parameters, FLOPs, saved bytes, exact.

The torch side is tests/torch_mla.py (transformers' DeepseekV3Attention, written out; the spec supplies only
the shape). Predictions: costmodel/cost/shape.py ``attention_params``, ``param_parts``,
``attention_forward_flops_per_token``, ``attention_score_flops_per_token``, ``forward_flops_per_token``,
``backward_flops_per_token`` and ``layer_activation_bytes_per_token`` (recompute none, no TP, no SP, fused
norm statistics), built from costmodel/formulas/{params,flops,activations}.py (mla_*).

Saved bytes are measured as in tests/test_torch_llama_activations.py: saved_tensors_hooks record every
tensor autograd saves during one layer's forward, each distinct storage counted once at its full size;
left out are the parameters and the RoPE cos/sin tables (per-model constants passed in).

Finding: with flash attention, transformers' MLA keeps 2 a d_h B per token (b_a = 2) more than the formula.
v is a ``split`` view of the kv_b (W^UK, W^UV) output, and the attention saves v as given, so the whole
a (d_h + d_v) storage stays alive, not a d_v. Megatron-core copies it out (``value = value.contiguous()``),
which saves exactly the formula (test_contiguous_v_saves_what_the_formula_counts). Math attention with
batch > 1 matches the formula by accident: ``probs @ v`` reshapes v to (b a, s, d_v) for bmm, which must copy
it, and the bmm saves the copy; at batch 1 the reshape is a view and math attention keeps the whole kv_b
output too (test_math_attention_at_batch_one_keeps_the_whole_kv).
"""

import pytest

pytest.importorskip("torch", reason="the PyTorch cross-checks need torch: pip install torch==2.13.0 (the README's test command)")
import torch
import torch.nn.functional as F
from torch_llama import rope_tables, storage_breakdown, storage_bytes
from torch_mla import FlashAttentionFn, MLABlock, MLADecoder, mla_attention
from torch_models import SavedStorages, count_flops, decoder_step_flops, part_of

from costmodel.cost.shape import Shape
from costmodel.specs.model import MLA, Transformer

# d_h + d_r = 12 != d_v = 10 (as DeepSeek-V3's 192 != 128), s = 14 != d_v, a s != a d_v: no two terms alike
D, FFN, HEADS, VOCAB, L = 64, 96, 4, 64, 2
KV_RANK, NOPE, ROPE, V_DIM = 16, 8, 4, 10
BATCH, SEQ = 2, 14
T = BATCH * SEQ
ACT_BYTES = 2  # bf16

Q_RANKS = [pytest.param(24, id="q-latent"), pytest.param(0, id="no-q-latent")]  # 0: V2-Lite's q_proj
ATTENTION = [pytest.param(True, id="flash"), pytest.param(False, id="math")]
FLASH_KEEPS_KV = ("transformers' MLA passes v as a split view of the kv_b output to the attention, which "
                  "saves it, so all a (d_h + d_v) of that storage stays alive: 2 a d_h B/token more than "
                  "mla_attention_bytes_per_token's a d_v for V (Megatron-core copies v out; see below)")


def spec(q_lora_rank=24, tied=False, v_head_dim=V_DIM):
    return Transformer(name="tiny-mla", hidden=D, ffn_hidden=FFN, layers=L, heads=HEADS, kv_heads=HEADS,
                       vocab=VOCAB, seq_len=SEQ, tied_embeddings=tied,
                       mla=MLA(q_lora_rank=q_lora_rank, kv_lora_rank=KV_RANK, qk_nope_head_dim=NOPE,
                               qk_rope_head_dim=ROPE, v_head_dim=v_head_dim))


# ---------------------------------------------------------------- parameters


@pytest.mark.parametrize("v_head_dim", [V_DIM, NOPE + ROPE], ids=["d_v-differs", "d_v-equal"])
@pytest.mark.parametrize("q_lora_rank", Q_RANKS)
def test_attention_params_match_torch(q_lora_rank, v_head_dim):
    """One MLA's numel == attention_params; its down projections and latent norms == mla_replicated_params."""
    s = spec(q_lora_rank, v_head_dim=v_head_dim)
    attn = mla_attention(s, flash=False)
    shape = Shape.of(s)
    assert sum(p.numel() for p in attn.parameters()) == shape.attention_params()
    down = [n for n, _ in attn.named_parameters() if n.startswith(("q_a_", "kv_a_"))]  # W^DQ, W^DKV + W^KR, norms
    replicated = sum(p.numel() for n, p in attn.named_parameters() if n in down)
    assert shape.block_replicated_params() - 2 * D == replicated  # less the block's two RMSNorms


@pytest.mark.parametrize("tied", [False, True], ids=["untied", "tied"])
@pytest.mark.parametrize("q_lora_rank", Q_RANKS)
def test_decoder_param_parts_match_torch(q_lora_rank, tied):
    """The whole decoder's numel by part (embedding, attention, mlp, norms, output) == param_parts."""
    s = spec(q_lora_rank, tied)
    parts = {}
    for name, p in MLADecoder(s).named_parameters():
        parts[part_of(name)] = parts.get(part_of(name), 0) + p.numel()
    assert Shape.of(s).param_parts() == parts
    assert Shape.of(s).total_params() == sum(p.numel() for p in MLADecoder(s).parameters())


# ---------------------------------------------------------------- FLOPs


@pytest.mark.parametrize("q_lora_rank", Q_RANKS)
def test_attention_flops_match_torch(q_lora_rank):
    """One MLA (math attention: the full s x s products, as cost4d counts them) under FlopCounterMode:
    forward = T x attention_forward_flops_per_token(s) = 2 T x its matmul weights + T x
    attention_score_flops_per_token(s); backward = 2 x forward (the input needs a gradient)."""
    torch.manual_seed(0)
    s = spec(q_lora_rank)
    attn = mla_attention(s, flash=False)
    cos, sin = rope_tables(SEQ, ROPE, torch.float32)
    x = torch.randn(BATCH, SEQ, D, requires_grad=True)
    out, forward = count_flops(lambda: attn(x, cos, sin))
    _, backward = count_flops(lambda: out.sum().backward())
    shape = Shape.of(s)
    weights = sum(m.weight.numel() for m in attn.modules() if isinstance(m, torch.nn.Linear))
    assert forward == T * shape.attention_forward_flops_per_token(seq_len=SEQ)
    assert forward - 2 * T * weights == T * shape.attention_score_flops_per_token(seq_len=SEQ)
    assert backward == 2 * forward


def test_flash_forward_flops_match_math():
    """The reference flash function runs the same two products forward (q k^T, P v): same count."""
    torch.manual_seed(0)
    q, k = torch.randn(BATCH, HEADS, SEQ, NOPE + ROPE), torch.randn(BATCH, HEADS, SEQ, NOPE + ROPE)
    v = torch.randn(BATCH, HEADS, SEQ, V_DIM)
    _, flops = count_flops(lambda: FlashAttentionFn.apply(q, k, v, 0.5))
    assert flops == T * Shape.of(spec()).attention_score_flops_per_token(seq_len=SEQ)


@pytest.mark.parametrize("q_lora_rank", Q_RANKS)
def test_decoder_flops_match_torch(q_lora_rank):
    """The whole decoder (L MLA layers, logits): forward and backward FLOPs per token x T."""
    torch.manual_seed(0)
    s = spec(q_lora_rank)
    model = MLADecoder(s)
    tokens = torch.randint(VOCAB, (BATCH, SEQ))
    forward, backward = decoder_step_flops(model, tokens)
    assert forward == T * Shape.of(s).forward_flops_per_token(seq_len=SEQ)
    assert backward == T * Shape.of(s).backward_flops_per_token(seq_len=SEQ)


# ---------------------------------------------------------------- saved activations


def measure(s, flash, v_contiguous=False, batch=BATCH):
    """(kept bytes, {storage label: bytes}, output, input) of one bf16 layer's forward; weights and
    cos/sin left out."""
    torch.manual_seed(0)
    block = MLABlock(s, flash, v_contiguous).to(torch.bfloat16)
    with torch.no_grad():  # norm weights away from 1 so their gradients matter
        for p in block.parameters():
            if p.dim() == 1:
                p.uniform_(0.5, 1.5)
    cos, sin = rope_tables(SEQ, ROPE, torch.bfloat16)
    x = torch.randn(batch, SEQ, D, dtype=torch.bfloat16, requires_grad=True)
    names = {"cos": cos, "sin": sin}
    with SavedStorages() as saved:
        out = block(x, cos, sin, trace=names)
    exclude = [cos, sin, *block.parameters()]
    return storage_bytes(saved, exclude), storage_breakdown(saved, names, exclude), out, x


def formula_bytes_per_token(s, flash):
    return Shape.of(s).layer_activation_bytes_per_token(act_bytes=ACT_BYTES, tp=1, sp=False, selective=False,
                                                        flash=flash, norm_stats=True)


@pytest.mark.parametrize("flash", [pytest.param(True, id="flash", marks=pytest.mark.xfail(strict=True,
                                                                                        reason=FLASH_KEEPS_KV)),
                                   pytest.param(False, id="math")])
@pytest.mark.parametrize("q_lora_rank", Q_RANKS)
def test_layer_saved_bytes_match_formula(q_lora_rank, flash):
    """A whole MLA layer (norm, MLA, residual, norm, SwiGLU, residual) keeps
    layer_activation_bytes_per_token(act_bytes 2, tp 1, no SP, no recompute, norm_stats) x T."""
    s = spec(q_lora_rank)
    kept, parts, out, x = measure(s, flash)
    out.float().sum().backward()  # sanity: it trains
    assert torch.isfinite(x.grad).all()
    assert kept == T * formula_bytes_per_token(s, flash), {k: v / T for k, v in parts.items()}


@pytest.mark.parametrize("q_lora_rank", Q_RANKS)
def test_flash_keeps_the_whole_kv(q_lora_rank):
    """The documented difference, exact: with flash, measured - formula = 2 a d_h B per token (64 here), and
    it is the kv_b output's storage (2 a (d_h + d_v) = 144 B/token) saved in place of V (2 a d_v = 80).
    The q_b output, split the same way, is not kept: RoPE on its view saves only cos and sin."""
    s = spec(q_lora_rank)
    kept, parts, _, _ = measure(s, flash=True)
    assert kept - T * formula_bytes_per_token(s, flash=True) == T * ACT_BYTES * HEADS * NOPE
    assert parts["kv"] == T * ACT_BYTES * HEADS * (NOPE + V_DIM)
    assert "q" not in parts and "v" not in parts
    assert parts["attn_out+o_in"] == T * ACT_BYTES * HEADS * V_DIM  # O is the o_proj's input: counted once


@pytest.mark.parametrize("flash", ATTENTION)
@pytest.mark.parametrize("q_lora_rank", Q_RANKS)
def test_contiguous_v_saves_what_the_formula_counts(q_lora_rank, flash):
    """With v copied out of the kv_b output (Megatron-core's ``value = value.contiguous()``) the layer keeps
    exactly the formula, flash or math: the copy (2 a d_v B/token) is saved and the kv_b output freed."""
    s = spec(q_lora_rank)
    kept, parts, _, _ = measure(s, flash, v_contiguous=True)
    assert kept == T * formula_bytes_per_token(s, flash), {k: v / T for k, v in parts.items()}
    assert parts["v"] == T * ACT_BYTES * HEADS * V_DIM and "kv" not in parts


def test_math_attention_at_batch_one_keeps_the_whole_kv():
    """torch alone: ``probs @ v`` reshapes v (b, a, s, d_v) to (b a, s, d_v) for bmm. At batch 2 that needs a
    copy, which bmm saves (2 a d_v B/token, and the kv_b output is freed); at batch 1 it is a view, so math
    attention keeps the whole kv_b output too: 2 a d_h B/token more than at batch 2."""
    s = spec()
    per_token = {}
    for batch in (1, 2):
        kept, parts, _, _ = measure(s, flash=False, batch=batch)
        per_token[batch] = kept / (batch * SEQ)
        assert ("kv" in parts) == (batch == 1), parts
    assert per_token[1] - per_token[2] == ACT_BYTES * HEADS * NOPE
    assert per_token[2] == formula_bytes_per_token(s, flash=False)


# ---------------------------------------------------------------- the builders compute attention


def test_flash_function_is_correct():
    """FlashAttentionFn (d_qk != d_v): forward equals causal SDPA and the backward passes gradcheck (fp64)."""
    torch.manual_seed(0)
    q = torch.randn(1, 2, 4, 6, dtype=torch.float64, requires_grad=True)
    k = torch.randn(1, 2, 4, 6, dtype=torch.float64, requires_grad=True)
    v = torch.randn(1, 2, 4, 4, dtype=torch.float64, requires_grad=True)
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.4)
    torch.testing.assert_close(FlashAttentionFn.apply(q, k, v, 0.4), expected)
    assert torch.autograd.gradcheck(lambda *a: FlashAttentionFn.apply(*a, 0.4), (q, k, v))


@pytest.mark.parametrize("q_lora_rank", Q_RANKS)
def test_flash_layer_matches_math_layer(q_lora_rank):
    """Same weights, flash or math attention, v a view or a copy: the same outputs and input gradients.

    Tolerance: bf16 (8-bit mantissa), different summation orders and an fp32 vs bf16 softmax; 3e-2."""
    results = []
    for flash, v_contiguous in ((True, False), (False, False), (True, True)):
        _, _, out, x = measure(spec(q_lora_rank), flash, v_contiguous)
        out.float().pow(2).mean().backward()
        results.append((out.float(), x.grad.float()))
    for out, grad in results[1:]:
        torch.testing.assert_close(out, results[0][0], atol=3e-2, rtol=3e-2)
        torch.testing.assert_close(grad, results[0][1], atol=3e-2, rtol=3e-2)


def test_mla_follows_the_paper():
    """fp64: the module's output equals arXiv:2405.04434 Eq. 9-19 written per head: c^KV = W^DKV h (normed),
    k^C_i = W^UK_i c^KV, v^C_i = W^UV_i c^KV, k^R = RoPE(W^KR h) shared, q_i = [W^UQ_i c^Q; RoPE(W^QR_i c^Q)],
    o_i = sum_j softmax_j(q_i . k_j / sqrt(d_h + d_r)) v_j, u = W^O [o_1; ...; o_a]."""
    torch.manual_seed(0)
    s = spec()
    attn = mla_attention(s, flash=False).double()
    with torch.no_grad():
        attn.q_a_norm.uniform_(0.5, 1.5), attn.kv_a_norm.uniform_(0.5, 1.5)
    cos, sin = rope_tables(SEQ, ROPE, torch.float64)
    h = torch.randn(1, SEQ, D, dtype=torch.float64)

    def norm(z, w):
        return z * torch.rsqrt(z.pow(2).mean(-1, keepdim=True) + 1e-6) * w

    def rope(z):  # z (s, d_r): rotate-half with the tables' angles
        c, si = cos[:, 0], sin[:, 0]
        z1, z2 = z.chunk(2, dim=-1)
        return z * c + torch.cat((-z2, z1), dim=-1) * si

    c_q = norm(h[0] @ attn.q_a_proj.weight.T, attn.q_a_norm)
    down = h[0] @ attn.kv_a_proj_with_mqa.weight.T
    c_kv, k_r = norm(down[:, :KV_RANK], attn.kv_a_norm), rope(down[:, KV_RANK:])
    w_uq = attn.q_b_proj.weight.view(HEADS, NOPE + ROPE, -1)
    w_ukv = attn.kv_b_proj.weight.view(HEADS, NOPE + V_DIM, -1)
    causal = torch.ones(SEQ, SEQ, dtype=torch.bool).triu(1)
    heads = []
    for i in range(HEADS):
        q_i = torch.cat((c_q @ w_uq[i, :NOPE].T, rope(c_q @ w_uq[i, NOPE:].T)), dim=-1)
        k_i = torch.cat((c_kv @ w_ukv[i, :NOPE].T, k_r), dim=-1)
        v_i = c_kv @ w_ukv[i, NOPE:].T
        scores = (q_i @ k_i.T / (NOPE + ROPE) ** 0.5).masked_fill(causal, float("-inf"))
        heads.append(scores.softmax(-1) @ v_i)
    expected = torch.cat(heads, dim=-1) @ attn.o_proj.weight.T
    torch.testing.assert_close(attn(h, cos, sin)[0], expected)
