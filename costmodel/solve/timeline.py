"""A pipeline schedule played out op by op: when each stage runs which micro-batch's forward and backward.

Each stage runs its ops in the schedule's order; an op starts when its stage is free and its input
exists. A forward of model chunk c on stage s follows the same forward on s - 1 (on stage 0, chunk
c - 1's on the last stage); a backward follows the same backward on s + 1 (on the last stage, chunk
c + 1's on stage 0, or the micro-batch's own last forward); a weight-gradient pass W follows its own
stage's input-gradient pass B. The orders:

* GPipe: every forward, then every backward.
* 1F1B: p - s - 1 warm-up forwards, then one forward and one backward in turn, then the drain
  (Narayanan et al. 2021, arXiv:2104.04473, Sec. 2.2.1).
* interleaved 1F1B, v chunks per device: the same over v m chunk-passes taken p micro-batches at a time,
  chunk by chunk, with 2 (p - s - 1) + (v - 1) p warm-up forwards (Sec. 2.2.2; Megatron-LM's
  ``forward_backward_pipelining_with_interleaving``).
* ZB-H1: 1F1B's order with the backward split into B (input gradient) and W (weight gradient); stage s
  runs W of micro-batch i after B of i + s, so every stage keeps p micro-batches until their W and
  the W left over fill the drain (Qi et al. 2023, arXiv:2401.10241, Sec. 2.1 and Fig. 3, top).

A forward through a stage takes ``forward``, a backward ``backward``; a chunk's 1/v of them; ZB-H1's B
and W half a backward each (the paper's T_F = T_B = T_W with the defaults). Nothing here is a formula:
tests/test_timeline.py checks that the idle time it leaves equals the pipeline model's bubble.
"""

from __future__ import annotations

from costmodel.errors import CostModelError
from costmodel.record import record
from costmodel.specs import SCHEDULES



@record
class Op:
    """One pass of one micro-batch on one pipeline stage, with its start and end."""

    stage: int
    kind: str  # F, B (the whole backward, or ZB-H1's input gradient) or W (ZB-H1's weight gradient)
    microbatch: int
    start: float
    end: float
    chunk: int = 0  # the model chunk (interleaved), 0 otherwise


def order(schedule: str, stage: int, stages: int, microbatches: int, chunks: int = 1) -> list[tuple[str, int, int]]:
    """The (kind, chunk, micro-batch) sequence one stage runs."""
    if schedule == "gpipe":
        return [("F", 0, i) for i in range(microbatches)] + [("B", 0, i) for i in range(microbatches)]
    if schedule == "interleaved":
        return _interleaved(stage, stages, microbatches, chunks)
    warmup = min(stages - stage - 1, microbatches)
    out = [("F", 0, i) for i in range(warmup)]
    forward, weight = warmup, 0
    for backward in range(microbatches):
        if forward < microbatches:
            out.append(("F", 0, forward))
            forward += 1
        out.append(("B", 0, backward))
        if schedule == "zb-h1" and backward - weight >= stage:  # W of i after B of i + s
            out.append(("W", 0, weight))
            weight += 1
    return out + [("W", 0, i) for i in range(weight, microbatches)] if schedule == "zb-h1" else out


def _interleaved(stage: int, stages: int, microbatches: int, chunks: int) -> list[tuple[str, int, int]]:
    """Megatron-LM's interleaved order: chunk-pass k runs micro-batch (k // p v) p + k % p on chunk
    (k // p) % v, backwards through the chunks in reverse (m a multiple of p)."""
    group = stages * chunks
    total = microbatches * chunks

    def forward(k):
        return ("F", (k % group) // stages, (k // group) * stages + k % stages)

    def backward(k):
        _, chunk, i = forward(k)
        return ("B", chunks - 1 - chunk, i)

    warmup = min(2 * (stages - stage - 1) + (chunks - 1) * stages, total)
    out = [forward(k) for k in range(warmup)]
    for k in range(total - warmup):
        out += [forward(warmup + k), backward(k)]
    return out + [backward(k) for k in range(total - warmup, total)]


def check(schedule: str, stages: int, microbatches: int, chunks: int = 1) -> None:
    """The schedule is one the timeline plays and the layout's own rules accept it (specs.layout)."""
    from pydantic import ValidationError

    from costmodel.inputs.files import shown
    from costmodel.specs.layout import Layout

    if schedule not in SCHEDULES:
        raise CostModelError(f"--schedule {shown(schedule)}: the timeline plays {', '.join(SCHEDULES)}")
    try:
        Layout(pp=stages, microbatches=microbatches, schedule=schedule, chunks=chunks)
    except ValidationError as err:
        raise CostModelError(err.errors()[0]["msg"].removeprefix("Value error, ")) from None


def timeline(schedule: str, stages: int, microbatches: int, forward: float = 1.0, backward: float = 2.0,
             chunks: int = 1) -> list[Op]:
    """Every op of one step, with its start and end."""
    check(schedule, stages, microbatches, chunks)
    queues = [order(schedule, s, stages, microbatches, chunks) for s in range(stages)]
    length = {"F": forward / chunks, "B": backward / chunks}
    if schedule == "zb-h1":
        length.update(B=backward / 2, W=backward / 2)
    done: dict[tuple[str, int, int, int], float] = {}
    free, position, ops = [0.0] * stages, [0] * stages, []
    while any(position[s] < len(queues[s]) for s in range(stages)):
        progressed = False
        for s in range(stages):
            if position[s] == len(queues[s]):
                continue
            kind, c, i = queues[s][position[s]]
            needs = _needs(kind, c, i, s, stages, chunks)
            if needs is not None and needs not in done:
                continue
            start = max(free[s], done[needs] if needs is not None else 0.0)
            ops.append(Op(s, kind, i, start, start + length[kind], c))
            done[(kind, c, i, s)] = free[s] = start + length[kind]
            position[s] += 1
            progressed = True
        if not progressed:
            raise CostModelError(f"the {schedule} schedule deadlocked at {stages} stages and {microbatches} "
                                 "micro-batches")  # cannot happen for these schedules; a guard
    return ops


def _needs(kind: str, chunk: int, i: int, stage: int, stages: int, chunks: int):
    """The op whose end an op waits for, as (kind, chunk, micro-batch, stage); None: ready at once."""
    if kind == "W":
        return ("B", chunk, i, stage)
    if kind == "F":
        if stage > 0:
            return ("F", chunk, i, stage - 1)
        return ("F", chunk - 1, i, stages - 1) if chunk > 0 else None
    if stage < stages - 1:
        return ("B", chunk, i, stage + 1)
    return ("B", chunk + 1, i, 0) if chunk < chunks - 1 else ("F", chunk, i, stage)


def idle_fraction(ops: list[Op], stages: int) -> float:
    """Idle time over all stages, as a fraction of stages x the step's length."""
    length = max(op.end for op in ops)
    busy = sum(op.end - op.start for op in ops)
    return 1 - busy / (stages * length)
