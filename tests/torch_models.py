"""Small torch models built from cost4d specs, and what torch measures on them.

Used by tests/test_torch_ffn.py and tests/test_torch_transformer.py. The models are written out
here, independently of costmodel: the spec only supplies the shape (widths, heads, flags).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

# ---------------------------------------------------------------- FFN stack (the XXL family)

ACTIVATIONS = {"none": nn.Identity, "relu": nn.ReLU, "gelu": nn.GELU, "silu": nn.SiLU}


class FFNBlock(nn.Module):
    """down(act(up(x))), or with a gate down(act(gate(x)) * up(x)); no biases."""

    def __init__(self, d_model: int, d_ff: int, activation: str, gated: bool):
        super().__init__()
        self.gate = nn.Linear(d_model, d_ff, bias=False) if gated else None
        self.up = nn.Linear(d_model, d_ff, bias=False)
        self.act = ACTIVATIONS[activation]()
        self.down = nn.Linear(d_ff, d_model, bias=False)

    def forward(self, x):
        if self.gate is None:
            return self.down(self.act(self.up(x)))
        return self.down(self.act(self.gate(x)) * self.up(x))


def ffn_stack(spec) -> nn.Sequential:
    """The FFNStack spec as torch modules (fp32 parameters)."""
    return nn.Sequential(*(FFNBlock(spec.d_model, spec.d_ff, spec.activation, spec.gated)
                           for _ in range(spec.layers)))


# ---------------------------------------------------------------- decoder-only transformer

def rotary(x):
    """RoPE on (batch, heads, seq, head_dim): elementwise rotations only, no parameters, no matmul."""
    seq, dim = x.shape[-2], x.shape[-1]
    inv_freq = 1.0 / 10000 ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim)
    angles = torch.arange(seq, dtype=torch.float32)[:, None] * inv_freq[None, :]  # broadcast, no outer/mm
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)  # keep bf16 compute in bf16
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)


class Attention(nn.Module):
    """q, k, v, o projections; GQA by repeating k, v; scores by explicit torch.matmul.

    FlopCounterMode does not count the CPU flash kernel behind F.scaled_dot_product_attention,
    so softmax(q k^T / sqrt(d_h) + causal mask) v is written out.
    """

    def __init__(self, hidden, heads, kv_heads, head_dim, bias, rope):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim, self.rope = heads, kv_heads, head_dim, rope
        self.q = nn.Linear(hidden, heads * head_dim, bias=bias)
        self.k = nn.Linear(hidden, kv_heads * head_dim, bias=bias)
        self.v = nn.Linear(hidden, kv_heads * head_dim, bias=bias)
        self.o = nn.Linear(heads * head_dim, hidden, bias=bias)

    def forward(self, x):
        # head counts come from the projections' widths, so a column-split (tensor-parallel)
        # copy that holds heads / t query and kv_heads / t key/value heads runs unchanged
        b, s, _ = x.shape
        q = self.q(x).view(b, s, -1, self.head_dim).transpose(1, 2)
        k = self.k(x).view(b, s, -1, self.head_dim).transpose(1, 2)
        v = self.v(x).view(b, s, -1, self.head_dim).transpose(1, 2)
        if self.rope:
            q, k = rotary(q), rotary(k)
        group = q.shape[1] // k.shape[1]  # = heads // kv_heads
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(self.head_dim)
        causal = torch.ones(s, s, dtype=torch.bool).triu(1)
        probs = scores.masked_fill(causal, float("-inf")).softmax(dim=-1)
        out = torch.matmul(probs, v).transpose(1, 2).reshape(b, s, -1)
        return self.o(out)


class MLP(nn.Module):
    """SwiGLU down(silu(gate(x)) * up(x)), or GeLU down(gelu(up(x)))."""

    def __init__(self, hidden, ffn_hidden, gated, bias):
        super().__init__()
        self.gate = nn.Linear(hidden, ffn_hidden, bias=bias) if gated else None
        self.up = nn.Linear(hidden, ffn_hidden, bias=bias)
        self.down = nn.Linear(ffn_hidden, hidden, bias=bias)

    def forward(self, x):
        if self.gate is None:
            return self.down(F.gelu(self.up(x)))
        return self.down(F.silu(self.gate(x)) * self.up(x))


def _norm(spec):
    return nn.RMSNorm(spec.hidden) if spec.norm == "rmsnorm" else nn.LayerNorm(spec.hidden)


class Block(nn.Module):
    """Pre-norm block: x + attn(norm1(x)), then x + mlp(norm2(x)); parallel (spec.block): x + attn(norm1(x))
    + mlp(norm1(x)) with one norm (GPT-J), or + mlp(norm2(x)) with two (GPT-NeoX)."""

    def __init__(self, spec):
        super().__init__()
        self.kind = spec.block
        self.norm1 = _norm(spec)
        self.norm2 = None if spec.block == "parallel" else _norm(spec)
        self.attn = Attention(spec.hidden, spec.heads, spec.kv_heads, spec.dim_per_head,
                              spec.bias, rope=spec.position == "rope")
        self.mlp = MLP(spec.hidden, spec.ffn_hidden, gated=spec.mlp == "swiglu", bias=spec.bias)

    def forward(self, x):
        if self.kind == "sequential":
            x = x + self.attn(self.norm1(x))
            return x + self.mlp(self.norm2(x))
        n1 = self.norm1(x)
        return x + self.attn(n1) + self.mlp(n1 if self.norm2 is None else self.norm2(x))


class Decoder(nn.Module):
    """Token (+ learned position) embedding, blocks, final norm, logits (tied or own matrix)."""

    def __init__(self, spec):
        super().__init__()
        self.embed = nn.Embedding(spec.vocab, spec.hidden)
        self.pos = nn.Embedding(spec.max_position, spec.hidden) if spec.position == "learned" else None
        self.blocks = nn.ModuleList(Block(spec) for _ in range(spec.layers))
        self.norm_f = _norm(spec)
        self.lm_head = None if spec.tied_embeddings else nn.Linear(spec.hidden, spec.vocab, bias=False)

    def forward(self, tokens):
        h = self.embed(tokens)
        if self.pos is not None:
            h = h + self.pos(torch.arange(tokens.shape[1]))
        for block in self.blocks:
            h = block(h)
        h = self.norm_f(h)
        return F.linear(h, self.embed.weight) if self.lm_head is None else self.lm_head(h)


def part_of(name: str) -> str:
    """The cost4d part a Decoder parameter belongs to (see costmodel param_parts)."""
    for prefix, part in (("embed.", "embedding"), ("pos.", "position"), ("lm_head.", "output")):
        if name.startswith(prefix):
            return part
    for infix, part in ((".attn.", "attention"), (".mlp.", "mlp"), ("norm", "norms")):
        if infix in name:
            return part
    raise KeyError(name)


# ---------------------------------------------------------------- measurements

class SavedStorages:
    """saved_tensors_hooks that record every storage autograd saves, each counted once."""

    def __init__(self):
        self.storages = {}  # data_ptr -> storage; holding it keeps the pointer from being reused

    def _pack(self, t):
        storage = t.untyped_storage()
        self.storages[storage.data_ptr()] = storage
        return t

    def __enter__(self):
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, lambda t: t)
        self._hooks.__enter__()
        return self

    def __exit__(self, *exc):
        return self._hooks.__exit__(*exc)

    @property
    def nbytes(self) -> int:
        return sum(s.nbytes() for s in self.storages.values())


def count_flops(fn) -> tuple[object, int]:
    """Run fn under FlopCounterMode; return its result and the FLOPs torch counted."""
    with FlopCounterMode(display=False) as counter:
        out = fn()
    return out, counter.get_total_flops()


def decoder_step_flops(model, tokens) -> tuple[int, int]:
    """(forward, backward) FLOPs of a decoder's language-modelling step on ``tokens`` (the loss has no matmul)."""
    logits, forward = count_flops(lambda: model(tokens))
    loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), tokens.flatten())
    _, backward = count_flops(loss.backward)
    return forward, backward
