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

    x_opt: float  # the best continuous X in [1, N] (X_opt clamped, or X = 1 where that is better)
    continuous_per_device_batch: float
    best: Split | None
    candidates: list[Split]
    x_stationary: float | None = None  # sqrt(B N M_X/(F M_Y)) where T_FSDP = T_TP; differs from x_opt when clamped


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


def slice_spans(torus: tuple[int, ...], chips: int) -> list[tuple[int, int]]:
    """(torus axes X spans, torus axes Y spans) for each set of whole axes of ``torus`` whose chips make ``chips`` X
    (Y the rest); an axis of one chip carries no link and counts for neither. Empty: X is no such product."""
    ways = set()
    for size in range(0, len(torus) + 1):
        for axes in itertools.combinations(range(len(torus)), size):
            if math.prod(torus[i] for i in axes) == chips:
                spans = sum(torus[i] > 1 for i in axes)
                ways.add((spans, sum(n > 1 for n in torus) - spans))
    return sorted(ways)


#: how a message names the slice and the torus axes of each logical axis: the CLI's flags, or the API's parameters
CLI_NAMES = {"slice": "--slice", "mx": "--mx", "my": "--my", "layout": "X x Y", "optimize": "--optimize-split",
             "plan": "`cost4d plan`"}
API_NAMES = {"slice": "torus =", "mx": "mx =", "my": "my =", "layout": "fsdp x tp", "optimize": "optimize_split",
             "plan": "api.plan"}


def check_chips(p: BatchProblem, torus: tuple[int, ...], names: dict = CLI_NAMES) -> None:
    """One line where ``torus`` does not hold the question's N = X Y chips."""
    if math.prod(torus) != p.devices:
        raise CostModelError(f"{names['slice']} {'x'.join(map(str, torus))} has {math.prod(torus)} chips, "
                             f"but {names['layout']} = {p.fsdp} x {p.tp} = {p.devices}")


def check_slice(p: BatchProblem, torus: tuple[int, ...], names: dict = CLI_NAMES) -> None:
    """One line where the layout as given does not map onto ``torus``: N = X Y must be its chips, X the chips of whole
    torus axes of it (Y those of the rest), and M_X/M_Y no more axes than those take (as cost.checks._torus_rule:
    a group spans at most the axes it can fill). ``names``: what to call the slice and M_X, M_Y in the message."""
    shape, where = "x".join(map(str, torus)), names["slice"]
    check_chips(p, torus, names)
    ways = slice_spans(torus, p.fsdp)
    if not ways:
        sizes = sorted({math.prod(torus[i] for i in axes) for size in range(len(torus) + 1)
                        for axes in itertools.combinations(range(len(torus)), size)})
        raise CostModelError(f"{where} {shape}: X = {p.fsdp} (Y = {p.tp}) is not made of whole torus axes of it: "
                             f"whole axes give X = {', '.join(map(str, sizes))}")
    fits = [(sx, sy) for sx, sy in ways if (p.fsdp == 1 or p.mx <= sx) and (p.tp == 1 or p.my <= sy)]
    if not fits:
        sx, sy = max(ways)
        flag, axis, chips, most, asked = ((names["mx"], "FSDP", p.fsdp, sx, p.mx) if p.fsdp > 1 and p.mx > sx else
                                          (names["my"], "TP", p.tp, sy, p.my))
        raise CostModelError(f"{flag} {asked}: on {where} {shape} the {axis} axis's {chips:,} chips span at most {most} "
                             f"torus {'axis' if most == 1 else 'axes'} (whole axes of the slice)")


def optimize_split(p: BatchProblem, torus: tuple[int, ...] | None, names: dict = CLI_NAMES) -> SplitAnswer:
    """Continuous optimum for p's M_X, M_Y, and the best whole-axis split of ``torus`` (any split of its chips, the
    layout as given or not); ``names``: the CLI's or the API's words in a refusal."""
    if p.tp_bandwidth is not None:
        raise CostModelError(f"{names['optimize']} trades X for Y at one bandwidth W (a TPU torus); here the TP axis "
                             f"runs at W_Y = {p.w_tp:.4g} B/s and FSDP at W = {p.bandwidth:.4g} B/s: compare "
                             f"layouts with {names['plan']} instead")
    x_opt, per_device, x_stationary = continuous_split(p)
    if torus is None:
        return SplitAnswer(x_opt, per_device, None, [], x_stationary)
    check_chips(p, torus, names)
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
    return SplitAnswer(x_opt, per_device, best if math.isfinite(best.per_device_batch) else None, candidates,
                       x_stationary)


def continuous_split(p: BatchProblem) -> tuple[float, float, float]:
    """(X, B/N, X_opt): the best real X in [1, N] for p's M_X, M_Y, and the stationary X_opt.

    Where T_FSDP = T_TP, X_opt = sqrt(B N M_X/(F M_Y)) and B/N = 4 alpha^2/(M_X M_Y F) (sum) or alpha^2/(M_X M_Y F)
    (max). X = X Y / Y must lie in [1, N]: outside it the best is an end, X = 1 (Y = N: no FSDP gather, compute-bound
    at any batch while alpha N/(M_Y F) < 1) or X = N (Y = 1: pure FSDP, alpha/M_X). X = 1 is also checked inside:
    dropping the gather can beat the stationary point, so no answer here is worse than a layout of the same N.
    """
    per_device = sc.optimal_split_batch_per_device(alpha=p.alpha, mx=p.mx, my=p.my, d_ff=p.d_ff,
                                                   overlap=p.overlap)
    x_opt = sc.optimal_fsdp_degree(batch=per_device * p.devices, devices=p.devices, mx=p.mx, my=p.my,
                                   d_ff=p.d_ff)
    ends = [(float(x), solve_batch(replace(p, fsdp=x, tp=p.devices // x)).per_device_batch)
            for x in sorted({1, p.devices})]
    inside = [(x_opt, per_device)] if 1 < x_opt < p.devices else []
    x, best = min(inside + ends, key=lambda option: option[1])
    return x, best, x_opt


def clamp_note(p: BatchProblem, split: SplitAnswer) -> str:
    """Why the continuous best is not the stationary X_opt ('' where it is): out of [1, N], or beaten by X = 1."""
    xs = split.x_stationary
    if xs is None or split.x_opt == xs:
        return ""
    where = (f"X_opt = {xs:.2f} < 1 is no layout" if xs < 1 else
             f"X_opt = {xs:.2f} > N = {p.devices} is no layout" if xs > p.devices else
             f"X = 1 beats X_opt = {xs:.2f}")
    if split.x_opt == 1:
        end = f"X = 1, Y = N = {p.devices}: no FSDP gather" + (", compute-bound at any batch"
                                                                 if split.continuous_per_device_batch == 0 else "")
    else:
        end = f"X = N = {p.devices}, Y = 1: pure FSDP, B/N > alpha/M_X"
    return f"{where}; best in 1 <= X <= N: {end}"
