"""A tiny multi-head latent attention (MLA) layer and decoder in torch, written independently of costmodel.

Used by tests/test_torch_mla.py; the spec supplies only the shape. The attention follows transformers'
DeepseekV3Attention (src/transformers/models/deepseek_v3/modeling_deepseek_v3.py) line by line, which is
DeepSeek-AI 2024, arXiv:2405.04434, Sec. 2.1.2-2.1.3 (W^DQ, W^UQ, W^QR, W^DKV, W^KR, W^UK, W^UV, W^O):

* queries: ``q_b(norm(q_a(x)))``, or ``q_proj(x)`` without a query latent (q_lora_rank 0, V2-Lite), viewed
  (b, s, a, d_h + d_r), transposed to (b, a, s, .) and ``split`` into the non-rotary and rotary parts
  (views of one storage);
* keys/values: ``kv_a_proj_with_mqa(x)`` split into the latent c_kv and the shared rotary key k_pe (views);
  ``kv_b(norm(c_kv))`` viewed (b, s, a, d_h + d_v), transposed and split into k_nope and v (views);
* RoPE (tests/torch_llama.py's rotate-half ``apply_rope``, cos/sin passed in as constants) on q_pe and on
  k_pe viewed (b, 1, s, d_r); k_pe ``expand``-ed to the a heads (a view);
* ``q = cat(q_nope, q_pe)``, ``k = cat(k_nope, k_pe)``: new tensors, contiguous in (b, a, s, d_h + d_r);
* attention, then ``o_proj`` of the output transposed back to (b, s, a d_v).

``v_contiguous`` copies v out of the kv_b output before the attention, as Megatron-core's MLASelfAttention
does (``value = value.contiguous()``); transformers passes the view.

What that saves for backward, by storage (SavedStorages counts a storage once, and a view saves its whole
base): the latent norms save their inputs, so the query latent, and the whole kv_a output (c_kv is a view of
it); the up projections save the normed latents; q and k are saved by the attention, q_pe and k_pe's RoPE
muls save only cos and sin. v is a view of the kv_b output: what the attention saves of it decides whether
the whole a (d_h + d_v) storage stays alive.

Attention, two ways:

* ``flash=True``: :class:`FlashAttentionFn`, a reference FlashAttention (Dao et al. 2022, arXiv:2205.14135,
  Alg. 1-2, in plain torch ops) that saves what the kernels save: q, k, v as given, the output O and the fp32
  log-sum-exp L per head and token; O is laid out (b, s, a, d_v) and returned transposed, as FlashAttention
  and torch's CPU kernel lay it out, so the o_proj's input is a view of it. It is needed because torch's own
  flash kernels require one head size for q, k and v (d_h + d_r != d_v here: the CPU kernel raises, and
  F.scaled_dot_product_attention falls back to an fp32 math path).
* ``flash=False``: transformers' eager attention with a bf16 softmax: ``q @ k^T * scale``, additive causal
  mask (adding saves nothing), softmax (saves its output), ``@ v``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch_llama import apply_rope, rms_norm, rope_tables
from torch_models import MLP


class FlashAttentionFn(torch.autograd.Function):
    """Causal softmax(q k^T scale) v; saves (q, k, v, O, L) with L = logsumexp of each score row in fp32.

    q, k: (b, a, s, d_qk); v: (b, a, s, d_v); returns O (b, a, s, d_v), a transposed view of a (b, s, a, d_v)
    tensor. The backward recomputes P = exp(q k^T scale - L) and uses D = rowsum(dO * O) (FlashAttention-2,
    Dao 2023, arXiv:2307.08691, Alg. 2), so nothing s x s is kept between the passes.
    """

    @staticmethod
    def forward(ctx, q, k, v, scale):
        b, a, s, _ = q.shape
        probs, lse = FlashAttentionFn._probs(q, k, None, scale)
        out = torch.empty(b, s, a, v.shape[-1], dtype=q.dtype).transpose(1, 2)
        out.copy_(probs @ v.to(probs.dtype))
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.scale = scale
        return out

    @staticmethod
    def backward(ctx, grad_out):
        q, k, v, out, lse = ctx.saved_tensors
        probs, _ = FlashAttentionFn._probs(q, k, lse, ctx.scale)
        compute = probs.dtype
        d_out = grad_out.to(compute)
        d_v = probs.transpose(-2, -1) @ d_out
        d_probs = d_out @ v.to(compute).transpose(-2, -1)
        delta = (d_out * out.to(compute)).sum(-1, keepdim=True)  # rowsum(dO * O) = rowsum(dP * P)
        d_scores = probs * (d_probs - delta) * ctx.scale
        d_q = d_scores @ k.to(compute)
        d_k = d_scores.transpose(-2, -1) @ q.to(compute)
        return d_q.to(q.dtype), d_k.to(k.dtype), d_v.to(v.dtype), None

    @staticmethod
    def _probs(q, k, lse, scale):
        """(P, L): causal softmax of q k^T scale in fp32 (fp64 for gradcheck), from L when given."""
        compute = torch.promote_types(q.dtype, torch.float32)
        s = q.shape[-2]
        scores = (q.to(compute) @ k.to(compute).transpose(-2, -1)) * scale
        scores = scores.masked_fill(torch.ones(s, s, dtype=torch.bool).triu(1), float("-inf"))
        if lse is None:
            lse = scores.logsumexp(-1)
        return torch.exp(scores - lse[..., None]), lse


class MLAttention(nn.Module):
    """transformers' DeepseekV3Attention (no biases, no rope scaling), with fused-kernel latent norms.

    ``v_contiguous``: copy v out of the kv_b output before the attention, as Megatron-core's MLASelfAttention
    does (``value = value.contiguous()`` in get_query_key_value_tensors); transformers passes the view.
    """

    def __init__(self, hidden, heads, q_lora_rank, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim,
                 flash: bool, v_contiguous: bool = False):
        super().__init__()
        self.heads, self.nope, self.rope, self.v_dim, self.flash = (heads, qk_nope_head_dim, qk_rope_head_dim,
                                                                    v_head_dim, flash)
        self.v_contiguous = v_contiguous
        self.qk_dim = qk_nope_head_dim + qk_rope_head_dim
        self.kv_lora_rank = kv_lora_rank
        if q_lora_rank:
            self.q_a_proj = nn.Linear(hidden, q_lora_rank, bias=False)
            self.q_a_norm = nn.Parameter(torch.ones(q_lora_rank))
            self.q_b_proj = nn.Linear(q_lora_rank, heads * self.qk_dim, bias=False)
        else:
            self.q_proj = nn.Linear(hidden, heads * self.qk_dim, bias=False)
        self.kv_a_proj_with_mqa = nn.Linear(hidden, kv_lora_rank + qk_rope_head_dim, bias=False)
        self.kv_a_norm = nn.Parameter(torch.ones(kv_lora_rank))
        self.kv_b_proj = nn.Linear(kv_lora_rank, heads * (qk_nope_head_dim + v_head_dim), bias=False)
        self.o_proj = nn.Linear(heads * v_head_dim, hidden, bias=False)

    def forward(self, x, cos, sin, trace: dict | None = None):
        """x (b, s, D); cos, sin (s, 1, d_r) from torch_llama.rope_tables. ``trace`` receives intermediates."""
        t = {} if trace is None else trace
        b, s, _ = x.shape
        if hasattr(self, "q_proj"):
            t["q"] = q = self.q_proj(x)
        else:
            t["q_latent"] = q_latent = self.q_a_proj(x)
            t["q_latent_normed"] = q_latent_normed = rms_norm(q_latent, self.q_a_norm)
            t["q"] = q = self.q_b_proj(q_latent_normed)
        q = q.view(b, s, self.heads, self.qk_dim).transpose(1, 2)
        q_nope, q_pe = torch.split(q, [self.nope, self.rope], dim=-1)

        t["kv_latent"] = kv_latent = self.kv_a_proj_with_mqa(x)
        c_kv, k_pe = torch.split(kv_latent, [self.kv_lora_rank, self.rope], dim=-1)
        t["kv_latent_normed"] = c_kv_normed = rms_norm(c_kv, self.kv_a_norm)
        t["kv"] = kv = self.kv_b_proj(c_kv_normed)
        kv = kv.view(b, s, self.heads, self.nope + self.v_dim).transpose(1, 2)
        k_nope, v = torch.split(kv, [self.nope, self.v_dim], dim=-1)
        if self.v_contiguous:  # Megatron-core's MLASelfAttention: value = value.contiguous()
            t["v"] = v = v.contiguous()

        k_pe = k_pe.view(b, 1, s, self.rope)
        cos, sin = cos.transpose(0, 1), sin.transpose(0, 1)  # (1, s, d_r): broadcast over batch and heads
        q_pe, k_pe = apply_rope(q_pe, cos, sin), apply_rope(k_pe, cos, sin)
        k_pe = k_pe.expand(b, self.heads, s, self.rope)

        t["query"] = query = torch.cat((q_nope, q_pe), dim=-1)
        t["key"] = key = torch.cat((k_nope, k_pe), dim=-1)
        t["attn_out"] = attn = self.attention(query, key, v, t)
        t["o_in"] = o_in = attn.transpose(1, 2).contiguous().reshape(b, s, self.heads * self.v_dim).contiguous()
        return self.o_proj(o_in)

    def attention(self, q, k, v, t):
        """Causal attention of q, k (b, a, s, d_h + d_r) and v (b, a, s, d_v); returns (b, a, s, d_v)."""
        scale = self.qk_dim**-0.5
        if self.flash:
            return FlashAttentionFn.apply(q, k, v, scale)
        s = q.shape[-2]
        mask = torch.full((s, s), float("-inf"), dtype=q.dtype).triu(1)  # additive: adding saves nothing
        t["probs"] = probs = torch.softmax(q @ k.transpose(-2, -1) * scale + mask, dim=-1)
        return probs @ v


def mla_attention(spec, flash: bool, v_contiguous: bool = False) -> MLAttention:
    """The spec's MLA as an MLAttention (fp32 parameters)."""
    m = spec.mla
    return MLAttention(spec.hidden, spec.heads, m.q_lora_rank, m.kv_lora_rank, m.qk_nope_head_dim,
                       m.qk_rope_head_dim, m.v_head_dim, flash, v_contiguous)


