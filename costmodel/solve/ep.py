"""The smallest expert-parallel degree whose per-device memory is under a limit.

EP divides the routed experts' state and weights by e and leaves the rest alone, so memory is
non-increasing in e; the admissible degrees are few (the divisors of E that also divide the data
axis and nest with its shards), so each is evaluated with the aggregator, smallest first.
"""

from __future__ import annotations

from costmodel.cost.checks import rules
from costmodel.cost.evaluate import evaluate_layout
from costmodel.cost.point import Point
from costmodel.cost.shape import Shape
from costmodel.errors import CostModelError
from costmodel.record import record


@record
class EpAnswer:
    """The smallest expert-parallel degree that fits, and the bytes each degree tried needs."""

    ep: int | None  # None when no admissible degree fits
    need_bytes: float  # at ``ep`` (or at the largest admissible degree when none fits)
    limit_bytes: float
    tried: dict  # degree -> bytes needed (every admissible degree up to the answer)


def admissible(model, layout) -> list[int]:
    """Degrees e the layout's rules accept (e divides E and the data axis, nests with the shards), ascending."""
    shape = Shape.of(model)
    if not shape.moe:
        raise CostModelError(f"{model.name} has no experts: expert parallelism does not apply")
    out = []
    for e in range(1, shape.experts + 1):
        if shape.experts % e == 0 and layout.data % e == 0:
            point = Point.of(layout.model_copy(update={"ep": e}))
            if all(rule.ok for rule in rules(shape, point)):
                out.append(e)
    return out


def solve_ep(model, recipe, layout, limit_bytes: float, framework=None) -> EpAnswer:
    """The smallest admissible e with the heaviest stage's memory (with a framework: its reserved
    peak plus what lives outside the allocator) under ``limit_bytes``."""
    if limit_bytes <= 0:
        raise CostModelError("the memory limit must be positive")
    degrees = admissible(model, layout)
    if not degrees:
        raise CostModelError(f"no expert-parallel degree divides both the experts and the data axis "
                             f"(--dp x --fsdp = {layout.data}) of this layout")
    outside = framework.outside_allocator_bytes if framework is not None else 0
    tried = {}
    for e in degrees:
        cost = evaluate_layout(model, recipe, layout.model_copy(update={"ep": e}), framework=framework)
        tried[e] = cost.memory_bytes + outside
        if tried[e] < limit_bytes:
            return EpAnswer(e, tried[e], limit_bytes, tried)
    return EpAnswer(None, tried[degrees[-1]], limit_bytes, tried)
