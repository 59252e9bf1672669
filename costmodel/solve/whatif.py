"""Question (d): ways to stay compute-bound at a smaller batch, each a change of formula inputs.

Every row re-solves the same problem with one input changed; nothing here is a new formula.
"""

from __future__ import annotations

from dataclasses import replace

from costmodel.mathops import prime_factor_count
from costmodel.record import record
from costmodel.solve.batch import BatchProblem, solve_batch
from costmodel.solve.split import clamp_note, optimize_split, slice_spans


@record
class WhatIf:
    """How the compute-bound batch moves under one change of the layout or hardware."""

    key: str  # stable identifier for scripts and notebooks
    change: str
    per_device_batch: float | None  # None: the change leaves no layout (the assumption says why)
    global_batch: float | None
    assumption: str


def what_if(p: BatchProblem, *, torus: tuple[int, ...] | None, torus_axes: int | None,
            dcn_bandwidth: float | None) -> list[WhatIf]:
    """The baseline, then one row per trick (conventions.md, XXL (d))."""
    base = solve_batch(p)
    rows = [WhatIf("as-given", f"as given (overlap {p.overlap})", base.per_device_batch, base.global_batch, "")]

    def add(key, change, q, assumption=""):
        answer = solve_batch(q)
        rows.append(WhatIf(key, change, answer.per_device_batch, answer.global_batch, assumption))

    if p.overlap == "sum":
        add("overlap", "overlap the two axes' communication", replace(p, overlap="max"),
            "T_comms = max(T_FSDP, T_TP)")
    split = optimize_split(p, torus) if p.tp_bandwidth is None else None  # the split trades X for Y at one W
    if split is not None:
        note = clamp_note(p, split)
        rows.append(WhatIf("split-continuous", "best split, continuous X_opt", split.continuous_per_device_batch,
                           split.continuous_per_device_batch * p.devices,
                           (note if note else f"X_opt = {split.x_opt:.2f}") + ", same M_X, M_Y"
                           + ("" if float(split.x_opt).is_integer() else "; not an integer mapping")))
    if split is not None and split.best is not None:
        b = split.best
        add("split-slice", f"best split of the slice: X={b.x} (M_X={b.mx}), Y={b.y} (M_Y={b.my})",
            replace(p, fsdp=b.x, tp=b.y, mx=b.mx, my=b.my), "whole torus axes per logical axis")
    if torus is not None:  # the slice's whole axes say how many the FSDP chips can take
        wider = any(sx > p.mx and (p.tp == 1 or sy >= p.my) for sx, sy in slice_spans(torus, p.fsdp))
    else:  # 2+ chips along each axis, and a torus axis left
        wider = bool(torus_axes) and p.mx + p.my < torus_axes and prime_factor_count(p.fsdp) > p.mx
    if wider:
        add("more-torus-axes", f"spread the FSDP axis over M_X = {p.mx + 1} torus axes", replace(p, mx=p.mx + 1),
            "needs a free torus axis")
    add("fp8-comm", "8-bit communication (fp8 weights and activations on the wire)",
        replace(p, bandwidth=2 * p.bandwidth, tp_bandwidth=p.tp_bandwidth and 2 * p.tp_bandwidth),
        "half the bytes: same as doubling W")
    for stages in (2, 4):
        rows.append(pipeline_row(p, stages))
    accumulate = 4
    dp_only = replace(p, fsdp=p.devices, tp=1, my=1)
    dp = solve_batch(dp_only)
    rows.append(WhatIf("grad-accum", f"pure DP with {accumulate} gradient-accumulation steps",
                       dp.per_device_batch / accumulate,
                       dp.global_batch, f"B/N here is the micro-batch: gradients are reduced once per {accumulate} "
                       "micro-batches, so the micro-batch shrinks, the global batch does not; needs the whole state "
                       "on each device"))
    if dcn_bandwidth:
        rows.append(hsdp_row(p, base.global_batch, dcn_bandwidth))
    return rows


def hsdp_row(p: BatchProblem, slice_batch: float, dcn_bandwidth: float) -> WhatIf:
    """Replicas of the slice over DCN: each slice needs its own bound (``slice_batch`` tokens) and B per slice >
    C / W_dcn, the larger binding.

    The DCN condition (Scaling Book, pods over DCN; conventions.md): after the slice's reduce-scatter each of its N
    chips holds 2DF/N bf16 gradients of a layer, 4DF/N bytes, all-reduced with its replicas over its own W_dcn egress:
    2 (4DF/N)/W_dcn = 8DF/(N W_dcn), against the backward's 8 B_slice D F/(N C): B_slice > C/W_dcn, whatever X and Y.
    """
    dcn_tokens = p.peak_flops / dcn_bandwidth
    if slice_batch == float("inf"):  # no batch makes the slice compute-bound: replicas change nothing
        return WhatIf("hsdp", "HSDP: FSDP inside the slice, replicas across slices over DCN", slice_batch, slice_batch,
                      "the slice is never compute-bound, so neither are its replicas")
    per_slice = max(slice_batch, dcn_tokens)
    binds = (f"B per slice > C/W_dcn = {dcn_tokens:,.0f} binds (the once-per-step gradient all-reduce between slices; "
             f"the slice alone needs {slice_batch:,.0f})" if dcn_tokens >= slice_batch else
             f"the slice's own bound binds (B per slice > C/W_dcn = {dcn_tokens:,.0f} for the gradient all-reduce "
             "between slices is met)")
    return WhatIf("hsdp", "HSDP: FSDP inside the slice, replicas across slices over DCN", per_slice / p.devices,
                  per_slice, f"{binds}; global B here is per slice, S slices take S times it")


def pipeline_row(p: BatchProblem, stages: int) -> WhatIf:
    """k pipeline stages of N/k devices each, Y kept: each stage's FSDP axis is X/k = N/(k Y), and every stage sees the
    whole batch, so B/N (per device of a stage) is solved for that X and the global B is B/N x N/k."""
    key, change = f"pp-{stages}", f"{stages} pipeline stages"
    if p.fsdp % stages:  # N/k devices per stage cannot hold a whole Y-wide TP group X/k times
        each = p.devices / stages
        why = (f"each stage has N/k = {p.devices}/{stages} = {each:g} chip{'' if each == 1 else 's'}, fewer than "
               f"Y = {p.tp}"
               if p.fsdp < stages else f"X = {p.fsdp} does not split into {stages} stages of X/k FSDP chips")
        return WhatIf(key, change, None, None, f"no layout: {why}")
    x = p.fsdp // stages
    mx = max(min(p.mx, prime_factor_count(x)), 1)  # a smaller FSDP group spans no more torus axes than it can fill
    answer = solve_batch(replace(p, fsdp=x, mx=mx))
    stage = f"each stage: X = {x}" + (f" (M_X = {mx})" if x > 1 else "") + f", Y = {p.tp}"
    term = ("no FSDP gather, compute-bound at any batch" if answer.any_batch else
            "B/N per device of a stage, global B = B/N x N/k")
    return WhatIf(key, change, answer.per_device_batch, answer.global_batch,
                  f"{stage}: {term}; same W per axis; needs >= {stages} micro-batches in flight; bubble not counted")
