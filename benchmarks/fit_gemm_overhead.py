"""Fit the per-GEMM fixed time t_0 of the GEMM shape curve on the H100 table; check it on other devices' tables.

    python benchmarks/fit_gemm_overhead.py

A device measured at one shape (A100: one cuBLAS kernel; MI325X: one hipBLASLt kernel) gets smaller GEMMs'
efficiency from t = F / (e_max C) + t_0 through that kernel (costmodel.formulas.step.gemm_shape_efficiency).
t_0 is fitted here on XLA's measured H100 table (hardware/measured/h100-matmul-xla, bf16, batch 1), anchored at
its largest shape as a one-kernel spec is, by the smallest median |error| of the time over the table's 125
shapes (a grid of 0.1 us). The check: the same t_0 anchored at each other table's largest shape predicts that
table (B200, AMD gfx942), against one constant efficiency (what a one-kernel spec had before).
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from costmodel.formulas.step import gemm_shape_efficiency  # noqa: E402
from costmodel.measure.matmul import load_table  # noqa: E402

MEASURED = ROOT / "hardware" / "measured"
TABLES = {  # name: (table, dense bf16 peak of the spec it is read against)
    "h100-sxm": (MEASURED / "h100-matmul-xla" / "h100_matmul_xla_perf_table.csv", 989.4e12),
    "b200": (MEASURED / "b200-matmul-xla" / "b200_matmul_xla_perf_table.csv", 2.25e15),
    "gfx942": (MEASURED / "gfx942-matmul-xla" / "gfx942_matmul_xla_perf_table.csv", 1307.4e12),
}


def shapes(name: str) -> list[tuple[float, float]]:
    """(FLOPs, measured FLOP/s) of each bf16 batch-1 shape of a table."""
    path, _ = TABLES[name]
    return [(2 * 2 ** sum(logs), flops) for logs, flops in load_table(str(path))]


def errors(name: str, overhead_s: float | None) -> list[float]:
    """Predicted / measured time - 1 for every shape: along the curve anchored at the largest shape, or (None)
    at that shape's efficiency for all."""
    rows, peak = shapes(name), TABLES[name][1]
    anchor_flops, anchor_rate = max(rows)
    out = []
    for flops, rate in rows:
        if overhead_s is None:
            efficiency = anchor_rate / peak
        else:
            efficiency = gemm_shape_efficiency(flops=flops, peak_flops=peak, measured_flops=anchor_flops,
                                               measured_efficiency=anchor_rate / peak, overhead_s=overhead_s)
        out.append((flops / (efficiency * peak)) / (flops / rate) - 1)
    return out


def median_abs(values) -> float:
    return statistics.median(abs(v) for v in values)


def fit(name: str = "h100-sxm") -> float:
    """t_0 (s) with the smallest median |error| on a table, 0 to 20 us by 0.1 us (ties: the smaller)."""
    return min((tenths / 1e7 for tenths in range(0, 201)), key=lambda t0: (median_abs(errors(name, t0)), t0))


def report() -> dict:
    t0 = fit()
    return {"overhead_s": t0, "errors": {name: (median_abs(errors(name, t0)), median_abs(errors(name, None)))
                                         for name in TABLES}}


def main() -> None:
    result = report()
    print(f"t_0 = {result['overhead_s'] * 1e6:.1f} us (fitted on h100-sxm's table)")
    for name, (curve, constant) in result["errors"].items():
        print(f"  {name:<9} median |error| of the time over its shapes: curve {curve:.1%}, one constant {constant:.1%}")


if __name__ == "__main__":
    main()
