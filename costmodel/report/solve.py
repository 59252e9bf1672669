"""Output of `cost4d solve batch`: answer, thresholds, split and what-if tables, or JSON."""

from __future__ import annotations

import math

from costmodel.report.common import console, emitted_json, table
from costmodel.report.tables import literal


def _finite(value: float | None):
    return value if value is not None and math.isfinite(value) else None


def _tokens(value: float | None, digits: int) -> str:
    """A what-if row's batch: 'no layout' where the change leaves none, 'never' where it is never compute-bound."""
    if value is None:
        return "no layout"
    return f"{value:,.{digits}f}" if math.isfinite(value) else "never"


def batch(model, hardware, answer, split, thresholds: list, rows: list | None, as_json: bool) -> None:
    """Print the compute-bound answer; ``thresholds`` and the what-if ``rows`` come from costmodel.solve."""
    p = answer.problem
    payload = {
        "model": model.name, "hardware": hardware.name, "overlap": p.overlap, "pass": p.pass_,
        "per_device_batch": answer.per_device_batch, "global_batch": answer.global_batch,
        "binding_term": answer.binding_term, "verdict": answer.verdict, "alpha": p.alpha,
        "inputs": {"X": p.fsdp, "Y": p.tp, "N": p.devices, "M_X": p.mx, "M_Y": p.my, "C": p.peak_flops,
                   "W": p.bandwidth, "W_Y": p.w_tp, "D": p.d_model, "F": p.d_ff},
    }
    if split is not None:
        payload["x_opt"] = split.x_opt  # the best continuous X in [1, N]; the formula's own value beside it
        payload["x_stationary"] = split.x_stationary
        payload["continuous_per_device_batch"] = split.continuous_per_device_batch
        if split.best is not None:
            b = split.best
            payload["best_split"] = {"x": b.x, "y": b.y, "mx": b.mx, "my": b.my, "per_device_batch": b.per_device_batch}
            payload["splits"] = [{"x": s.x, "y": s.y, "mx": s.mx, "my": s.my,
                                  "per_device_batch": _finite(s.per_device_batch)} for s in split.candidates]
    payload["thresholds"] = [vars(t) for t in thresholds]
    if rows is not None:
        payload["what_if"] = [{"key": r.key, "change": r.change, "per_device_batch": _finite(r.per_device_batch),
                               "global_batch": _finite(r.global_batch), "assumption": r.assumption} for r in rows]
    if emitted_json(payload, None, as_json):
        return
    out = console()
    out.print(f"[bold]{literal(model.name)}[/] on {literal(hardware.name)}: X = {p.fsdp} (M_X = {p.mx}), Y = {p.tp} (M_Y = {p.my}), "
              f"N = {p.devices}; C = {p.peak_flops:.4g} FLOP/s, W = {p.bandwidth:.4g} B/s, alpha = {p.alpha:,.1f}"
              + (f", TP at W_Y = {p.w_tp:.4g} B/s (alpha_Y = {p.alpha_tp:,.1f})" if p.tp_bandwidth is not None else "")
              + "; "
              f"pass {p.pass_}, overlap {p.overlap}")
    from costmodel.solve.batch import MLP_ONLY

    if not (getattr(model, "kind", "") == "ffn" and not getattr(model, "gated", False)):
        out.print(f"Model: {MLP_ONLY} (D = {p.d_model:,}, F = {p.d_ff:,})")
    a_y = "alpha" if p.tp_bandwidth is None else "alpha_Y"
    formula = (f"(alpha/(Y M_X)) / (1 - {a_y} Y/(M_Y F))" if p.overlap == "sum" else "alpha/(Y M_X)")
    if answer.any_batch:  # the formula's FSDP term is gone (X = 1): the verdict says why, without it
        out.print(f"[bold]{answer.verdict[0].upper()}{answer.verdict[1:]}[/] (B/N = 0)")
    else:
        out.print(f"Compute-bound when B/N > {formula} = [bold]{answer.per_device_batch:,.1f}[/] tokens per device; "
                  f"global B > [bold]{answer.global_batch:,.0f}[/] tokens (binding: {answer.binding_term})")
    if split is not None:
        from costmodel.solve.split import clamp_note

        note = clamp_note(p, split)
        if note:
            out.print(f"Optimal split: X_opt = sqrt(B N M_X/(F M_Y)) at B/N = {'4 ' if p.overlap == 'sum' else ''}"
                      f"alpha^2/(M_X M_Y F): {note}; B/N > {split.continuous_per_device_batch:,.1f}")
        else:
            out.print(f"Optimal split: X_opt = sqrt(B N M_X/(F M_Y)) = {split.x_opt:.2f}, B/N > "
                      f"{'4 ' if p.overlap == 'sum' else ''}alpha^2/(M_X M_Y F) = "
                      f"{split.continuous_per_device_batch:,.1f}")
        if split.best is not None:
            t = table("Splits of the slice (whole torus axes per logical axis)", ">X", ">M_X", ">Y", ">M_Y", ">B/N")
            for s in sorted(split.candidates, key=lambda s: s.per_device_batch):
                t.add_row(str(s.x), str(s.mx), str(s.y), str(s.my),
                          f"{s.per_device_batch:,.1f}" if math.isfinite(s.per_device_batch) else "never")
            out.print(t)
    if rows:
        t = table("What if (question (d))", "change", ">B/N", ">global B", "assumption")
        for r in rows:
            t.add_row(r.change, _tokens(r.per_device_batch, 1), _tokens(r.global_batch, 0), r.assumption)
        out.print(t)
    t = table("Single-strategy thresholds", "strategy", "condition", ">value", "unit")
    for th in thresholds:
        t.add_row(th.strategy, th.condition, f"{th.value:,.1f}", th.unit)
    out.print(t)
