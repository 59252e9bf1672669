"""torchtitan's Llama block in eager PyTorch, written out (pytorch/torchtitan@238fa995
torchtitan/models/llama3/model/model.py: apply_rotary_emb, repeat_kv, Attention.forward, FeedForward.forward),
and a dispatch mode that counts the bytes each kernel reads and writes (also around torch's ring attention:
tests/dist_llama_workers.py cp_attention).

EagerBlock leaves the norms out (torch's rms_norm runs as one fused kernel on CUDA; the fused count covers it), so
it is x + attention(x), then h + feed_forward(h); TitanBlock adds them back (torchtitan's RMSNorm before it moved
to torch's) for the activation-checkpointing tests.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

#: ops that move no data (views) or that cost4d times as matmuls or attention, not as memory-bound traffic
NOT_MEMORY_BOUND = {
    "mm", "addmm", "bmm", "_scaled_dot_product_flash_attention_for_cpu",
    "_scaled_dot_product_flash_attention_for_cpu_backward", "view", "_unsafe_view", "t", "transpose", "expand",
    "permute", "detach", "reshape", "view_as_complex", "view_as_real", "alias", "unsqueeze", "slice", "select",
    "_reshape_alias", "as_strided", "squeeze", "_conj", "conj", "flatten", "unflatten", "ones_like",
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided",  # allocations: nothing moves
}
#: collectives' namespaces: timed as communication, not as memory-bound traffic
COLLECTIVES = {"c10d", "_c10d_functional", "c10d_functional"}
#: gather and scatter: nll_loss reads one value per token and its backward writes the gradient (zeros and one
#: value per token), not the whole logits' worth
WRITES_ONLY = {"nll_loss_forward": False, "nll_loss_backward": True, "zeros_like": True}


class HBMBytes(TorchDispatchMode):
    """Bytes the memory-bound kernels read and write: each op reads each input once (an expanded view: its
    storage) and writes each output once. Ops whose inputs are all ``constants`` (tables shared by every token,
    such as RoPE's angles) and what they make are left out."""

    def __init__(self, constants=()):
        super().__init__()
        self.constants = {t.untyped_storage().data_ptr() for t in constants}
        self.total = 0
        self.by_op: dict[str, int] = {}

    def _constant(self, t) -> bool:
        return t.untyped_storage().data_ptr() in self.constants

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        name = func.__name__.split(".")[0]
        inputs = [t for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
        outputs = [t for t in tree_leaves(out) if isinstance(t, torch.Tensor)]
        if inputs and all(self._constant(t) for t in inputs):
            self.constants.update(t.untyped_storage().data_ptr() for t in outputs)
            return out
        if name in NOT_MEMORY_BOUND or func.namespace in COLLECTIVES or _view(func):
            return out
        reads = sum(min(t.numel() * t.element_size(), t.untyped_storage().nbytes())
                    for t in inputs if not self._constant(t))
        writes = sum(t.numel() * t.element_size() for t in outputs)
        if name in WRITES_ONLY:
            reads, writes = 0, writes if WRITES_ONLY[name] else 0
        self.total += reads + writes
        self.by_op[name] = self.by_op.get(name, 0) + reads + writes
        return out


def _view(func) -> bool:
    """An op whose schema returns an alias of an input (split, chunk, slice, ...): it moves nothing."""
    return any(r.alias_info is not None and not r.alias_info.is_write for r in func._schema.returns)


def apply_rotary_emb(xq, xk, freqs_cis):
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    freqs = freqs_cis.view(1, xq.shape[1], 1, xq_.shape[-1])
    xq_out = torch.view_as_real(xq_ * freqs).flatten(3)
    xk_out = torch.view_as_real(xk_ * freqs).flatten(3)
    return xq_out.type_as(xq), xk_out.type_as(xk)


def repeat_kv(x, n_rep: int):
    bs, slen, n_kv_heads, head_dim = x.shape
    if n_rep == 1:
        return x
    return torch.unsqueeze(x, dim=3).expand(bs, slen, n_kv_heads, n_rep, head_dim).reshape(
        bs, slen, n_kv_heads * n_rep, head_dim)


class EagerBlock(torch.nn.Module):
    """x + attention(x), then h + feed_forward(h), as torchtitan's TransformerBlock without its norms."""

    def __init__(self, dim, heads, kv_heads, hidden, dtype=torch.bfloat16):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, dim // heads

        def linear(i, o):
            return torch.nn.Linear(i, o, bias=False, dtype=dtype)

        self.wq, self.wk = linear(dim, heads * self.head_dim), linear(dim, kv_heads * self.head_dim)
        self.wv, self.wo = linear(dim, kv_heads * self.head_dim), linear(heads * self.head_dim, dim)
        self.w1, self.w2, self.w3 = linear(dim, hidden), linear(hidden, dim), linear(dim, hidden)

    def attention(self, x, freqs_cis):
        bs, seqlen, _ = x.shape
        xq, xk, xv = self.wq(x), self.wk(x), self.wv(x)
        xq = xq.view(bs, seqlen, -1, self.head_dim)
        xk = xk.view(bs, seqlen, -1, self.head_dim)
        xv = xv.view(bs, seqlen, -1, self.head_dim)
        xq, xk = apply_rotary_emb(xq, xk, freqs_cis)
        keys, values = repeat_kv(xk, self.heads // self.kv_heads), repeat_kv(xv, self.heads // self.kv_heads)
        output = self.sdpa(xq.transpose(1, 2), keys.transpose(1, 2), values.transpose(1, 2))
        return self.wo(output.transpose(1, 2).contiguous().view(bs, seqlen, -1))

    def sdpa(self, q, k, v):
        """Causal attention over (b, h, s, d) views (torchtitan's inner_attention)."""
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    def feed_forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))

    def forward(self, x, freqs_cis):
        h = x + self.attention(x, freqs_cis)
        return h + self.feed_forward(h)


def rope_angles(seq, head_dim):
    """precompute_freqs_cis's complex64 table (angles at random: only its size matters here)."""
    return torch.polar(torch.ones(seq, head_dim // 2), torch.rand(seq, head_dim // 2))


class TitanNorm(torch.nn.Module):
    """torchtitan's RMSNorm before it moved to torch's: fp32 statistics, cast back, times the weight."""

    def __init__(self, dim, dtype=torch.bfloat16):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.empty(dim, dtype=dtype).uniform_(0.5, 1.5))

    def forward(self, x):
        y = x.float()
        return (y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + 1e-6)).type_as(x) * self.weight


class TitanBlock(EagerBlock):
    """torchtitan's TransformerBlock: h = x + attention(attention_norm(x)); h + feed_forward(ffn_norm(h))."""

    def __init__(self, dim, heads, kv_heads, hidden, dtype=torch.bfloat16):
        super().__init__(dim, heads, kv_heads, hidden, dtype)
        self.attention_norm, self.ffn_norm = TitanNorm(dim, dtype), TitanNorm(dim, dtype)

    def forward(self, x, freqs_cis):
        h = x + self.attention(self.attention_norm(x), freqs_cis)
        return h + self.feed_forward(self.ffn_norm(h))
