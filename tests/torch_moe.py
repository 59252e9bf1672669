"""A tiny mixture-of-experts MLP (and decoders built of it) in torch, written independently of costmodel.

Used by tests/test_torch_moe.py and tests/dist_moe_workers.py; the spec supplies only the shape.
The MLP is the grouped design of Megatron-core (megatron/core/transformer/moe: router.py, moe_utils.py
permute / unpermute) in plain eager ops, each saving what eager PyTorch saves:

* router: ``Linear(D, E)`` (no bias); top-k of the logits (saves its int64 indices), then a softmax over
  the k in fp32 (saves its fp32 output), cast to the activation dtype (a cast saves nothing);
* permute: the T k token copies sorted by expert (``order``, int64 T k; ``token = order // k`` names each
  copy's token); ``x.index_select(0, token)`` makes the expert inputs (its backward saves ``token``);
* experts: one SwiGLU (or GeLU) MLP each, tests/torch_models.py's ``MLP``, on its slice of the copies
  (``split`` and ``cat`` save nothing); the concatenated outputs times each copy's routing weight (the
  mul saves both; the weights are ``weights.view(-1).index_select(0, order)``, which saves ``order``);
* unpermute: ``zeros.scatter_add(0, token[:, None].expand(-1, D), y)`` (saves the index, the storage of
  ``token`` again), as Megatron's unpermute does. ``index_add`` would also save its source, b_a D per
  copy more (pinned in tests/test_torch_moe.py's test_index_add_saves_its_source);
* shared experts: one MLP of width F_s on every token; Qwen2-MoE's gate ``sigmoid(x w_g) * shared(x)``.

Fixed routing (``route``): an additive bias, 0 on the chosen experts and -inf elsewhere, is added to the
logits before the top-k (as DeepSeek-V3 adds its selection bias; adding a constant saves nothing). The
top-k then picks exactly the given experts and returns their logits, so autograd saves what it saves for
learned routing; ``logits.gather(1, chosen)`` instead would also save the logits (measured: 2 E B per token).

Built of it: ``MoEDecoder`` (tests/torch_models.py's Attention, ``nn.RMSNorm``; for parameters and FLOPs)
and ``LlamaMoEBlock`` (tests/torch_llama.py's bf16 block, fused-kernel norms; for saved bytes).
"""

from __future__ import annotations

import torch
from torch import nn
from torch_llama import LlamaBlock, rms_norm
from torch_models import MLP, Attention


def fixed_route(tokens: int, experts: int, top_k: int, first=None, dtype=torch.bfloat16) -> torch.Tensor:
    """The routing bias sending token i to experts first(i), first(i) + 1, ... (mod E); default first(i) = i."""
    first = torch.arange(tokens) if first is None else first
    chosen = (first[:, None] + torch.arange(top_k)) % experts
    return torch.full((tokens, experts), float("-inf"), dtype=dtype).scatter(1, chosen, 0.0)


class MoEMLP(nn.Module):
    """Router, E routed experts of width F_e (k per token), optional shared experts of width F_s and gate."""

    def __init__(self, hidden, experts, top_k, expert_ffn_hidden, shared_ffn_hidden=0, shared_gate=False,
                 gated=True):
        super().__init__()
        self.top_k = top_k
        self.router = nn.Linear(hidden, experts, bias=False)
        self.experts = nn.ModuleList(MLP(hidden, expert_ffn_hidden, gated, bias=False) for _ in range(experts))
        self.shared = MLP(hidden, shared_ffn_hidden, gated, bias=False) if shared_ffn_hidden else None
        self.shared_gate = nn.Linear(hidden, 1, bias=False) if shared_gate else None

    def route(self, x, route=None):
        """(chosen (T, k) int64, weights (T, k) in x.dtype) for tokens x (T, D); ``route``: fixed_route's bias."""
        logits = self.router(x)
        if route is not None:
            logits = logits + route
        scores, chosen = logits.topk(self.top_k, dim=-1)
        weights = torch.softmax(scores, dim=-1, dtype=torch.float32).to(x.dtype)
        return chosen, weights

    def permutation(self, chosen):
        """(order, token, counts): copies in expert order, each copy's token, copies per expert."""
        experts = chosen.flatten()  # copy c = t k + j goes to expert experts[c]
        order = experts.argsort(stable=True)
        counts = torch.bincount(experts, minlength=len(self.experts))
        return order, order // self.top_k, counts

    def forward(self, x, route=None, trace: dict | None = None):
        """``trace``, when given, receives the named intermediates (to say which storage is which)."""
        t = {} if trace is None else trace
        shape = x.shape
        x = x.reshape(-1, shape[-1])
        t["chosen"], weights = chosen, weights = self.route(x, route)
        t["order"], t["token"], counts = order, token, counts = self.permutation(chosen)
        t["x_copies"] = xs = x.index_select(0, token)
        t["expert_out"] = y = torch.cat([expert(part) for expert, part in zip(self.experts, xs.split(counts.tolist()))])
        t["copy_weights"] = w = weights.view(-1).index_select(0, order)
        y = y * w[:, None]
        out = torch.zeros_like(x).scatter_add(0, token[:, None].expand(-1, x.shape[-1]), y)
        if self.shared is not None:
            t["shared_out"] = s = self.shared(x)
            if self.shared_gate is not None:
                t["shared_gate"] = g = torch.sigmoid(self.shared_gate(x))
                s = g * s
            out = out + s
        return out.view(shape)


