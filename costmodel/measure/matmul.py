"""Matmul efficiency by shape from a measured throughput table (e.g. XLA's H100 table)."""

from __future__ import annotations

import math
from functools import lru_cache
from pathlib import Path

from costmodel.errors import CostModelError
from costmodel.inputs.bounds import FLOPS, WIDTH
from costmodel.inputs.cache import parsed
from costmodel.inputs.files import shown
from costmodel.measure.tables import csv_rows
from costmodel.specs.load import hardware_dir


_COLUMNS = ("b", "m", "n", "k", "dtype", "flops_per_s")


@lru_cache(maxsize=8)
def load_table(path: str, dtype: str = "bf16xbf16->bf16") -> tuple:
    """((log2 m, log2 n, log2 k), FLOP/s) for batch-1 rows of ``dtype``; a bad row is named by its line. A
    shipped table's rows are kept between runs (costmodel.inputs.cache)."""
    return parsed(Path(path), f"matmul-{dtype}", lambda: _rows(path, dtype), hardware_dir())


def _rows(path: str, dtype: str) -> tuple:
    rows = [_row(row, path, line) for line, row in csv_rows(path, "matmul table", _COLUMNS, {"dtype": dtype, "b": "1"})]
    if not rows:
        raise CostModelError(f"{path}: no batch-1 {dtype} rows")
    return tuple(rows)


def _row(row: dict, path: str, line: int) -> tuple:
    """One table row as ((log2 m, log2 n, log2 k), FLOP/s), each value checked."""
    lo, hi = FLOPS
    try:
        dims = [int(row[c]) for c in "mnk"]
        flops = float(row["flops_per_s"])
    except (TypeError, ValueError):
        raise CostModelError(f"{path}:{line}: m, n, k must be whole numbers and flops_per_s a number") from None
    if not all(1 <= d <= WIDTH for d in dims):
        raise CostModelError(f"{path}:{line}: m, n, k = {dims}: each must be from 1 to {WIDTH:,}")
    if not (math.isfinite(flops) and lo <= flops <= hi):
        raise CostModelError(f"{path}:{line}: flops_per_s = {shown(row['flops_per_s'])}: allowed {lo:g} to {hi:g}")
    return tuple(math.log2(d) for d in dims), flops


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
    return _nearest(str(path), float(m), float(n), float(k), peak_flops)


@lru_cache(maxsize=4096)  # a search asks for the same few shapes again and again
def _nearest(path: str, m: float, n: float, k: float, peak_flops: float) -> float:
    table = load_table(path)
    lo, hi = _bounds(path)
    point = [min(max(math.log2(max(x, 1)), lo[i]), hi[i]) for i, x in enumerate((m, n, k))]
    _, flops = min(table, key=lambda row: sum((a - b) ** 2 for a, b in zip(row[0], point)))
    return min(flops / peak_flops, 1.0)


@lru_cache(maxsize=8)
def _bounds(path: str) -> tuple:
    """(lowest, highest) log2 (m, n, k) of the table's rows."""
    table = load_table(path)
    return tuple(min(p[0][i] for p in table) for i in range(3)), tuple(max(p[0][i] for p in table) for i in range(3))
