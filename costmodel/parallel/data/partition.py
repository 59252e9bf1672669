"""Which parameters a ZeRO-2 rank's gradient partition holds whole.

DeepSpeed flattens each parameter group, cuts it into N equal partitions, and gives every rank a gradient buffer
(``grads_in_partition``) as large as all the parameters that overlap its partition, whole
(microsoft/DeepSpeed@38327e07 runtime/zero/stage_1_and_2.py L1344-1352, get_partition_info L1607-1636). A rank
whose partition falls inside a large matrix (the embedding, the output layer) holds all of it: past a few shards
the busiest rank holds several times P / N.
"""

from __future__ import annotations

import bisect
import itertools
from dataclasses import replace

from costmodel.parallel.tensor import kv_heads_per_rank


def flat_matrices(shape, point) -> list[int]:
    """Elements per device of the model's matrices in the order a Hugging Face decoder registers them, the order
    DeepSpeed flattens its weight-decay group in (norms and biases form the other group, too small to matter):
    the embedding; per layer q, k, v, o, then gate, up, down (up, down without a gate); the output layer unless
    tied. The FFN stack: per layer its two matrices. Matrices split t ways; K and V as the TP axis holds them."""
    d, f, t = shape.width, shape.mlp_width, point.tp
    mlp = [d * f // t] * (3 if shape.gated else 2)
    if not shape.attention:
        return mlp * shape.layers
    q = shape.heads * shape.head_dim * d // t
    kv = kv_heads_per_rank(shape, point) * shape.head_dim * d
    embedding = shape.vocab * d // t
    return [embedding] + [q, kv, kv, q, *mlp] * shape.layers + ([] if shape.tied else [embedding])


def held_elements(sizes: list[int], shards: int) -> int:
    """The most elements any of ``shards`` equal partitions of the flat ``sizes`` overlaps, counting each
    parameter it touches whole."""
    ends = list(itertools.accumulate(sizes))
    starts = [end - size for end, size in zip(ends, sizes)]
    total, part = ends[-1], -(-ends[-1] // shards)
    best = 0
    # a rank whose partition holds no parameter's start lies inside one parameter, which the rank holding that
    # parameter's start holds too: only those ranks (one per parameter at most) can be the busiest
    for rank in sorted({start // part for start in starts}):
        lo, hi = rank * part, min((rank + 1) * part, total)
        if lo >= hi:
            break
        first, last = bisect.bisect_right(ends, lo), bisect.bisect_left(starts, hi)
        best = max(best, ends[last - 1] - starts[first])
    return best


def partition_overhang(shape, point):
    """Elements the busiest rank's gradient buffer holds beyond P / N over ``point.fsdp`` shards (numbers, or
    arrays evaluated per distinct (N, t)); 0 where the model's matrices are not listed (MoE, latent attention)."""
    if shape.moe or shape.mla:
        return 0
    if isinstance(point.fsdp, int) and isinstance(point.tp, int):
        sizes = flat_matrices(shape, point)
        return held_elements(sizes, point.fsdp) - sum(sizes) / point.fsdp
    import numpy as np

    shards, tp = np.broadcast_arrays(np.asarray(point.fsdp), np.asarray(point.tp))
    pairs = {(int(n), int(t)) for n, t in zip(shards.ravel(), tp.ravel())}
    over = {pair: partition_overhang(shape, replace(point, fsdp=pair[0], tp=pair[1])) for pair in pairs}
    return np.vectorize(lambda n, t: over[(int(n), int(t))], otypes=[float])(shards, tp)