def moe_mlp(spec) -> MoEMLP:
    """One MoE layer's MLP of a Transformer spec with ``moe`` (fp32 parameters)."""
    m = spec.moe
    return MoEMLP(spec.hidden, m.experts, m.top_k, m.expert_ffn_hidden, m.shared_ffn_hidden, m.shared_gate,
                  gated=spec.mlp == "swiglu")


class LlamaMoEBlock(LlamaBlock):
    """tests/torch_llama.py's bf16 block (fused-kernel RMSNorm, RoPE, flash or grouped math attention)
    with an MoE MLP in place of its dense one."""

    def __init__(self, spec, flash: bool):
        super().__init__(spec.hidden, 1, spec.heads, spec.kv_heads, spec.dim_per_head, flash=flash)
        del self.gate, self.up, self.down  # the dense MLP's
        self.moe = moe_mlp(spec)

    def forward(self, x, cos, sin, route=None, trace: dict | None = None):
        t = {} if trace is None else trace
        h1 = self.attention_half(x, cos, sin, t)
        t["norm2_out"] = n2 = rms_norm(h1, self.norm2)
        return h1 + self.moe(n2, route, t)


class MoEBlock(nn.Module):
    """Pre-norm block: x + attn(norm1(x)), then x + mlp(norm2(x)), the MLP an MoE or (dense) a plain MLP."""

    def __init__(self, spec, dense: bool):
        super().__init__()
        self.norm1, self.norm2 = nn.RMSNorm(spec.hidden), nn.RMSNorm(spec.hidden)
        self.attn = Attention(spec.hidden, spec.heads, spec.kv_heads, spec.dim_per_head, bias=False, rope=True)
        if dense:
            self.mlp = MLP(spec.hidden, spec.ffn_hidden, gated=spec.mlp == "swiglu", bias=False)
        else:
            self.moe = moe_mlp(spec)

    def forward(self, x, route=None):
        x = x + self.attn(self.norm1(x))
        n = self.norm2(x)
        return x + (self.moe(n, route) if hasattr(self, "moe") else self.mlp(n))


class MoEDecoder(nn.Module):
    """Token embedding, L_d dense blocks then MoE blocks, final norm, untied logits."""

    def __init__(self, spec):
        super().__init__()
        self.embed = nn.Embedding(spec.vocab, spec.hidden)
        self.blocks = nn.ModuleList(MoEBlock(spec, dense=i < spec.moe.dense_layers) for i in range(spec.layers))
        self.norm_f = nn.RMSNorm(spec.hidden)
        self.lm_head = nn.Linear(spec.hidden, spec.vocab, bias=False)

    def forward(self, tokens, route=None):
        h = self.embed(tokens)
        for block in self.blocks:
            h = block(h, route)
        return self.lm_head(self.norm_f(h))


def part_of(name: str) -> str:
    """The cost4d part an MoEDecoder parameter belongs to (see costmodel param_parts)."""
    for prefix, part in (("embed.", "embedding"), ("lm_head.", "output")):
        if name.startswith(prefix):
            return part
    for infix, part in ((".moe.router.", "router"), (".moe.experts.", "experts"), (".moe.shared", "shared_experts"),
                        (".attn.", "attention"), (".mlp.", "mlp"), ("norm", "norms")):
        if infix in name:
            return part
    raise KeyError(name)
