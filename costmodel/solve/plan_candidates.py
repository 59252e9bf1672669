"""The candidate layouts `cost4d plan` evaluates: every split of the devices into degrees that makes up the global
batch, then each way to place them (TPU torus axes, or the order the axes fill a GPU network)."""

from __future__ import annotations

import itertools
import math

from costmodel.inputs.placement import PLACEMENTS

MICROBATCH_SEQUENCES = (1, 2, 4, 8, 16)
CONTEXT = (1, 2, 4, 8)


def _powers_of_two(limit: int) -> list[int]:
    out, v = [], 1
    while v <= limit:
        out.append(v)
        v *= 2
    return out


def _divisors(n: int) -> list[int]:
    small = [d for d in range(1, int(n**0.5) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def tp_degrees(devices: int, heads: int | None = None) -> list[int]:
    """The TP degrees searched: powers of two up to 64, and with ``heads`` every other degree up to 64 that divides
    both the devices and the heads (PaLM 540B's 12 of 48 heads on 6,144 chips)."""
    more = [d for d in _divisors(devices) if d <= 64 and heads and heads % d == 0]
    return sorted(set(_powers_of_two(min(devices, 64))) | set(more))


def candidates(devices: int, layers: int, sequences: int, experts: int = 0, heads: int | None = None):
    """(tp, pp, cp, dp, fsdp, mbs, micro_steps, ep) whose product of degrees is ``devices`` and whose
    micro-batches of mbs sequences make up the global batch of ``sequences`` exactly (TP degrees:
    :func:`tp_degrees`); with ``experts``, every power-of-two EP degree that divides them and the data axis and
    nests with its shards."""
    for tp, pp, cp in itertools.product(tp_degrees(devices, heads), _powers_of_two(min(devices, layers)),
                                        CONTEXT):
        if devices % (tp * pp * cp):
            continue
        data = devices // (tp * pp * cp)
        for fsdp in _divisors(data):
            for mbs in MICROBATCH_SEQUENCES:
                if sequences % (data * mbs):
                    continue
                for ep in _expert_degrees(experts, data):
                    yield tp, pp, cp, data // fsdp, fsdp, mbs, sequences // (data * mbs), ep


def torus_splits(hardware) -> list[tuple[int, int]]:
    """(M_X, M_Y): torus axes the data axis and the TP axis may span on a TPU slice, each from one to the
    device's torus axes (the Scaling Book's placement; the layout rules keep those that fit the torus
    and the axes' sizes); (1, 1) on a GPU."""
    ici = hardware.level("ici") if hardware.kind == "tpu" else None
    axes = (ici.torus_axes or 1) if ici is not None else 1
    return [(mx, my) for mx in range(1, axes + 1) for my in range(1, axes + 1)]


def with_torus_axes(rows, hardware):
    """Each candidate once per (M_X, M_Y) of :func:`torus_splits`: an axis spans more than one torus axis only
    with at least 2 chips along each (the Scaling Book's problems may set M_X freely; a search keeps to layouts
    a slice can hold)."""
    import numpy as np

    from costmodel.mathops import prime_factor_count

    out = []
    for mx, my in torus_splits(hardware):
        keep = np.ones(len(rows), dtype=bool)
        if mx > 1:  # a data axis (dp x fsdp) of at least 2 chips along each torus axis it spans
            keep &= prime_factor_count(rows[:, 3] * rows[:, 4]) >= mx
        if my > 1:  # likewise the TP axis
            keep &= prime_factor_count(rows[:, 0]) >= my
        reach = _torus_reach(hardware, mx, my)
        if reach:  # and no more chips than its torus axes hold (v5p: one axis holds at most 28)
            data, tp = rows[:, 3] * rows[:, 4], rows[:, 0]
            keep &= np.logical_or.reduce([(data <= rx) & (tp <= ry) for rx, ry in reach])
        chosen = rows[keep]
        out.append(np.column_stack([chosen, np.full(len(chosen), mx), np.full(len(chosen), my)]))
    return np.concatenate(out)


def with_placements(rows, hardware):
    """Each candidate once per order of its axes on the network (inputs.placement.PLACEMENTS, the default first)
    that places them differently: on a GPU with a fast domain, orders that give every axis (tp, cp, fsdp, dp,
    pp, and a MoE's ep, expert-fsdp and expert-dp) as many ranks per domain are one. A TPU places its axes on
    the torus instead (M_X, M_Y). Adds the order's index as a column."""
    import numpy as np

    fast = hardware.network[0]
    if hardware.kind == "tpu" or fast.domain_size is None or len(hardware.network) == 1:
        return np.column_stack([rows, np.zeros(len(rows), dtype=np.int64)])
    from costmodel.cost.placement import placement
    from costmodel.cost.point import Point

    size = fast.domain_size
    tp, pp, cp, dp, fsdp, ep = rows[:, 0], rows[:, 1], rows[:, 2], rows[:, 3], rows[:, 4], rows[:, 7]
    axes = ("tp", "cp", "fsdp", "dp", "pp") + (("ep", "expert-fsdp", "expert-dp") if (ep > 1).any() else ())
    keys = []
    for i in range(len(PLACEMENTS)):  # each axis's ranks per domain, as cost/placement.py places them
        point = Point(tp=tp, pp=pp, cp=cp, dp=dp, fsdp=fsdp, ep=ep, placement=np.full(len(rows), i))
        key = np.zeros(len(rows), dtype=np.int64)
        for axis in axes:
            key = key * (size + 1) + np.asarray(placement(hardware, point, axis).per_domain, dtype=np.int64)
        keys.append(key)
    out = []
    for i, key in enumerate(keys):
        keep = np.ones(len(rows), dtype=bool)
        for earlier in keys[:i]:
            keep &= key != earlier
        out.append(np.column_stack([rows[keep], np.full(int(keep.sum()), i)]))
    return np.concatenate(out)


def _torus_reach(hardware, mx: int, my: int) -> list[tuple[int, int]]:
    """(most chips the data axis, most the TP axis) can hold on M_X and M_Y disjoint axes of the largest slice
    (the ICI level's max_shape), for each way to give them axes; [] without a max_shape or on a GPU."""
    ici = hardware.level("ici") if hardware.kind == "tpu" else None
    shape = list(ici.max_shape or []) if ici is not None else []
    if not shape or mx + my > len(shape):
        return []
    return sorted({(math.prod(shape[i] for i in data), math.prod(shape[i] for i in tp))
                   for data in itertools.combinations(range(len(shape)), mx)
                   for tp in itertools.combinations([i for i in range(len(shape)) if i not in data], my)})


def _expert_degrees(experts: int, data: int) -> list[int]:
    """EP degrees to search: 1 for a dense model, else the powers of two up to the data axis that divide E
    (the expert axis's rules, in the evaluation's mask, reject the ones that do not fit the layout)."""
    if not experts:
        return [1]
    return [e for e in _powers_of_two(data) if experts % e == 0]
