"""Whether a layout can run a model: every axis's rules, as one error (one layout) or a mask (many)."""

from __future__ import annotations

from costmodel.errors import CostModelError
from costmodel.inputs.placement import DEFAULT_PLACEMENT
from costmodel.parallel import context, data, expert, pipeline, tensor
from costmodel.mathops import above_one, either, family, negation, prime_factor_count, where
from costmodel.parallel.collective import Rule
from costmodel.cost import shape_op

AXES = (pipeline, tensor, context, data, expert)


def rules(shape, point, hardware=None, recipe=None) -> list:
    """Every axis's rules, the pipeline's first (a stage count above L makes the rest moot), then the
    recomputation's and ``recipe``'s precision, then the placement's on ``hardware``."""
    placed = placement_rules(hardware, point) if hardware is not None else []
    precision = data.precision_rules(recipe, point) if recipe is not None else []
    return [rule for axis in AXES for rule in axis.checks(shape, point)] + shape_op.rules(shape, point) + precision \
        + placed


def check(shape, point, hardware=None, recipe=None) -> None:
    """Raise :class:`CostModelError` naming the first rule a single layout breaks."""
    for rule in rules(shape, point, hardware, recipe):
        if not rule.ok:
            raise CostModelError(rule.message())


def valid(shape, point, hardware=None, recipe=None):
    """A mask over the layouts of an array point: True where every rule holds."""
    mask = True
    for rule in rules(shape, point, hardware, recipe):
        mask = mask & rule.ok
    return mask


def placement_rules(hardware, point) -> list:
    """--mx/--my name TPU torus axes: none on a GPU (placement there follows the NVLink domain in the
    layout's --placement order), and no more than the torus has on a TPU, where --placement has no say."""
    if hardware.kind != "tpu":
        return [Rule((point.mx <= 1) & (point.my <= 1),
                     lambda: f"--mx/--my place axes on a TPU torus; {hardware.name} is a {hardware.kind_name} "
                     f"(its axes are placed on the {hardware.network[0].name} domain and nodes automatically)")]
    if point.placement != DEFAULT_PLACEMENT:
        return [Rule(False, lambda: f"--placement orders a GPU layout's axes on the network; {hardware.name} is a TPU "
                     "(place its axes on the torus with --mx/--my)")]
    axes = hardware.level("ici").torus_axes
    # an axis of degree 1 spans no torus axis, whatever its --mx/--my says (the default 1 of the other)
    used = where(above_one(point.data), point.mx, 0) + where(above_one(point.tp), point.my, 0)
    out = [Rule(used <= axes,
                lambda: f"--mx {point.mx} + --my {point.my} = {point.mx + point.my} torus axes, but "
                f"{hardware.name} has {axes}")] if axes else []
    if family(point.data, point.tp, point.mx, point.my) != "sympy":  # each torus axis an axis spans holds 2+ of its chips
        out += [_torus_rule("--mx", "data", point.data, point.mx), _torus_rule("--my", "TP", point.tp, point.my)]
    return out


def _torus_rule(flag: str, axis: str, chips, spans) -> Rule:
    """A group of ``chips`` spans at most as many torus axes as ``chips`` has prime factors (with multiplicity): each
    axis holds 2 or more of them (a degree of 1 spans none, whatever the flag says)."""
    most = prime_factor_count(chips)
    return Rule(either(negation(above_one(chips)), spans <= most),
                lambda: f"{flag} {spans}: the {axis} axis's {chips:,} chips span at most {most} torus "
                f"{'axis' if most == 1 else 'axes'} (each holds 2 or more of them)")
