"""NCCL's tuner over arrays of layouts: :meth:`TunedCost.seconds <costmodel.cost.nccl.TunedCost.seconds>`
when the buffer or the group is a numpy array (one element per layout).

A sweep repeats few group shapes and buffer sizes, so the tuner's candidates (``nccl.candidates``) are
priced once per distinct (nodes, GPUs per node) and laid out as K slots, NCCL's pick is taken once per
distinct (group, size), and the times are spread back over the elements. Each element equals what the
numbers path (``nccl.choice``) gives the same layout. ``nccl.py`` imports this module only when it
prices an array: the dependency runs one way at import, and the numbers path never loads it.
"""

from __future__ import annotations

import functools

from costmodel.cost.nccl import TunedCost, candidates
from costmodel.cost.nccl_fills import Candidate, fills_us
from costmodel.formulas import nccl_tuner as nt
from costmodel.formulas import nccl_versions as nv


def array_seconds(cost: TunedCost, buffer_bytes):
    """``cost.seconds(buffer_bytes)`` for arrays, one element per layout: candidates priced once per
    distinct (nodes, GPUs per node), laid out as K slots (unused slots infinite), the fastest slot taken
    once per distinct (group, size) and spread back: a sweep repeats few groups and sizes."""
    import numpy as np

    shape = np.broadcast_shapes(np.shape(buffer_bytes), np.shape(cost.nodes), np.shape(cost.per_node))
    groups, group, s, back = _combos(cost, buffer_bytes, shape)
    slots = Candidate(*(column[:, group] for column in _slots(cost.preset, cost.op, cost.algorithm,
                                                              tuple((n, g) for n, g, _ in groups), cost.hop_us,
                                                              cost.version)))  # K x distinct (group, size)
    past = (slots.plateau_bytes > 0) & (s >= slots.plateau_bytes)
    factors = np.asarray(nt.TREE_CORRECTION_FACTOR + ((1.0,) * len(nt.TREE_CORRECTION_FACTOR[0]),))
    bucket = np.floor(np.log2(np.maximum(np.floor(s / 64), 0.5))).astype(int)
    inside = (bucket >= 0) & (bucket < factors.shape[1])
    correction = np.where(inside, factors[slots.tree_protocol, np.clip(bucket, 0, factors.shape[1] - 1)], 1.0)
    latency = np.where(past, slots.latency_us * 1.4, slots.latency_us)
    pick = np.argmin(latency + s / (1000 * slots.bandwidth_gbs * correction), axis=0)  # NCCL's choice
    picked = Candidate(*(column[pick, np.arange(pick.size)] for column in slots))  # its slot in each column
    timed = np.where(past, slots.timed_latency_us * 1.4, slots.timed_latency_us)[pick, np.arange(pick.size)]
    chosen = timed + s / (1000 * picked.timed_bandwidth_gbs * correction[pick, np.arange(pick.size)])
    chosen = chosen + fills_us(s, picked)
    free = np.array([one for _, _, one in groups], dtype=bool)[group]
    fits = np.array([cost.fit_for(algo) for algo in nt.ALGORITHMS])  # (offset, scale) of each algorithm's pick
    offset, scale = fits[picked.algorithm, 0], fits[picked.algorithm, 1]
    priced = np.where(free, 0.0, offset + scale * np.maximum(chosen * 1e-6, cost.launch))
    return priced[back].reshape(shape)


def _combos(cost: TunedCost, buffer_bytes, shape: tuple):
    """(groups: (nodes, GPUs per node, free) of each distinct group of an array; of each distinct (group,
    whole bytes) its group's index and its bytes; each element's index among those), once per group and
    buffer for every op on them: the rows of a step price one buffer with several ops."""
    memo = cost.memo if cost.memo is not None else cost.__dict__.setdefault("_own_memo", {})  # frozen: a __dict__ still
    groups = _once(memo, ("groups", shape), (cost.nodes, cost.per_node),
                   lambda: _group_index(cost.nodes, cost.per_node, shape))
    return _once(memo, ("combos", shape), (buffer_bytes, cost.nodes, cost.per_node),
                 lambda: _combo_index(groups, buffer_bytes, shape))


