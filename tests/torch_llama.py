"""A tiny Llama block in bf16 torch, written to save for backward what fused training kernels save.

Used by tests/test_torch_llama_activations.py. Written out here, independently of costmodel; the
spec only supplies the shape. Pieces that differ from a plain eager model, and why:

* RMSNorm is a ``torch.autograd.Function`` that saves (x, weight, rstd_fp32) like the fused kernels
  (Apex FusedRMSNorm, Transformer Engine, Liger); torch's eager ``F.rms_norm`` on CPU saves fp32
  copies instead (test_eager_rms_norm_saves_fp32_copies pins it).
* RoPE takes its cos/sin tables as arguments: they are per-model constants, built once outside.
* Math attention (``flash=False``) does GQA by grouping the query heads of one KV head into the
  matmul's row dimension, so K and V are saved at kv_heads width; ``gqa="repeat"`` instead copies
  them up to ``heads`` (``repeat_interleave``, as HF's eager ``repeat_kv`` does).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class RMSNormFn(torch.autograd.Function):
    """y = w * x * rstd with rstd = 1 / sqrt(mean(x^2) + eps), computed in fp32, returned in x.dtype.

    Saves x (activation dtype), w (a parameter) and rstd (fp32, one per row), as Apex's
    FusedRMSNormAffineFunction saves (input, weight, invvar).
    """

    @staticmethod
    def forward(ctx, x, weight, eps):
        compute = torch.promote_types(x.dtype, torch.float32)  # fp32 for bf16, fp64 for gradcheck
        xf = x.to(compute)
        rstd = torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
        ctx.save_for_backward(x, weight, rstd)
        return (xf * rstd * weight.to(compute)).to(x.dtype)

    @staticmethod
    def backward(ctx, grad):
        x, weight, rstd = ctx.saved_tensors
        compute = rstd.dtype
        xhat = x.to(compute) * rstd
        gy = grad.to(compute) * weight.to(compute)
        dx = rstd * (gy - xhat * (gy * xhat).mean(-1, keepdim=True))
        dw = (grad.to(compute) * xhat).reshape(-1, x.shape[-1]).sum(0)
        return dx.to(x.dtype), dw.to(weight.dtype), None


def rms_norm(x, weight, eps=1e-6):
    return RMSNormFn.apply(x, weight, eps)


def rope_tables(seq: int, head_dim: int, dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """cos, sin of shape (seq, 1, head_dim) for rotate-half RoPE (Su et al., arXiv:2104.09864)."""
    inv_freq = 1.0 / 10000 ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
    angles = torch.arange(seq, dtype=torch.float32)[:, None] * inv_freq[None, :]
    angles = torch.cat((angles, angles), dim=-1)[:, None, :]  # broadcast over heads
    return angles.cos().to(dtype), angles.sin().to(dtype)


def apply_rope(x, cos, sin):
    """x * cos + rotate_half(x) * sin on (batch, seq, heads, head_dim); cos, sin need no grad,
    so the two muls save only cos and sin, never x."""
    x1, x2 = x.chunk(2, dim=-1)
    return x * cos + torch.cat((-x2, x1), dim=-1) * sin


class SwiGLUFunction(torch.autograd.Function):
    """SwiGLU over [gate | up] that saves its input only and recomputes SiLU in backward, as Megatron-core's
    core/fusions/fused_bias_swiglu.py SwiGLUFunction (bias_activation_fusion) does."""

    @staticmethod
    def forward(ctx, y):
        ctx.save_for_backward(y)
        gate, up = torch.chunk(y, 2, -1)
        return F.silu(gate) * up

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        gate, up = torch.chunk(y, 2, -1)
        sig = torch.sigmoid(gate)
        return torch.cat((grad * sig * (1 + gate * (1 - sig)) * up, grad * F.silu(gate)), -1)


class LlamaBlock(nn.Module):
    """x + o(attn(rope(q, k, v)(norm1(x)))), then + down(silu(gate(.)) * up(.)) of norm2; no biases.

    ``block="parallel"``: x + attn(norm1(x)) + mlp(norm1(x)), one norm (GPT-J, PaLM);
    ``"parallel-two-norms"``: x + attn(norm1(x)) + mlp(norm2(x)) (GPT-NeoX). ``swiglu="fused"``: the gate and up
    projections as one [gate | up] output through :class:`SwiGLUFunction` (Megatron-core's MLP)."""

    def __init__(self, hidden, ffn_hidden, heads, kv_heads, head_dim, flash: bool, gqa: str = "grouped",
                 block: str = "sequential", swiglu: str = "torch", qk_norm: bool = False):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim, self.flash, self.gqa = heads, kv_heads, head_dim, flash, gqa
        self.block, self.swiglu = block, swiglu
        if qk_norm:  # Qwen3: an RMSNorm of d_h on each query and key head, before RoPE
            self.q_norm, self.k_norm = nn.Parameter(torch.ones(head_dim)), nn.Parameter(torch.ones(head_dim))
        self.norm1 = nn.Parameter(torch.ones(hidden))
        self.norm2 = None if block == "parallel" else nn.Parameter(torch.ones(hidden))
        self.q = nn.Linear(hidden, heads * head_dim, bias=False)
        self.k = nn.Linear(hidden, kv_heads * head_dim, bias=False)
        self.v = nn.Linear(hidden, kv_heads * head_dim, bias=False)
        self.o = nn.Linear(heads * head_dim, hidden, bias=False)
        self.gate = nn.Linear(hidden, ffn_hidden, bias=False)
        self.up = nn.Linear(hidden, ffn_hidden, bias=False)
        self.down = nn.Linear(ffn_hidden, hidden, bias=False)
        if swiglu == "fused":  # one [gate | up] weight, as Megatron-core's linear_fc1 (gate and up take no part)
            self.fc1 = nn.Parameter(torch.cat((self.gate.weight, self.up.weight)).detach())

    def forward(self, x, cos, sin, trace: dict | None = None):
        """``trace``, when given, receives the named intermediates (to say which storage is which)."""
        t = {} if trace is None else trace
        h1 = self.attention_half(x, cos, sin, t)
        if self.block == "parallel":
            n2 = t["norm1_out"]
        else:
            t["norm2_out"] = n2 = rms_norm(h1 if self.block == "sequential" else x, self.norm2)
        if self.swiglu == "fused":  # Megatron-core's linear_fc1 gives [gate | up] in one tensor
            t["fc1_out"] = y = F.linear(n2, self.fc1)
            t["prod"] = p = SwiGLUFunction.apply(y)
            return h1 + self.down(p)
        t["gate"], t["up"] = g, u = self.gate(n2), self.up(n2)
        t["silu"] = a = F.silu(g)
        t["prod"] = p = a * u
        return h1 + self.down(p)

    def attention_half(self, x, cos, sin, t: dict):
        """x + o(attention(norm1(x))): the block up to its MLP (an MoE block reuses it)."""
        b, s, _ = x.shape
        t["x"] = x
        t["norm1_out"] = n1 = rms_norm(x, self.norm1)
        q = self.q(n1).view(b, s, self.heads, self.head_dim)
        k = self.k(n1).view(b, s, self.kv_heads, self.head_dim)
        if hasattr(self, "q_norm"):
            t["q_proj"], t["k_proj"] = q, k
            q, k = rms_norm(q, self.q_norm), rms_norm(k, self.k_norm)
        t["v"] = v = self.v(n1).view(b, s, self.kv_heads, self.head_dim)
        t["q_rope"], t["k_rope"] = q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # (b, heads, s, d)
        t["attn_out"] = attn = self.attention(q, k, v, t)
        t["o_in"] = o_in = attn.transpose(1, 2).reshape(b, s, self.heads * self.head_dim)
        t["h1"] = h1 = x + self.o(o_in)
        return h1

    def attention(self, q, k, v, t):
        """Causal attention, q (b, a, s, d), k and v (b, a_kv, s, d); returns (b, a, s, d)."""
        if self.flash:
            return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        b, a, s, d = q.shape
        g = a // self.kv_heads  # query heads per KV head
        mask = torch.full((s, s), float("-inf"), dtype=q.dtype).triu(1)  # additive: adding saves nothing
        if self.gqa in ("repeat", "eager"):
            t["k_rep"], t["v_rep"] = k, v = k.repeat_interleave(g, dim=1), v.repeat_interleave(g, dim=1)
            scores = q @ k.transpose(-2, -1) * d**-0.5 + mask
            if self.gqa == "eager":  # transformers' eager_attention_forward: fp32 softmax, cast back
                t["probs"] = probs = torch.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
            else:
                t["probs"] = probs = torch.softmax(scores, dim=-1)
            return probs @ v
        # heads h = j * g + i share KV head j: rows of one matmul per KV head
        t["q_grouped"] = qg = q.reshape(b, self.kv_heads, g * s, d)
        scores = (qg @ k.transpose(-2, -1) * d**-0.5).view(b, self.kv_heads, g, s, s) + mask
        t["probs"] = probs = torch.softmax(scores, dim=-1)
        return (probs.view(b, self.kv_heads, g * s, s) @ v).view(b, a, s, d)


def storage_bytes(saved, exclude=()) -> int:
    """Bytes of the storages a torch_models.SavedStorages recorded, less those of ``exclude``."""
    skip = {e.untyped_storage().data_ptr() for e in exclude}
    return sum(st.nbytes() for ptr, st in saved.storages.items() if ptr not in skip)


def storage_breakdown(saved, names: dict, exclude=()) -> dict:
    """{label: bytes} per recorded storage; the label joins the ``names`` whose storage it is."""
    skip = {e.untyped_storage().data_ptr() for e in exclude}
    out = {}
    for ptr, st in saved.storages.items():
        if ptr not in skip:
            label = "+".join(n for n, v in names.items() if v.untyped_storage().data_ptr() == ptr)
            out[label or f"unnamed@{ptr:#x}"] = st.nbytes()
    return out
