"""Which of a spec's calibrations (`cost4d validate --fit`) describe an op on a level: the fits of the op itself or
of its mirror, under the algorithm asked for (or NCCL's default). network.py reads the ring model's, nccl_fits.py the
nccl model's."""

from __future__ import annotations

#: calibrations that describe what NCCL does by default, in order of preference
DEFAULT_ALGORITHMS = ("auto", "ring")
#: collectives that run the same ring pattern mirrored: n - 1 steps of S / n each (NCCL's ring all-gather and
#: reduce-scatter, src/device/all_gather.h and reduce_scatter.h), so one's fit stands in for the other's
MIRRORS = {"all-gather": "reduce-scatter", "reduce-scatter": "all-gather"}


def fits_for(hardware, op: str, level: str, model: str, algorithm: str, exact: bool = False) -> list:
    """The calibrations of ``model`` for ``op`` on ``level`` under the first algorithm name that has any (``exact``:
    ``algorithm`` alone; else 'auto' and 'ring' stand for each other, NCCL's default), else its mirror's
    (:data:`MIRRORS`); [] where neither was fitted."""
    wanted = DEFAULT_ALGORITHMS if algorithm in DEFAULT_ALGORITHMS and not exact else (algorithm,)
    for collective in (op, MIRRORS.get(op)):
        for name in wanted:
            fits = [c for c in hardware.calibration
                    if (c.collective, c.algorithm, c.level, c.model) == (collective, name, level, model)]
            if fits:
                return fits
    return []