def _once(memo: dict, key: tuple, held: tuple, compute):
    """compute(), once per ``key`` and objects ``held`` (by identity: the memo keeps them, so that no id
    is reused meanwhile)."""
    key = (*key, *map(id, held))
    hit = memo.get(key)
    if hit is None or any(a is not b for a, b in zip(hit[0], held)):
        hit = memo[key] = held, compute()
    return hit[1]


def _group_index(nodes, per_node, shape: tuple):
    """((nodes, GPUs per node, free) of each distinct group, each element's index among them): the counts as
    the numbers path's int(), ``free`` where the group has one rank (nothing to send)."""
    import numpy as np

    nodes, per_node = (np.broadcast_to(np.asarray(v), shape).ravel() for v in (nodes, per_node))
    free = nodes * per_node <= 1
    nodes, per_node = nodes.astype(np.int64), per_node.astype(np.int64)
    wide = int(per_node.max()) + 1 if per_node.size else 1  # a key per group: small integers, no sort
    keys, at = distinct((nodes * wide + per_node) * 2 + free)
    return tuple((int(k) // 2 // wide, int(k) // 2 % wide, bool(k % 2)) for k in keys), at


def _combo_index(indexed_groups: tuple, buffer_bytes, shape: tuple):
    """(groups, the group index and whole bytes of each distinct (group, size), each element's index among them)."""
    import numpy as np

    groups, at = indexed_groups
    if np.ndim(buffer_bytes) == 0:  # one size for every layout: a combination per group
        return groups, np.arange(len(groups)), np.full(len(groups), np.floor(float(buffer_bytes))), at
    whole = np.floor(np.broadcast_to(np.asarray(buffer_bytes, dtype=float), shape).ravel())  # as int(S)
    sizes, size_at = distinct(whole)
    combos, back = distinct(at * len(sizes) + size_at)
    return groups, combos // len(sizes), sizes[combos % len(sizes)], back


def distinct(values):
    """(the distinct values, sorted, and each element's index among them) of a 1-d array that repeats few
    values. Small non-negative integers (group keys, index pairs) are marked in a table; others go through
    numpy's hash-based unique (2.3 and later; sorting before) and a binary search. numpy's own index
    (unique's return_inverse) argsorts the whole array, several times slower on such arrays."""
    import numpy as np

    if values.dtype.kind in "iu" and values.size and 0 <= values.min() and values.max() < 4 * values.size:
        seen = np.zeros(int(values.max()) + 1, dtype=bool)
        seen[values] = True
        return np.flatnonzero(seen), (np.cumsum(seen) - 1)[values]
    found = np.unique(values)
    return found, np.searchsorted(found, values)


@functools.lru_cache(maxsize=256)
def _slots(preset: str, op: str, algorithm: str, pairs: tuple, hop_us=None, version: tuple = nv.TRANSCRIBED) -> Candidate:
    """Each field of :class:`~costmodel.cost.nccl_fills.Candidate` as a K x pairs array: K candidate slots per
    (nodes, GPUs per node); an unused slot has infinite latency. The tree-protocol row len(PROTOCOLS) is 'no
    correction'."""
    import numpy as np

    found = [candidates(preset, op, int(n), int(g), algorithm, hop_us if n > 1 else None, version) if n * g > 1
             else []
             for n, g in pairs]
    k = max(1, max(len(c) for c in found))
    unused = Candidate(np.inf, 1.0, len(nt.PROTOCOLS), 0, np.inf, 1.0, 0, 0, 0, 0, 0.0, 0)
    columns = {name: np.full((k, len(pairs)), value, dtype=float if isinstance(value, float) else int)
               for name, value in unused._asdict().items()}
    for j, rows in enumerate(found):
        for i, row in enumerate(rows):
            for name, value in row._asdict().items():
                columns[name][i, j] = (nt.PROTOCOLS.index(value) if value else len(nt.PROTOCOLS)) \
                    if name == "tree_protocol" else value
    return Candidate(**columns)
