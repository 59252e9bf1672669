"""One model, three evaluations: numbers, numpy arrays and sympy letters agree on every layout.

For random groups of layouts (a model, recipe, hardware and structure: ZeRO stage, SP, recompute
policy, schedule, CP kind, model ends, ...; in each group the same axes are above 1), the aggregator
is evaluated three ways:

* one layout at a time with numbers (the CLI's path),
* the whole group at once with numpy arrays (the planner's path): equal element by element,
* once with letters (the path of --symbolic, explain and the solvers): the expressions, evaluated at
  each layout, equal the numbers. FLOPs and bytes agree to the byte on an exact (rational) evaluation
  and to float64 rounding (1e-12) on the vectorised one; seconds to 1e-9 relative.

Memory (the heaviest stage), FLOPs (model and hardware), every collective's bytes and time, and the
step time are compared. The slow tier draws >= 10,000 layouts; the fast tier a few hundred.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

import numpy as np
import pytest
import sympy as sp

from costmodel.cost.collectives import axis_family
from costmodel.cost.evaluate import evaluate
from costmodel.cost.point import LETTERS, Point
from costmodel.cost.shape import Shape
from costmodel.cost.symbolic import formula
from costmodel.errors import CostModelError
from costmodel.specs.layout import Layout
from costmodel.specs.load import load_hardware, load_model, load_recipe
from costmodel.specs.model import FFNStack, Transformer

#: sequences of 1,024 tokens at most, so every micro-batch below (1,024 to 4,096 tokens) holds whole ones: a layout
#: with fewer tokens than its model's sequence runs a shorter one (evaluate.layout_shape), which the letters'
#: formula for the first layout would then fix for all
MODELS = {
    "xxl": load_model("xxl"),
    "ffn-gated": FFNStack(name="ffn-gated", d_model=512, d_ff=2048, layers=12, gated=True, activation="silu",
                          input_requires_grad=True),
    "llama3-8b": load_model("llama3-8b").model_copy(update={"seq_len": 1024}),
    "gpt2": load_model("gpt2"),
    "qwen-like": Transformer(name="qwen-like", hidden=1024, ffn_hidden=4096, layers=10, heads=16, kv_heads=4,
                             vocab=32000, qkv_bias=True, seq_len=1024),
    # bias-free blocks whose matmuls come in other orders (--recompute op: fused qkv, o, gate-up, down; GeLU)
    "llama-fused": Transformer(name="llama-fused", hidden=1024, ffn_hidden=2816, layers=8, heads=16, kv_heads=4,
                               vocab=32000, fused_projections=True, seq_len=1024),
    "gelu-plain": Transformer(name="gelu-plain", hidden=768, ffn_hidden=3072, layers=6, heads=12, kv_heads=12,
                              vocab=32000, mlp="gelu", norm="layernorm", seq_len=1024),
}
RECIPES = ["cs336", "fsdp2", "megatron", "zero", "scaling-book"]
HARDWARE = ["h100-sxm", "a100-80gb", "tpu-v5p"]
DEGREES = {"dp": [2, 4, 8], "fsdp": [2, 4, 8, 16], "tp": [2, 4, 8], "pp": [2, 3, 4, 6], "cp": [2, 4]}


@dataclass(frozen=True)
class Group:
    model: str
    recipe: str
    hardware: str
    on: tuple  # axes above 1
    structure: dict
    many: dict  # which of tokens' companions are above 1: microbatches, grad_accum, chunks, recompute_layers


def draw_group(rng: random.Random) -> Group:
    on = tuple(a for a in DEGREES if rng.random() < 0.45)
    pipelined = "pp" in on
    schedule = rng.choice(["gpipe", "1f1b", "interleaved", "zb-h1"]) if pipelined else "1f1b"
    recompute = rng.choice(["none", "selective", "full", "every", "op"])
    structure = dict(zero=rng.choice([0, 1, 2, 3]), sp="tp" in on and rng.random() < 0.5, recompute=recompute,
                     flash=rng.random() < 0.7, norm_stats=rng.random() < 0.7, schedule=schedule,
                     cp_kind=rng.choice(["ring", "a2a", "allgather", "alltoall"]), tp_ends=rng.choice(["vocab-parallel", "replicated"]),
                     reshard_after_forward=rng.random() < 0.7,
                     shard_activations=0.5 if "fsdp" in on and rng.random() < 0.2 else 0.0)
    many = dict(microbatches=pipelined or rng.random() < 0.3, grad_accum=rng.random() < 0.4,
                chunks=schedule == "interleaved" and rng.random() < 0.7,
                recompute_layers=recompute == "every" and rng.random() < 0.6, torus=rng.random() < 0.5)
    structure["checkpoint"] = rng.choice(["reentrant", "non-reentrant"])  # how full recomputation reruns (TP too)
    return Group(rng.choice(list(MODELS)), rng.choice(RECIPES), rng.choice(HARDWARE), on, structure, many)


def draw_layout(rng: random.Random, group: Group) -> Layout | None:
    fields = {axis: rng.choice(DEGREES[axis]) if axis in group.on else 1 for axis in DEGREES}
    pp = fields["pp"]
    fields["microbatches"] = (pp * rng.choice([1, 2, 4]) if pp > 1 else rng.choice([2, 4])) \
        if group.many["microbatches"] else 1
    if pp > 1 and group.structure["schedule"] != "gpipe" and fields["microbatches"] < pp:
        return None
    fields["grad_accum"] = rng.choice([2, 3]) if group.many["grad_accum"] else 1
    fields["chunks"] = rng.choice([2, 3]) if group.many["chunks"] else 1
    fields["recompute_layers"] = rng.choice([2, 3]) if group.many["recompute_layers"] else 1
    fields["tokens"] = rng.choice([1024, 2048, 4096])
    if group.hardware == "tpu-v5p" and group.many["torus"] and ("fsdp" in group.on or "dp" in group.on):
        if fields["dp"] * fields["fsdp"] < 4:
            return None  # two torus axes need 2 chips or more along each; M_X is the group's (its letters build once)
        fields["mx"] = 2  # the data axis over two torus axes (W_ici M_X)
    try:
        layout = Layout(**fields, **group.structure)
        evaluate(Shape.of(MODELS[group.model]), load_recipe(group.recipe), Point.of(layout))  # the checks
    except (CostModelError, ValueError):
        return None
    return layout


def quantities(cost, by_row: bool = True) -> dict:
    """Name -> value of everything compared: memory, FLOPs, each collective's bytes and time, the step.

    ``by_row=False`` sums rows by (axis family, op, pass): an array of layouts lists a degree-1 data
    axis as ZeRO's rows at zero where a single layout lists plain DDP, the same traffic under other names.
    """
    out = {"memory": cost.memory_bytes, "model_flops": cost.flops.total, "hardware_flops":
           cost.flops.hardware_per_token * cost.flops.tokens}
    for row in cost.collectives:
        c = row.collective
        key = c.key if by_row else (axis_family(c.axis), c.op, c.phase)
        for kind, value in (("bytes", c.bytes_sent), ("seconds", row.seconds)):
            out[(kind,) + key] = out.get((kind,) + key, 0) + value
    if cost.step is not None:
        out["step"] = cost.step.step_s
    return out


def close(name, a, b, exact=False) -> bool:
    seconds = name == "step" or (isinstance(name, tuple) and name[0] == "seconds")
    if seconds:
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-15)
    return math.isclose(a, b, rel_tol=1e-15 if exact else 1e-12, abs_tol=0.5)  # to the byte


def check_group(group: Group, layouts: list[Layout]) -> int:
    shape, recipe, hardware = Shape.of(MODELS[group.model]), load_recipe(group.recipe), load_hardware(group.hardware)
    costs = [evaluate(shape, recipe, Point.of(lay), hardware) for lay in layouts]
    scalars = [quantities(c) for c in costs]
    summed = [quantities(c, by_row=False) for c in costs]
    steps = [c.step for c in costs]

    # numpy arrays: one element per layout, element by element equal to the numbers
    points = [Point.of(lay) for lay in layouts]
    columns = {name: np.array([getattr(p, name) for p in points]) for name in
               ("dp", "fsdp", "tp", "pp", "cp", "tokens", "microbatches", "chunks", "grad_accum", "mx", "my",
                "recompute_layers")}
    arrays = quantities(evaluate(shape, recipe, Point(**columns, **group.structure), hardware), by_row=False)
    for i, scalar in enumerate(summed):
        for name, value in arrays.items():
            assert close(name, float(value[i] if np.ndim(value) else value), float(scalar.get(name, 0))), \
                (group, layouts[i], name, value[i], scalar.get(name, 0))
        assert set(scalar) <= set(arrays), (group, set(scalar) - set(arrays))

    # letters: built once for the group, evaluated exactly at two layouts and vectorised at all
    lettered = formula(MODELS[group.model], recipe, layouts[0], hardware)
    symbolic = quantities(lettered.cost)
    assert set(scalars[0]) <= set(symbolic), (group, set(scalars[0]) - set(symbolic))
    letters = sorted(lettered.values, key=str)
    names = list(symbolic)
    function = sp.lambdify(letters, [sp.sympify(symbolic[n]) for n in names], modules="numpy")
    at_each = [_letter_values(lay, lettered, step) for lay, step in zip(layouts, steps)]
    with np.errstate(divide="ignore", invalid="ignore"):
        evaluated = function(*[np.array([at[s] for at in at_each], dtype=float) for s in letters])
    for k, name in enumerate(names):
        column = np.broadcast_to(np.asarray(evaluated[k], dtype=float), (len(layouts),))
        for i, scalar in enumerate(scalars):
            assert close(name, float(column[i]), float(scalar.get(name, 0))), \
                (group, layouts[i], name, column[i], scalar.get(name, 0))
    for i in (0, len(layouts) - 1):
        for name in ("memory", "model_flops", "hardware_flops"):
            assert close(name, _exact(symbolic[name], at_each[i]), float(scalars[i][name]), exact=True), \
                (group, layouts[i], name)
    return len(layouts)


def _letter_values(layout: Layout, lettered, step) -> dict:
    """Letter -> value at this layout: the group's letters, this layout's degrees, its matmul efficiency and
    attention kernel rates (table look-ups, letters in the formula)."""
    by_name = {str(s): s for s in lettered.values}
    out = dict(lettered.values)
    out.update({by_name[LETTERS[f]]: v for f, v in Point.of(layout).values().items() if LETTERS[f] in by_name})
    if "e_mm" in by_name:
        out[by_name["e_mm"]] = step.matmul_efficiency
    for letter, rate in zip(("R_fwd", "R_bwd"), step.attention_rates or ()):  # flash attention's measured rates
        out[by_name[letter]] = rate
    return out


def _exact(expr, at: dict) -> float:
    exact = {k: sp.Integer(v) if isinstance(v, int) else sp.Float(v, 30) for k, v in at.items()}
    return float(sp.sympify(expr).xreplace(exact))


def run(seed: int, groups: int, per_group: int) -> tuple[int, list[Group]]:
    rng = random.Random(seed)
    checked, seen = 0, []
    while groups:
        group = draw_group(rng)
        layouts = []
        for _ in range(per_group * 6):
            layout = draw_layout(rng, group)
            if layout is not None:
                layouts.append(layout)
            if len(layouts) == per_group:
                break
        if len(layouts) < max(2, per_group // 4):
            continue  # a structure this model rejects too often: draw another
        checked += check_group(group, layouts)
        seen.append(group)
        groups -= 1
    return checked, seen


@pytest.mark.slow
def test_three_evaluations_agree_fast():
    checked, _ = run(seed=1, groups=10, per_group=40)
    assert checked >= 100


@pytest.mark.slow
def test_three_evaluations_agree_on_ten_thousand_layouts():
    checked, groups = run(seed=2026, groups=60, per_group=200)
    assert checked >= 10_000
    # the draw covers every model, axis, recompute policy, schedule, ZeRO stage, CP kind and device
    assert {g.model for g in groups} == set(MODELS)
    assert {a for g in groups for a in g.on} == set(DEGREES)
    assert {g.structure["recompute"] for g in groups} == {"none", "selective", "full", "every", "op"}
    assert {g.structure["checkpoint"] for g in groups if g.structure["recompute"] in ("full", "every")
            and "tp" in g.on} == {"reentrant", "non-reentrant"}
    assert {g.structure["schedule"] for g in groups if "pp" in g.on} == {"gpipe", "1f1b", "interleaved", "zb-h1"}
    assert {g.structure["zero"] for g in groups} == {0, 1, 2, 3}
    assert {g.structure["cp_kind"] for g in groups if "cp" in g.on} == {"ring", "a2a", "allgather", "alltoall"}
    assert {g.hardware for g in groups} == set(HARDWARE)


#: framework profiles and the recipes they train with, for the numbers-and-arrays check of their terms
FRAMEWORK_RECIPES = {"torchtitan": "fsdp2", "megatron": "megatron", "nanotron": "megatron", "deepspeed": "zero"}


def check_framework_group(group: Group, layouts: list[Layout], framework) -> int:
    """A framework's terms (its overheads, recomputed layer, FSDP2's copies, fitted time) one layout at a time and
    as arrays, element by element (cost/symbolic.py has no framework path: letters are not compared). Layouts the
    framework refuses one at a time are left out of the comparison."""
    shape, hardware = Shape.of(MODELS[group.model]), load_hardware(group.hardware)
    recipe = load_recipe(FRAMEWORK_RECIPES[framework.name])
    kept, scalars = [], []
    for lay in layouts:
        try:
            scalars.append(quantities(evaluate(shape, recipe, Point.of(lay), hardware, framework=framework),
                                      by_row=False))
            kept.append(lay)
        except CostModelError:
            continue
    if not kept:
        return 0
    points = [Point.of(lay) for lay in kept]
    columns = {name: np.array([getattr(p, name) for p in points]) for name in
               ("dp", "fsdp", "tp", "pp", "cp", "tokens", "microbatches", "chunks", "grad_accum", "mx", "my",
                "recompute_layers")}
    arrays = quantities(evaluate(shape, recipe, Point(**columns, **group.structure), hardware, framework=framework),
                        by_row=False)
    for i, scalar in enumerate(scalars):
        for name, value in arrays.items():
            assert close(name, float(value[i] if np.ndim(value) else value), float(scalar.get(name, 0))), \
                (framework.name, group, kept[i], name)
    return len(kept)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(FRAMEWORK_RECIPES))
def test_numbers_and_arrays_agree_under_a_framework(name):
    """The planner's arrays and `memory`/`step`'s numbers give the same memory (the framework's terms included),
    collectives and step under each framework profile, over random groups of layouts."""
    from costmodel.specs.framework_catalog import FRAMEWORKS

    rng, checked, groups = random.Random(7), 0, 0
    while groups < 6:
        group = draw_group(rng)
        if group.hardware != "h100-sxm" or group.model in ("xxl", "ffn-gated"):
            continue  # the frameworks' terms are for transformers; their fitted time for h100-sxm
        layouts = [lay for lay in (draw_layout(rng, group) for _ in range(60)) if lay is not None][:25]
        found = check_framework_group(group, layouts, FRAMEWORKS[name])
        checked, groups = checked + found, groups + (found > 0)
    # FSDP inside pipeline stages (HSDP replicas too), which random groups rarely draw
    for reshard in (True, False):
        structure = dict(zero=3, sp=False, recompute="full", flash=True, norm_stats=True, schedule="1f1b",
                         cp_kind="ring", tp_ends="vocab-parallel", reshard_after_forward=reshard, shard_activations=0.0,
                         checkpoint="reentrant")
        group = Group("llama3-8b", FRAMEWORK_RECIPES[name], "h100-sxm", ("fsdp", "pp", "dp"), structure,
                      dict(microbatches=True, grad_accum=False, chunks=False, recompute_layers=False, torus=False))
        layouts = [lay for lay in (draw_layout(rng, group) for _ in range(60)) if lay is not None][:20]
        checked += check_framework_group(group, layouts, FRAMEWORKS[name])
    # CP beside the data axis, which torchtitan and Megatron shard over together (Point.sharding)
    frame = FRAMEWORKS[name]
    structure = dict(zero=frame.zero_stages[0] if frame.zero_stages else 3, sp=False, recompute="none", flash=True,
                     norm_stats=True, schedule="1f1b", cp_kind=(frame.cp_kinds or ["ring"])[0], tp_ends="vocab-parallel",
                     reshard_after_forward=True, shard_activations=0.0, checkpoint="reentrant")
    axes = ("fsdp", "cp", "dp") if frame.hybrid_zero_min <= structure["zero"] else ("fsdp", "cp")  # its replicas
    group = Group("llama3-8b", FRAMEWORK_RECIPES[name], "h100-sxm", axes, structure,
                  dict(microbatches=False, grad_accum=True, chunks=False, recompute_layers=False, torus=False))
    layouts = [lay for lay in (draw_layout(rng, group) for _ in range(60)) if lay is not None][:20]
    with_cp = check_framework_group(group, layouts, frame)
    assert with_cp >= 5
    assert checked + with_cp >= 25
