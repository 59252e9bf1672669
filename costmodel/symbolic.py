"""The formulas as sympy expressions in Scaling Book letters (imported only for --symbolic).

The same functions that give the CLI its numbers are called here with symbols; nothing is
written twice. Returns (name, expression, legend) so the report can print and substitute.
"""

from __future__ import annotations

from fractions import Fraction

import sympy as sp

from costmodel.specs.layout import Layout
from costmodel.specs.recipe import Recipe
from costmodel.strategies import memory as smem
from costmodel.strategies.collective import Collective
from costmodel.strategies.data_comm import data_collectives
from costmodel.strategies.tensor_comm import tensor_collectives

P, A, N, R, Y, B = sp.symbols("P A N R Y B", positive=True)
D, F, L = sp.symbols("D F L", positive=True)


def memory_expressions(recipe: Recipe, layout: Layout, weight_copy_kind: str) -> dict:
    """Per-device memory components in P (params per device before data sharding), A (activation
    bytes per device before data sharding) and N (FSDP shards)."""
    fsdp = N if layout.fsdp > 1 else 1
    copies = {"autocast copies": recipe.compute_bytes * P, "gathered weights": recipe.compute_bytes * P,
              "none": 0}[weight_copy_kind]
    comps = smem.memory_components(
        params=P, activation_bytes=A, weight_copy_bytes=sp.sympify(copies), recipe=recipe,
        zero_stage=layout.zero_stage, fsdp=fsdp,
        shard_fraction=sp.Rational(Fraction(layout.shard_activations).limit_denominator(1000)))
    return {name: sp.sympify(expr) for name, expr in comps.items()}


def memory_total(components: dict):
    """The total, with the 1/N terms gathered: e.g. (16 P + A/2)/N + A/2."""
    total = sp.expand(sum(components.values()))
    return sp.collect(total, 1 / N) if total.has(N) else total


def flops_expressions(model) -> dict:
    """Forward and backward FLOPs per token in D, F, L (and a, k, d_h, V, s for transformers)."""
    from costmodel.formulas import flops as fl

    if model.kind == "ffn":
        shape = dict(d_model=D, d_ff=F, layers=L, gated=model.gated)
        return {"forward_per_token": fl.ffn_forward_flops_per_token(**shape),
                "backward_per_token": fl.ffn_backward_flops_per_token(
                    **shape, input_requires_grad=model.input_requires_grad)}
    a, k, d_h, V, s = sp.symbols("a k d_h V s", positive=True)
    shape = dict(hidden=D, ffn_hidden=F, layers=L, heads=a, kv_heads=k, head_dim=d_h, vocab=V,
                 seq_len=s, gated=model.mlp == "swiglu")
    return {"forward_per_token": sp.expand(fl.transformer_forward_flops_per_token(**shape)),
            "backward_per_token": sp.expand(fl.transformer_backward_flops_per_token(**shape))}


def collective_expressions(model, recipe: Recipe, layout: Layout) -> list[Collective]:
    """The step's collectives with P, N, R, Y, B, D, L in place of numbers."""
    out = data_collectives(
        params=P, recipe=recipe, zero_stage=layout.zero_stage, fsdp=N if layout.fsdp > 1 else 1,
        dp=R if layout.dp > 1 else 1, layers=L, reshard_after_forward=layout.reshard_after_forward,
        has_fsdp=layout.fsdp > 1, has_dp=layout.dp > 1)
    if layout.tp > 1:
        out += tensor_collectives(tokens=B, width=D, layers=L, tp=Y, act_bytes=recipe.activation_bytes,
                                  sp=layout.sp, pairs_per_layer=1 if model.kind == "ffn" else 2)
    return out


def substitutions(model, layout: Layout, breakdown) -> dict:
    """Values of the letters for this model and layout."""
    values = {P: breakdown.params_per_device, A: breakdown.activation_bytes, N: layout.fsdp,
              R: layout.dp, Y: layout.tp, B: layout.tokens // layout.cp,
              L: breakdown.stage_layers}
    width = model.d_model if model.kind == "ffn" else model.hidden
    values[D] = width
    if model.kind == "ffn":
        values[F] = model.d_ff
    return values


def latex(expr) -> str:
    return sp.latex(expr)


def text(expr) -> str:
    return sp.sstr(expr)


