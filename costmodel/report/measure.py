"""Output of `cost4d validate`: per-row errors, medians, and the fit with its residuals."""

from __future__ import annotations

import math

from costmodel.report.common import console, emit_json, table
from costmodel.report.tables import literal
from costmodel.units import UnitSystem, format_bytes


#: rows the text table shows (a long log's every row is in --json)
TABLE_ROWS = 200


def rows_json(rows) -> list[dict]:
    """One row per measured size: the op, the group, what the prediction assumed, both times, the error."""
    return [{"op": r.collective, "collective": r.collective, "algorithm": r.algorithm, "bytes": r.bytes,
             "ranks": r.nodes * r.gpus_per_node, "nodes": r.nodes, "gpus_per_node": r.gpus_per_node,
             "level": r.level, "assumed": r.assumed, "assumed_algorithm": r.assumed.partition("/")[0],
             "protocol": r.assumed.partition("/")[2] or None, "measured_s": r.measured_s,
             "predicted_s": r.predicted_s, "error_pct": r.error_pct,
             "nccl_release": r.release.partition(" ")[0] or None, "calibration": r.calibration or None,
             "placement": r.placement, "dtype": r.dtype or None} for r in rows]


#: what tells a log's rows apart beyond op, algorithm and size: a column each, shown only where the rows differ in it
_DISTINGUISHING = {"nodes x GPUs": lambda r: f"{r.nodes}x{r.gpus_per_node}", "dtype": lambda r: r.dtype or "-",
           "placement": lambda r: r.placement}


def distinguishing(rows) -> dict:
    """The columns of :data:`_DISTINGUISHING` whose values differ among ``rows`` (worlds, dtypes, placements)."""
    return {name: cell for name, cell in _DISTINGUISHING.items() if len({cell(r) for r in rows}) > 1}


def validation(spec, before, fits, after, out, as_json: bool, min_bytes: int = 2**20) -> None:
    from costmodel.measure.validate import summary

    rows = after if after is not None else before
    payload = {"hardware": spec.name, "fitted": after is not None, "min_bytes": min_bytes, "rows": rows_json(rows),
               **summary(rows, min_bytes), "uncalibrated": summary(before, min_bytes)}
    if fits:
        payload["fit"] = [{"collective": f.collective, "algorithm": f.algorithm, "level": f.level, "ranks": f.ranks,
                           "latency_s": f.latency_s, "bandwidth_bytes_per_s": f.stored_bandwidth,
                           "model": f.model, "scale": f.scale,
                           "median_abs_error_pct": f.median_abs_error_pct,
                           "residuals_pct": [{"bytes": s, "error_pct": e} for s, e in f.residuals_pct]} for f in fits]
    if out:
        payload["calibrated_spec"] = str(out)
    if as_json:
        emit_json(payload)
        return
    c = console()
    shown = [r for r in rows if r.bytes >= min_bytes]
    extra = distinguishing(shown)
    t = table(f"Predicted vs measured on {literal(spec.name)}" + (" (after --fit)" if after is not None else ""),
              "collective", "algorithm", *extra, ">size", "assumed", ">measured", ">predicted", ">error")
    for r in shown[:TABLE_ROWS]:
        t.add_row(r.collective, r.algorithm, *(cell(r) for cell in extra.values()),
                  format_bytes(r.bytes, UnitSystem.iec), r.assumed, f"{r.measured_s * 1e6:,.1f} us",
                  f"{r.predicted_s * 1e6:,.1f} us", f"{r.error_pct:+.1f}%")
    c.print(t)
    if len(shown) > TABLE_ROWS:
        c.print(f"({len(shown) - TABLE_ROWS:,} more rows not shown; --json lists every row; the medians use all)")
    releases = sorted({r.release for r in rows if r.release})
    if releases:
        c.print("NCCL tuner: " + "; ".join(releases))
    for used in sorted({f"{r.collective} ({r.algorithm}): {r.calibration}" for r in rows if r.calibration}):
        c.print(f"Calibration: {literal(used)}")  # the algorithm the log ran: one op's fits differ by it
    _print_summary(c, "datasheet spec" if fits else "this spec", summary(before, min_bytes), min_bytes)
    if fits:
        t = table("Fit: t = alpha + c S / B (c = 2(n-1)/n all-reduce; (n-1)/n all-gather, reduce-scatter, all-to-all, "
                  "gather, scatter; 1 send/recv, broadcast, reduce; (n+1)/n NVLS), or t = alpha + b x NCCL's tuned "
                  "time where the spec names its NCCL topology",
                  "collective", "algorithm", ">ranks", ">alpha", ">B or b", ">median |res|", ">max |res|")
        for f in fits:
            t.add_row(f.collective, f.algorithm, str(f.ranks), f"{f.latency_s * 1e6:.1f} us",
                      f"b = {f.scale:.3f}" if f.model == "nccl" else _bandwidth(f.bandwidth_bytes_per_s),
                      f"{f.median_abs_error_pct:.1f}%",
                      f"{max(abs(e) for _, e in f.residuals_pct):.1f}%")
        c.print(t)
        _print_summary(c, "calibrated", summary(after, min_bytes), min_bytes)
        if out:
            c.print(f"Calibrated spec written to {out}; use it with --hardware {out}")
    c.print(f"Rows below {format_bytes(min_bytes, UnitSystem.iec)} are left out of the table and the medians "
            "(latency-dominated).")


def _print_summary(c, label: str, s: dict, min_bytes: int) -> None:
    parts = ", ".join(f"{k}: {v:.1f}%" for k, v in s["per_collective"].items() if v is not None)
    overall = s["median_abs_error_pct"]
    floor = format_bytes(min_bytes, UnitSystem.iec)
    c.print(f"Median |error|, sizes >= {floor}, {label}: [bold]{overall:.1f}%[/] ({parts})" if overall is not None
            else f"No rows >= {floor} ({label}).")
    levels = {k: v for k, v in s["per_level"].items() if v is not None}
    if len(levels) > 1:
        c.print("  per level: " + ", ".join(f"{k}: {v:.1f}%" for k, v in levels.items()))


def _bandwidth(value: float) -> str:
    """A fitted bandwidth; an infinite one means time did not grow with size over the fitted points."""
    return f"{value / 1e9:.1f} GB/s" if math.isfinite(value) else "flat (time does not grow with size)"
