"""A pipeline schedule played out op by op: when each stage runs which micro-batch's forward and backward.

Each stage runs its ops in the schedule's order; an op starts when its stage is free and its input
exists: forward i on stage s after forward i on s - 1, backward i on s after backward i on s + 1 (the
last stage's after its own forward). GPipe runs every forward, then every backward; 1F1B warms up
with p - s - 1 forwards, alternates one forward and one backward, then drains (Narayanan et al. 2021,
arXiv:2104.04473, Sec. 2.2.1). Nothing here is a formula: tests/test_timeline.py checks that the idle
time it leaves equals :func:`costmodel.formulas.pipeline.bubble_fraction`.
"""

from __future__ import annotations

from dataclasses import dataclass

from costmodel.errors import CostModelError

SCHEDULES = ("gpipe", "1f1b")


@dataclass(frozen=True)
class Op:
    stage: int
    kind: str  # F or B
    microbatch: int
    start: float
    end: float


def order(schedule: str, stage: int, stages: int, microbatches: int) -> list[tuple[str, int]]:
    """The (kind, micro-batch) sequence one stage runs."""
    if schedule == "gpipe":
        return [("F", i) for i in range(microbatches)] + [("B", i) for i in range(microbatches)]
    warmup = min(stages - stage - 1, microbatches)
    out = [("F", i) for i in range(warmup)]
    forward, backward = warmup, 0
    while backward < microbatches:
        if forward < microbatches:
            out.append(("F", forward))
            forward += 1
        out.append(("B", backward))
        backward += 1
    return out


def timeline(schedule: str, stages: int, microbatches: int, forward: float = 1.0, backward: float = 2.0) -> list[Op]:
    """Every op of one step, with its start and end (a forward takes ``forward``, a backward ``backward``)."""
    if schedule not in SCHEDULES:
        raise CostModelError(f"--schedule {schedule!r}: the timeline plays {' and '.join(SCHEDULES)}")
    queues = [order(schedule, s, stages, microbatches) for s in range(stages)]
    done: dict[tuple[str, int, int], float] = {}
    free, position, ops = [0.0] * stages, [0] * stages, []
    while any(position[s] < len(queues[s]) for s in range(stages)):
        progressed = False
        for s in range(stages):
            if position[s] == len(queues[s]):
                continue
            kind, i = queues[s][position[s]]
            needs = ("F", i, s - 1) if kind == "F" else ("B", i, s + 1) if s < stages - 1 else ("F", i, s)
            if kind == "F" and s == 0:
                ready = 0.0
            elif needs in done:
                ready = done[needs]
            else:
                continue
            start = max(free[s], ready)
            end = start + (forward if kind == "F" else backward)
            ops.append(Op(s, kind, i, start, end))
            done[(kind, i, s)] = free[s] = end
            position[s] += 1
            progressed = True
        if not progressed:
            raise CostModelError(f"the {schedule} schedule deadlocked at {stages} stages and {microbatches} "
                                 "micro-batches")  # cannot happen for these two schedules; a guard
    return ops


def idle_fraction(ops: list[Op], stages: int) -> float:
    """Idle time over all stages, as a fraction of stages x the step's length."""
    length = max(op.end for op in ops)
    busy = sum(op.end - op.start for op in ops)
    return 1 - busy / (stages * length)