class MLABlock(nn.Module):
    """Pre-norm layer: h = x + attn(norm1(x)), then h + mlp(norm2(h)); RMSNorms as fused kernels (RMSNormFn)."""

    def __init__(self, spec, flash: bool, v_contiguous: bool = False):
        super().__init__()
        self.norm1, self.norm2 = nn.Parameter(torch.ones(spec.hidden)), nn.Parameter(torch.ones(spec.hidden))
        self.attn = mla_attention(spec, flash, v_contiguous)
        self.mlp = MLP(spec.hidden, spec.ffn_hidden, gated=spec.mlp == "swiglu", bias=False)

    def forward(self, x, cos, sin, trace: dict | None = None):
        t = {} if trace is None else trace
        t["x"] = x
        t["norm1_out"] = n1 = rms_norm(x, self.norm1)
        t["h1"] = h1 = x + self.attn(n1, cos, sin, t)
        t["norm2_out"] = n2 = rms_norm(h1, self.norm2)
        return h1 + self.mlp(n2)


class MLADecoder(nn.Module):
    """Token embedding, MLA blocks, final norm, logits (own matrix, or the embedding's when tied)."""

    def __init__(self, spec, flash: bool = False):
        super().__init__()
        self.rope_dim = spec.mla.qk_rope_head_dim
        self.embed = nn.Embedding(spec.vocab, spec.hidden)
        self.blocks = nn.ModuleList(MLABlock(spec, flash) for _ in range(spec.layers))
        self.norm_f = nn.Parameter(torch.ones(spec.hidden))
        self.lm_head = None if spec.tied_embeddings else nn.Linear(spec.hidden, spec.vocab, bias=False)

    def forward(self, tokens):
        h = self.embed(tokens)
        cos, sin = rope_tables(tokens.shape[1], self.rope_dim, h.dtype)
        for block in self.blocks:
            h = block(h, cos, sin)
        h = rms_norm(h, self.norm_f)
        return F.linear(h, self.embed.weight) if self.lm_head is None else self.lm_head(h)
