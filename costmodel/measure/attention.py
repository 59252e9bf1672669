"""Flash-attention kernel throughput by kernel, direction, mask, head dim and sequence, from a measured table
(e.g. the FlashAttention-3 paper's H100 figures: hardware/measured/h100-flash-attention/SOURCE.md).

The table's TFLOP/s follow the FlashAttention benchmarks' convention: forward 4 b s^2 h d FLOPs, halved under
a causal mask; backward 2.5 x forward (its five matmuls, the scores recomputed). A time is therefore those
FLOPs over the table's rate, never the model's FLOP count over it (formulas/step.attention_kernel_seconds).
"""

from __future__ import annotations

import math
from functools import lru_cache
from pathlib import Path

from costmodel.errors import CostModelError
from costmodel.inputs.bounds import FLOPS, SEQUENCE
from costmodel.inputs.cache import parsed
from costmodel.inputs.files import shown
from costmodel.measure.tables import csv_rows
from costmodel.specs.load import hardware_dir

COLUMNS = ("kernel", "direction", "causal", "head_dim", "seq", "tflops")
DIRECTIONS = ("fwd", "bwd")


@lru_cache(maxsize=8)
def load_table(path: str) -> dict:
    """{(kernel, direction, causal, head_dim): ((log2 seq, FLOP/s), ...) sorted by seq}; a bad row is named by
    its line. A shipped table's rows are kept between runs (costmodel.inputs.cache)."""
    return parsed(Path(path), "attention", lambda: _rows(path), hardware_dir())


def _rows(path: str) -> dict:
    rows: dict = {}
    for line, row in csv_rows(path, "attention table", COLUMNS):
        key, seq, rate = _row(row, path, line)
        rows.setdefault(key, {})[seq] = rate
    if not rows:
        raise CostModelError(f"{path}: no rows")
    return {key: tuple((math.log2(s), r) for s, r in sorted(by_seq.items())) for key, by_seq in rows.items()}


def _row(row: dict, path: str, line: int) -> tuple:
    lo, hi = FLOPS
    if row["direction"] not in DIRECTIONS or row["causal"] not in ("0", "1") or not row["kernel"].strip():
        raise CostModelError(f"{path}:{line}: kernel must be a name, direction fwd or bwd, causal 0 or 1")
    try:
        head_dim, seq, rate = int(row["head_dim"]), int(row["seq"]), float(row["tflops"]) * 1e12
    except ValueError:
        raise CostModelError(f"{path}:{line}: head_dim and seq must be whole numbers and tflops a number") from None
    if not (1 <= head_dim <= 4096 and 1 <= seq <= SEQUENCE):
        raise CostModelError(f"{path}:{line}: head_dim {head_dim}, seq {seq}: out of range")
    if not (math.isfinite(rate) and lo <= rate <= hi):
        raise CostModelError(f"{path}:{line}: tflops = {shown(row['tflops'])}: allowed {lo / 1e12:g} to {hi / 1e12:g}")
    return (row["kernel"], row["direction"], row["causal"] == "1", head_dim), seq, rate


def kernels(path: str) -> tuple:
    """The kernel names the table measures both ways (forward and backward): those a step can run."""
    directions: dict = {}
    for kernel, direction, _, _ in load_table(path):
        directions.setdefault(kernel, set()).add(direction)
    return tuple(sorted(k for k, measured in directions.items() if measured == set(DIRECTIONS)))


def attention_rate(path: str, kernel: str, direction: str, causal: bool, head_dim, seq):
    """FLOP/s of ``kernel``'s ``direction`` pass at ``head_dim`` and ``seq`` (the key length one call sees):
    the measured head dim nearest in log2 (a larger one on a tie), then linear in log2 seq between the
    measured lengths, held at the ends. A causal pass the table lacks (the FlashAttention-3 paper measures
    backward without a mask only) is its unmasked rate times the forward's causal / unmasked ratio at the
    same head dim and length: the mask's cost (idle tiles, short rows) taken to weigh alike both ways.
    Arrays of ``seq`` give an array (each distinct length once)."""
    if type(seq).__module__.startswith("numpy"):
        import numpy as np

        lengths, at = np.unique(np.asarray(seq), return_inverse=True)
        found = np.array([attention_rate(path, kernel, direction, causal, head_dim, float(s)) for s in lengths])
        return found[at.reshape(np.shape(seq))]
    if causal and not _dims(path, kernel, direction, True) and all(
            _dims(path, kernel, *need) for need in ((direction, False), ("fwd", True), ("fwd", False))):
        mask = _rate(path, kernel, "fwd", True, float(head_dim), float(seq)) / \
            _rate(path, kernel, "fwd", False, float(head_dim), float(seq))
        return _rate(path, kernel, direction, False, float(head_dim), float(seq)) * mask
    return _rate(path, kernel, direction, bool(causal), float(head_dim), float(seq))


def _dims(path: str, kernel: str, direction: str, causal: bool) -> list:
    return sorted({k[3] for k in load_table(path) if k[:3] == (kernel, direction, causal)})


@lru_cache(maxsize=4096)
def _rate(path: str, kernel: str, direction: str, causal: bool, head_dim: float, seq: float) -> float:
    dims = _dims(path, kernel, direction, causal)
    if not dims:
        raise CostModelError(f"{path}: no {direction} {'causal' if causal else 'non-causal'} rows for attention "
                             f"kernel {shown(kernel)} (kernels it measures both ways: {', '.join(kernels(path)) or 'none'})")
    dim = min(dims, key=lambda d: (abs(math.log2(d) - math.log2(max(head_dim, 1))), -d))
    points = load_table(path)[(kernel, direction, causal, dim)]
    x = math.log2(max(seq, 1))
    if x <= points[0][0]:
        return points[0][1]
    for (x0, r0), (x1, r1) in zip(points, points[1:]):
        if x <= x1:
            return r0 + (r1 - r0) * (x - x0) / (x1 - x0)
    return points[-1][1]
