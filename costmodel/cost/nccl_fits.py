"""Which calibration of model nccl (t = a + b x NCCL's tuned time, `validate --fit`) scales the tuner for a group.

A fit is stored per (op, algorithm, level, ranks). A group takes the fit at its own number of ranks where one was
made, else the one at the most ranks on its level (a scale of the tuner carries over to other group sizes there),
and says which (:func:`fit_words`).
"""

from __future__ import annotations

from costmodel.cost.calibrations import fits_for
from costmodel.mathops import equals, family


def at_ranks(fits: list, ranks):
    """The fit made at ``ranks`` (a number), else the one at the most ranks; None where ``fits`` is empty."""
    if not fits:
        return None
    return next((c for c in fits if c.ranks == ranks), max(fits, key=lambda c: c.ranks))


def _scaling_fits(hardware, op: str, level: str, algorithm: str) -> list:
    """The fits of model nccl for ``op`` (or its mirror) on ``level`` under ``algorithm`` itself, else ('ring') under
    NCCL's own choice: the ones :func:`tuner_calibration` picks among."""
    fits = fits_for(hardware, op, level, "nccl", algorithm, exact=True)
    if not fits and algorithm == "ring":  # a fit of NCCL's own choice stands in for its default algorithm's
        fits = fits_for(hardware, op, level, "nccl", "auto", exact=True)
    return fits


def _pick_fits(hardware, op: str, level: str) -> list[list]:
    """The fits of model nccl for ``op`` (or its mirror) on ``level``, one list per algorithm NCCL picks that has
    any: the ones :func:`pick_calibrations` picks among."""
    from costmodel.cost.nccl import ALGORITHM_NAMES

    named = {c.algorithm for c in hardware.calibration if c.model == "nccl" and c.algorithm != "auto"}
    found = (fits_for(hardware, op, level, "nccl", name, exact=True) for name in sorted(named & set(ALGORITHM_NAMES)))
    return [fits for fits in found if fits]


def tuner_calibration(hardware, op: str, level: str, algorithm: str, ranks=None):
    """The calibration of model nccl for ``op`` (or its mirror) on ``level`` under ``algorithm`` itself ('auto': one
    fitted on NCCL's own picks as a whole; a ring group takes that where no ring fit exists), at ``ranks``
    (:func:`at_ranks`), or None."""
    return at_ranks(_scaling_fits(hardware, op, level, algorithm), ranks)


def pick_calibrations(hardware, op: str, level: str, ranks=None) -> tuple:
    """(calibration, ...) of model nccl fitted under one algorithm for ``op`` (or its mirror) on ``level``, one per
    algorithm, each at ``ranks`` (:func:`at_ranks`): under NCCL's own choice each prices the sizes where NCCL picks its
    algorithm (cost/nccl.TunedCost.by_algorithm)."""
    return tuple(at_ranks(fits, ranks) for fits in _pick_fits(hardware, op, level))


def tuner_fits(hardware, op: str, level: str, algorithm: str, ranks=None) -> tuple:
    """(the calibration of model nccl for ``algorithm`` or None, the per-pick ones under NCCL's own choice) at
    ``ranks``: what scales NCCL's tuner on ``level``."""
    picks = pick_calibrations(hardware, op, level, ranks) if algorithm == "auto" else ()
    return tuner_calibration(hardware, op, level, algorithm, ranks), picks


def fitted_ranks(hardware, op: str, level: str, algorithm: str) -> list:
    """The group sizes that some fit :func:`tuner_fits` reads for ``op`` on ``level`` under ``algorithm`` was made at,
    fewest first, each list's most ranks left out (it is every other group's): the cases an array or a letter of
    ranks tells apart (:func:`by_ranks`)."""
    lists = [_scaling_fits(hardware, op, level, algorithm), *(_pick_fits(hardware, op, level)
                                                              if algorithm == "auto" else ())]
    own = set()
    for fits in (f for f in lists if f):
        own |= {c.ranks for c in fits} - {max(c.ranks for c in fits)}
    return sorted(own)


def by_ranks(ranks, build, hardware, op: str, level: str, algorithm: str):
    """The cost ``build(r)`` makes with the fits at r ranks, for a group of ``ranks`` ranks: a number picks at once;
    arrays and letters select among the group sizes with fits of their own (:class:`AtRanks`)."""
    if family(ranks) == "number":
        return build(ranks)
    cost = build(None)
    for r in fitted_ranks(hardware, op, level, algorithm):
        cost = AtRanks(ranks, r, build(r), cost)
    return cost


class AtRanks:
    """``own`` where the group has ``fitted`` ranks, else ``other``: seconds for numbers, arrays and letters."""

    def __init__(self, ranks, fitted: int, own, other):
        self.ranks, self.fitted, self.own, self.other = ranks, fitted, own, other

    def seconds(self, buffer_bytes):
        from costmodel.mathops import where

        return where(equals(self.ranks, self.fitted), self.own.seconds(buffer_bytes), self.other.seconds(buffer_bytes))


def fit_words(c, op: str, ranks, where: str = "") -> str:
    """One fit in words, as every command prints it: the op and algorithm it was fitted on, t = a + b x the tuner's
    time, the group size it was made at (and that it is not the group's own), what it prices."""
    mirror = f", {c.collective}'s fit for {op}, its mirror" if c.collective != op else ""
    size = f"at {c.ranks} ranks" + (f", none at {ranks}" if ranks is not None and c.ranks != ranks else "")
    return (f"{c.collective}/{c.algorithm} x {c.scale:.3f} + {c.latency_s * 1e6:.1f} us ({size}{mirror}"
            f"{'; ' + where if where else ''})")
