"""A whole Llama-family decoder in plain torch, trained under either recipe, and what torch saves.

Used by tests/test_torch_autocast.py. Written out here, independently of costmodel: the spec only
supplies the shape (widths, heads, bias flags, tied embeddings). The pieces follow tests/torch_llama.py:

* RMSNorm is tests/torch_llama.py's ``RMSNormFn`` (saves x, weight, fp32 rstd, like fused kernels).
  Under autocast it is not cast: it keeps its input's dtype, fp32 on the residual stream.
* RoPE multiplies by cos/sin tables built once outside in bf16 (the compute dtype), so q and k stay
  bf16 under either recipe; the two muls save only the tables (excluded: per-model constants).
* Attention ``flash``: ``F.scaled_dot_product_attention(is_causal=True, enable_gqa=True)``;
  ``math``: grouped GQA with a bf16 softmax; ``eager``: Hugging Face's eager attention (K, V repeated
  to all heads, softmax in fp32 cast back). The causal mask is additive in q's dtype (adding saves nothing).
* Biases as the spec says: ``bias`` every linear; ``qkv_bias`` q, k, v (Qwen2); ``attention_bias``
  q, k, v and o (HF Llama/Mistral); ``mlp_bias`` gate, up, down.
* ``fused``: one QKV projection and one gate-up projection, split by views (Megatron's layout).
* Recompute ``selective`` checkpoints the attention core ``core(q, k, v)``; ``full`` checkpoints each
  block (``torch.utils.checkpoint``, reentrant or not).
* The loss is ``F.cross_entropy`` written as its two ops, ``log_softmax`` (saves its fp32 output, counted)
  then ``nll_loss`` (saves the int64 targets and a 0-d fp32 total weight: recorded apart, not per token).

The recipes: ``cs336`` fp32 parameters under ``torch.autocast("cpu", dtype=torch.bfloat16)``;
``megatron`` bf16 parameters, no autocast. Logits are cast to fp32 before the loss under both.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint
from torch.utils.flop_counter import FlopCounterMode
from torch_llama import apply_rope, rms_norm, rope_tables
from torch_models import SavedStorages, part_of

PARAM_DTYPE = {"cs336": torch.float32, "megatron": torch.bfloat16}  # fp32 master + autocast / bf16 weights
AUTOCAST = {"cs336": True, "megatron": False}


class Trace:
    """Names of the intermediates, filled in as the forward runs. A holder rather than a dict, so that
    module hooks (FlopCounterMode's module tracker) do not walk into it: a view taken under
    checkpoint's no_grad requires grad without a grad_fn, which that tracker rejects."""

    def __init__(self):
        self.names = {}

    def __setitem__(self, name, tensor):
        self.names[name] = tensor


class Attention(nn.Module):
    def __init__(self, spec, fused: bool):
        super().__init__()
        h, a, k, d = spec.hidden, spec.heads, spec.kv_heads, spec.dim_per_head
        self.heads, self.kv_heads, self.head_dim, self.fused = a, k, d, fused
        qkv_bias = spec.bias or spec.qkv_bias or spec.attention_bias
        if fused:
            self.qkv = nn.Linear(h, (a + 2 * k) * d, bias=qkv_bias)
        else:
            self.q = nn.Linear(h, a * d, bias=qkv_bias)
            self.k = nn.Linear(h, k * d, bias=qkv_bias)
            self.v = nn.Linear(h, k * d, bias=qkv_bias)
        self.o = nn.Linear(a * d, h, bias=spec.bias or spec.attention_bias)

    def forward(self, x, cos, sin, *, impl, selective, reentrant, t, p):
        b, s, _ = x.shape
        a, k, d = self.heads, self.kv_heads, self.head_dim
        if self.fused:
            t[p + "qkv"] = qkv = self.qkv(x)
            q, kk, v = qkv.split([a * d, k * d, k * d], dim=-1)
        else:
            q, kk, v = self.q(x), self.k(x), self.v(x)
        q, kk, v = q.view(b, s, a, d), kk.view(b, s, k, d), v.view(b, s, k, d)
        t[p + "v"] = v
        t[p + "q_rope"], t[p + "k_rope"] = q, kk = apply_rope(q, cos, sin), apply_rope(kk, cos, sin)
        q, kk, v = q.transpose(1, 2), kk.transpose(1, 2), v.transpose(1, 2)  # (b, heads, s, d)

        def core(q, kk, v):
            return self.core(q, kk, v, impl, t, p)

        attn = checkpoint(core, q, kk, v, use_reentrant=reentrant) if selective else core(q, kk, v)
        t[p + "attn_out"] = attn
        t[p + "o_in"] = o_in = attn.transpose(1, 2).reshape(b, s, a * d)
        return self.o(o_in)

    def core(self, q, k, v, impl, t, p):
        """Causal attention, q (b, a, s, d), k and v (b, a_kv, s, d); returns (b, a, s, d)."""
        if impl == "flash":
            return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        b, a, s, d = q.shape
        g = a // self.kv_heads  # query heads per KV head
        mask = torch.full((s, s), float("-inf"), dtype=q.dtype).triu(1)
        if impl == "eager":  # transformers' eager_attention_forward: repeat_kv, fp32 softmax cast back
            t[p + "k_rep"], t[p + "v_rep"] = k, v = k.repeat_interleave(g, dim=1), v.repeat_interleave(g, dim=1)
            scores = q @ k.transpose(-2, -1) * d**-0.5 + mask
            t[p + "probs_fp32"] = probs = torch.softmax(scores, dim=-1, dtype=torch.float32)
            t[p + "probs"] = probs = probs.to(q.dtype)
            return probs @ v
        t[p + "q_grouped"] = qg = q.reshape(b, self.kv_heads, g * s, d)
        scores = (qg @ k.transpose(-2, -1) * d**-0.5).view(b, self.kv_heads, g, s, s) + mask
        t[p + "probs"] = probs = torch.softmax(scores, dim=-1)
        return (probs.view(b, self.kv_heads, g * s, s) @ v).view(b, a, s, d)


class MLP(nn.Module):
    """SwiGLU down(silu(gate(x)) * up(x)) (``fused``: one gate-up matmul, chunked), or down(gelu(up(x)))."""

    def __init__(self, spec, fused: bool):
        super().__init__()
        h, f, bias = spec.hidden, spec.ffn_hidden, spec.bias or spec.mlp_bias
        self.gated, self.fused = spec.mlp == "swiglu", fused and spec.mlp == "swiglu"
        if self.fused:
            self.gate_up = nn.Linear(h, 2 * f, bias=bias)
        elif self.gated:
            self.gate, self.up = nn.Linear(h, f, bias=bias), nn.Linear(h, f, bias=bias)
        else:
            self.up = nn.Linear(h, f, bias=bias)
        self.down = nn.Linear(f, h, bias=bias)

    def forward(self, x, t, p):
        if not self.gated:
            t[p + "up"] = u = self.up(x)
            t[p + "act"] = a = F.gelu(u)
            return self.down(a)
        if self.fused:
            t[p + "gate_up"] = gu = self.gate_up(x)
            g, u = gu.chunk(2, dim=-1)
        else:
            g, u = self.gate(x), self.up(x)
        t[p + "gate"], t[p + "up"] = g, u
        t[p + "act"] = a = F.silu(g)
        t[p + "prod"] = prod = a * u
        return self.down(prod)


class Block(nn.Module):
    """x + o(attn(norm1(x))), then + mlp(norm2(.)); the adds promote to fp32 under autocast."""

    def __init__(self, spec, fused: bool):
        super().__init__()
        self.norm1, self.norm2 = nn.Parameter(torch.ones(spec.hidden)), nn.Parameter(torch.ones(spec.hidden))
        self.attn, self.mlp = Attention(spec, fused), MLP(spec, fused)

    def forward(self, x, cos, sin, impl="flash", selective=False, reentrant=True, t=None, p=""):
        t = Trace() if t is None else t
        t[p + "x"] = x
        t[p + "norm1_out"] = n1 = rms_norm(x, self.norm1)
        t[p + "h1"] = h1 = x + self.attn(n1, cos, sin, impl=impl, selective=selective, reentrant=reentrant,
                                         t=t, p=p)
        t[p + "norm2_out"] = n2 = rms_norm(h1, self.norm2)
        return h1 + self.mlp(n2, t, p)


class Decoder(nn.Module):
    """Token embedding, blocks, final norm, logits (the embedding table when tied), cast to fp32."""

    def __init__(self, spec, fused: bool = False):
        super().__init__()
        self.embed = nn.Embedding(spec.vocab, spec.hidden)
        self.blocks = nn.ModuleList(Block(spec, fused) for _ in range(spec.layers))
        self.norm_f = nn.Parameter(torch.ones(spec.hidden))
        self.lm_head = None if spec.tied_embeddings else nn.Linear(spec.hidden, spec.vocab, bias=False)

    def forward(self, tokens, cos, sin, *, impl="flash", recompute="none", reentrant=True, t=None):
        t = Trace() if t is None else t
        t["embed_out"] = h = self.embed(tokens)
        for i, block in enumerate(self.blocks):
            if recompute == "full":
                t[f"L{i}.x"] = h
                h = checkpoint(block, h, cos, sin, impl, False, reentrant, use_reentrant=reentrant)
            else:
                h = block(h, cos, sin, impl, recompute == "selective", reentrant, t, f"L{i}.")
        t["norm_f_in"] = h
        t["norm_f_out"] = n = rms_norm(h, self.norm_f)
        t["logits"] = logits = F.linear(n, self.embed.weight) if self.lm_head is None else self.lm_head(n)
        return logits.float()


# ---------------------------------------------------------------- measurement

class Saved(SavedStorages):
    """torch_models.SavedStorages that also keeps the first tensor packed per storage (its dtype, shape)."""

    def __init__(self):
        super().__init__()
        self.tensors = {}

    def _pack(self, t):
        self.tensors.setdefault(t.untyped_storage().data_ptr(), t)
        return super()._pack(t)


def _flat(storage, dtype):
    """A storage's bytes as a flat tensor of ``dtype`` (None when they do not divide)."""
    size = torch.empty(0, dtype=dtype).element_size()
    return torch.empty(0, dtype=dtype).set_(storage) if storage.nbytes() % size == 0 else None


def _copy_of(storage, dtype, sources: dict, *, permuted=False) -> str | None:
    """The name of the tensor in ``sources`` this storage holds a ``dtype`` copy of: a cast value for value,
    or (``permuted``) a same-dtype copy in another layout (a reshape of a transposed view)."""
    flat = _flat(storage, dtype)
    if flat is None:
        return None
    for name, src in sources.items():
        if flat.numel() != src.numel() or (src.dtype == dtype) != permuted:
            continue
        theirs = src.detach().reshape(-1).to(dtype)
        if permuted and torch.equal(flat.sort().values, theirs.sort().values) or \
                not permuted and torch.equal(flat, theirs):
            return name
    return None


def label_storages(saved: Saved, names: dict, params: dict, constants: dict) -> dict:
    """{data_ptr: (kind, label)}: kind is 'param', 'constant' (token ids, RoPE tables), 'weight copy'
    (a bf16 cast of a parameter) or 'activation'; the label names the traced tensor(s) it is, or the
    traced tensor it is a bf16 cast or a re-laid copy of, or its dtype and shape."""
    ptr_of = lambda v: v.untyped_storage().data_ptr()  # noqa: E731
    out = {}
    for ptr, st in saved.storages.items():
        t = saved.tensors[ptr]
        if any(ptr_of(v) == ptr for v in params.values()):
            out[ptr] = ("param", "+".join(n for n, v in params.items() if ptr_of(v) == ptr))
        elif any(ptr_of(v) == ptr for v in constants.values()):
            out[ptr] = ("constant", "+".join(n for n, v in constants.items() if ptr_of(v) == ptr))
        elif (src := _copy_of(st, torch.bfloat16, params)) is not None:
            out[ptr] = ("weight copy", f"bf16 copy of {src}")
        elif label := "+".join(n for n, v in names.items() if ptr_of(v) == ptr):
            out[ptr] = ("activation", label)
        elif (src := _copy_of(st, torch.bfloat16, names)) is not None:
            out[ptr] = ("activation", f"bf16 cast of {src}")
        elif t.dtype == torch.float32 and t.shape[-1] == 1:
            out[ptr] = ("activation", "norm rstd fp32")
        elif t.dtype == torch.float32 and t.dim() == 3 and t.shape[1] == getattr(saved, "heads", None):
            out[ptr] = ("activation", "flash log-sum-exp fp32")
        elif (src := _copy_of(st, t.dtype, names, permuted=True)) is not None:
            out[ptr] = ("activation", f"re-laid copy of {src}")
        else:
            out[ptr] = ("activation", f"unnamed {str(t.dtype).removeprefix('torch.')} {tuple(t.shape)}")
    return out


def _flop_counter(on: bool):
    return FlopCounterMode(display=False) if on else contextlib.nullcontext()


@dataclass
class Measured:
    tokens: int
    params_by_part: dict
    activation_bytes: int  # saved storages less parameters, constants, weight copies and the loss's own
    weight_copy_bytes: int  # saved bf16 casts of parameters (autocast's cached copies)
    saved_param_bytes: int  # parameters autograd saves themselves (no copy: bf16 weights, fp32 norm weights)
    loss_bytes: int  # nll_loss's int64 targets and 0-d fp32 total weight (per step, not counted)
    forward_flops: int
    backward_flops: int
    breakdown: dict = field(default_factory=dict)  # (kind, label over layers) -> (bytes, storages)

    def per_token(self, kind: str) -> dict:
        """{'label x storages': bytes per token} of one kind, largest first."""
        rows = [(f"{label} x{n}", b) for (k, label), (b, n) in self.breakdown.items() if k == kind]
        return {label: b / self.tokens for label, b in sorted(rows, key=lambda r: -r[1])}


def generic(label: str) -> str:
    """A label with its layer index dropped ('L1.norm1_out' -> 'L*.norm1_out'), to sum over layers."""
    import re

    return re.sub(r"\bblocks\.\d+\.", "blocks.*.", re.sub(r"\bL\d+\.", "L*.", label))


def train_step(spec, recipe: str, *, impl="flash", recompute="none", reentrant=True, batch=2, seq=None,
               fused=None, flops=True) -> Measured:
    """One forward and backward of a Decoder built from ``spec`` under ``recipe``; what torch saved and ran
    (``flops`` False: no FlopCounterMode, whose Python dispatch takes most of the time; FLOPs read 0)."""
    torch.manual_seed(0)
    fused = getattr(spec, "fused_projections", False) if fused is None else fused
    model = Decoder(spec, fused=fused).to(PARAM_DTYPE[recipe])
    with torch.no_grad():  # norm weights away from 1 so that no two parameters are equal in value
        for name, p in model.named_parameters():
            if "norm" in name:
                p.uniform_(0.5, 1.5)
    seq = spec.seq_len if seq is None else seq
    tokens = torch.randint(spec.vocab, (batch, seq))
    targets = torch.randint(spec.vocab, (batch * seq,))
    cos, sin = rope_tables(seq, spec.dim_per_head, torch.bfloat16)
    params = dict(model.named_parameters())
    trace = Trace()
    names = trace.names
    autocast = torch.autocast("cpu", dtype=torch.bfloat16) if AUTOCAST[recipe] else contextlib.nullcontext()
    with autocast:
        with _flop_counter(flops) as fwd:
            with Saved() as saved:
                logits = model(tokens, cos, sin, impl=impl, recompute=recompute, reentrant=reentrant, t=trace)
                names["logp"] = logp = F.log_softmax(logits.view(-1, spec.vocab), dim=-1)
            with Saved() as loss_saved:
                loss = F.nll_loss(logp, targets)
    with _flop_counter(flops) as bwd:
        loss.backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters())  # sanity: it trains

    saved.heads = spec.heads  # SDPA's log-sum-exp is fp32 (b, a, s)
    labels = label_storages(saved, names, params, {"tokens": tokens, "cos": cos, "sin": sin})
    breakdown = {}
    for ptr, (kind, label) in labels.items():
        key = (kind, generic(label))
        b, n = breakdown.get(key, (0, 0))
        breakdown[key] = (b + saved.storages[ptr].nbytes(), n + 1)
    by_kind = {k: sum(b for (kk, _), (b, _) in breakdown.items() if kk == k)
               for k in ("activation", "weight copy", "param")}
    parts = {}
    for name, p in params.items():
        parts[part_of(name)] = parts.get(part_of(name), 0) + p.numel()
    return Measured(tokens=batch * seq, params_by_part=parts, activation_bytes=by_kind["activation"],
                    weight_copy_bytes=by_kind["weight copy"], saved_param_bytes=by_kind["param"],
                    loss_bytes=sum(st.nbytes() for ptr, st in loss_saved.storages.items() if ptr not in saved.storages),
                    forward_flops=fwd.get_total_flops() if flops else 0,
                    backward_flops=bwd.get_total_flops() if flops else 0,
                    breakdown=breakdown)
