"""The best split of N devices into X (FSDP) x Y (TP): continuous optimum and torus mappings."""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import replace

from costmodel.errors import CostModelError
from costmodel.formulas import scaling as sc
from costmodel.record import record
from costmodel.solve.batch import BatchProblem, solve_batch


@record
class Split:
    """One split of a TPU slice between the FSDP (X) and TP (Y) axes, and its compute-bound batch."""

    x: int
    y: int
    mx: int
    my: int
    per_device_batch: float
    x_axes: tuple[int, ...]  # torus axes (indices) the FSDP axis takes


@record
class SplitAnswer:
    """The continuous optimum of the FSDP/TP split and the best whole split a slice allows."""

    x_opt: float  # continuous X_opt at the threshold batch
    continuous_per_device_batch: float
    best: Split | None
    candidates: list[Split]


#: torus axes a slice may have (TPUs have 2 or 3; the split search visits 2^axes subsets)
MAX_AXES = 8


def parse_slice(text: str, torus_axes: int | None = None) -> tuple[int, ...]:
    """'4x4x4' -> (4, 4, 4); at most the device's torus axes (``torus_axes``), else :data:`MAX_AXES`."""
    from costmodel.inputs.bounds import DEVICES
    from costmodel.inputs.files import shown

    if not re.fullmatch(r"\s*[0-9]{1,9}(\s*x\s*[0-9]{1,9})*\s*", text):
        raise CostModelError(f"--slice {shown(text)}: write the torus shape as e.g. 4x4x4")
    shape = tuple(int(part) for part in text.split("x"))
    most = torus_axes or MAX_AXES
    if len(shape) > most:
        raise CostModelError(f"--slice {shown(text)} has {len(shape)} axes; the torus has at most {most}")
    if any(n < 1 for n in shape) or math.prod(shape) > DEVICES:
        raise CostModelError(f"--slice {shown(text)}: every axis needs 1 or more chips, {DEVICES:,} in all at most")
    return shape


def optimize_split(p: BatchProblem, torus: tuple[int, ...] | None) -> SplitAnswer:
    """Continuous optimum for p's M_X, M_Y, and the best whole-axis split of ``torus``."""
    if p.tp_bandwidth is not None:
        raise CostModelError(f"--optimize-split trades X for Y at one bandwidth W (a TPU torus); here the TP axis "
                             f"runs at W_Y = {p.w_tp:.4g} B/s and FSDP at W = {p.bandwidth:.4g} B/s: compare "
                             "layouts with `cost4d plan` instead")
    per_device = sc.optimal_split_batch_per_device(alpha=p.alpha, mx=p.mx, my=p.my, d_ff=p.d_ff,
                                                   overlap=p.overlap)
    x_opt = sc.optimal_fsdp_degree(batch=per_device * p.devices, devices=p.devices, mx=p.mx, my=p.my,
                                   d_ff=p.d_ff)
    if torus is None:
        return SplitAnswer(x_opt, per_device, None, [])
    if math.prod(torus) != p.devices:
        raise CostModelError(f"--slice {'x'.join(map(str, torus))} has {math.prod(torus)} chips, "
                             f"but X x Y = {p.fsdp} x {p.tp} = {p.devices}")
    candidates = []
    for size in range(0, len(torus) + 1):
        for axes in itertools.combinations(range(len(torus)), size):
            x = math.prod(torus[i] for i in axes)
            y = p.devices // x
            spans = sum(torus[i] > 1 for i in axes)  # a torus axis of one chip carries no link
            q = replace(p, fsdp=x, tp=y, mx=max(spans, 1), my=max(sum(n > 1 for n in torus) - spans, 1))
            if all((c.x, c.mx) != (x, q.mx) for c in candidates):  # equal-sized axes give the same split
                candidates.append(Split(x, y, q.mx, q.my, solve_batch(q).per_device_batch, axes))
    best = min(candidates, key=lambda s: (s.per_device_batch, -s.x))
    return SplitAnswer(x_opt, per_device, best if math.isfinite(best.per_device_batch) else None, candidates)
