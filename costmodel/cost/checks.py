"""Whether a layout can run a model: every axis's rules, as one error (one layout) or a mask (many)."""

from __future__ import annotations

from costmodel.errors import CostModelError
from costmodel.cost import network
from costmodel.parallel import context, data, pipeline, tensor

AXES = (pipeline, tensor, context, data)


def rules(shape, point, hardware=None) -> list:
    """Every axis's rules, the pipeline's first (a stage count above L makes the rest moot), then the
    placement's on ``hardware``."""
    placed = network.checks(hardware, point) if hardware is not None else []
    return [rule for axis in AXES for rule in axis.checks(shape, point)] + placed


def check(shape, point, hardware=None) -> None:
    """Raise :class:`CostModelError` naming the first rule a single layout breaks."""
    for rule in rules(shape, point, hardware):
        if not rule.ok:
            raise CostModelError(rule.message())


def valid(shape, point, hardware=None):
    """A mask over the layouts of an array point: True where every rule holds."""
    mask = True
    for rule in rules(shape, point, hardware):
        mask = mask & rule.ok
    return mask
