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


def table_efficiency(path: Path, m, n, k, peak_flops: float):
    """Achieved / peak of the nearest measured shape in log2 space, each dimension clamped to the
    table's range (beyond its largest shape, efficiency is assumed to saturate). Arrays of shapes
    give an array: each distinct shape is looked up once."""
    if type(m).__module__.startswith("numpy") or type(n).__module__.startswith("numpy"):
        import numpy as np

        m, n = np.broadcast_arrays(np.asarray(m), np.asarray(n))
        ms, m_at = np.unique(m, return_inverse=True)
        ns, n_at = np.unique(n, return_inverse=True)
        found = np.array([[table_efficiency(path, float(a), float(b), k, peak_flops) for b in ns] for a in ms])
        return found[m_at.reshape(m.shape), n_at.reshape(n.shape)]
    table = load_table(str(path))
    lo = [min(p[0][i] for p in table) for i in range(3)]
    hi = [max(p[0][i] for p in table) for i in range(3)]
    point = [min(max(math.log2(max(x, 1)), lo[i]), hi[i]) for i, x in enumerate((m, n, k))]
    _, flops = min(table, key=lambda row: sum((a - b) ** 2 for a, b in zip(row[0], point)))
    return min(flops / peak_flops, 1.0)
