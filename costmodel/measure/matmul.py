"""Matmul efficiency by shape from a measured throughput table (e.g. XLA's H100 table)."""

from __future__ import annotations

import csv
import math
from functools import lru_cache
from pathlib import Path

from costmodel.errors import CostModelError


@lru_cache(maxsize=8)
def load_table(path: str, dtype: str = "bf16xbf16->bf16") -> tuple:
    """((log2 m, log2 n, log2 k), FLOP/s) for batch-1 rows of ``dtype``."""
    try:
        with open(path, newline="") as handle:
            rows = [r for r in csv.DictReader(handle) if r["dtype"] == dtype and r["b"] == "1"]
    except OSError as err:
        raise CostModelError(f"cannot read matmul table {path}: {err.strerror}") from None
    if not rows:
        raise CostModelError(f"{path}: no batch-1 {dtype} rows")
    return tuple(((math.log2(int(r["m"])), math.log2(int(r["n"])), math.log2(int(r["k"]))), float(r["flops_per_s"]))
                 for r in rows)


def table_efficiency(path: Path, m: float, n: float, k: float, peak_flops: float) -> float:
    """Achieved / peak of the nearest measured shape in log2 space, each dimension clamped to the
    table's range (beyond its largest shape, efficiency is assumed to saturate)."""
    table = load_table(str(path))
    lo = [min(p[0][i] for p in table) for i in range(3)]
    hi = [max(p[0][i] for p in table) for i in range(3)]
    point = [min(max(math.log2(max(x, 1)), lo[i]), hi[i]) for i, x in enumerate((m, n, k))]
    _, flops = min(table, key=lambda row: sum((a - b) ** 2 for a, b in zip(row[0], point)))
    return min(flops / peak_flops, 1.0)
