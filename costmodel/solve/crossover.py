"""T_math and T_comms of the compute-bound question over a range of batches: the curves behind `solve batch`.

Nothing new is computed here: each answer's problem evaluates its own ``times`` (costmodel.solve.batch,
the Scaling Book's per-layer formulas) on an array of global batches, one T_comms per overlap convention,
and the crossover is the answer ``solve_batch`` gave.
"""

from __future__ import annotations

from costmodel.errors import CostModelError
from costmodel.record import record


@record
class Curves:
    """Times per MLP layer (seconds) at each global batch; T_comms per overlap convention."""

    batches: object  # global batch B (tokens), a numpy array
    math_s: object
    fsdp_s: object
    tp_s: object
    comms_s: dict  # overlap convention (sum, max) -> T_comms
    answers: list  # the BatchAnswer of each convention: its crossover


def curves(answers: list, batches=None, *, points: int = 400, span: float = 2.5) -> Curves:
    """The answers' times over ``batches`` (default: 0 to ``span`` x the largest crossover, ``points`` of them).
    The answers are one problem under different overlap conventions (T_math, T_FSDP, T_TP are shared)."""
    import numpy as np

    finite = [a.global_batch for a in answers if a.compute_bound_ever]
    if not finite:
        raise CostModelError("this layout is never compute-bound (T_TP >= T_math at every batch): no crossover "
                             "to draw")
    if batches is None:  # compute-bound at any batch (crossover 0): alpha N, pure DP's bound, sets the scale
        scale = max(finite) or max(a.problem.alpha * a.problem.devices for a in answers)
        batches = np.linspace(0, span * scale, points)
    batches = np.asarray(batches, dtype=float)
    times = {a.problem.overlap: a.problem.times(batches) for a in answers}
    first = times[answers[0].problem.overlap]
    def whole(values):  # a term that does not grow with B (T_FSDP; 0 without the axis) as an array
        return np.broadcast_to(values, batches.shape)

    return Curves(batches, whole(first["math"]), whole(first["fsdp"]), whole(first["tp"]),
                  {o: whole(t["comms"]) for o, t in times.items()}, list(answers))
