"""Every collective of one optimizer step, from every axis, for the stage with the most parameters,
each with the group's placement and its time (the one time model of :mod:`costmodel.cost.network`)."""

from __future__ import annotations

from dataclasses import dataclass

from costmodel.cost import network
from costmodel.cost.stage import Stage, stage
from costmodel.parallel import context, data, pipeline, tensor
from costmodel.parallel.collective import Collective, listed, select
from costmodel.parallel.pipeline import StageRole, representative_stages


def stage_collectives(shape, recipe, point, st: Stage) -> list[Collective]:
    """What one device of stage ``st`` joins in one step, axis by axis."""
    role = st.role
    out = data.collectives(params=st.params, root_params=st.root_params, layers=st.layers, recipe=recipe,
                           point=point)
    out += tensor.collectives(shape, recipe, point, layers=st.layers, first=role.first, last=role.last)
    out += context.collectives(shape, recipe, point, layers=st.layers)
    out += pipeline.collectives(shape, recipe, point)
    return out


def busiest_stage(shape, recipe, point) -> tuple[Stage, Stage, object]:
    """(first, last, whether the last holds more parameters): the stage with the most data-axis traffic
    is the one with the most parameters, the first on ties (middle stages never hold more than the first)."""
    roles = representative_stages(point.pp)
    first = stage(shape, recipe, point, roles[0])
    last = stage(shape, recipe, point, roles[-1] if len(roles) > 1 else roles[0])
    if len(roles) == 1:
        return first, first, False
    return first, last, last.params > first.params


def step_collectives(shape, recipe, point) -> list[Collective]:
    """Collectives of one step on the device of the stage with the most parameters."""
    first, last, last_wins = busiest_stage(shape, recipe, point)
    if first is last:
        return listed(stage_collectives(shape, recipe, point, first))
    return listed(select(last_wins, stage_collectives(shape, recipe, point, last),
                         stage_collectives(shape, recipe, point, first)))


@dataclass(frozen=True)
class Timed:
    """A collective with where it runs and how long its calls take over the step."""

    collective: Collective
    placement: network.Placement
    seconds_per_call: object
    level: str = ""  # single layouts only
    calibration: str = ""  # single layouts only

    @property
    def seconds(self):
        return self.collective.calls * self.seconds_per_call


def timed(hardware, point, collectives: list[Collective], labels: bool = True) -> list[Timed]:
    """Each collective with its placement and time; ``labels`` names level and calibration (one layout)."""
    out = []
    for c in collectives:
        where_ = network.placement(hardware, point, c.axis)
        seconds = network.collective_seconds(hardware, op=c.op, buffer_bytes=c.buffer_bytes, where_=where_)
        extra = {}
        if labels:
            extra = dict(level=network.level_label(hardware, where_),
                         calibration=network.calibration_used(hardware, c.op, where_))
        out.append(Timed(c, where_, seconds, **extra))
    return out


def axis_family(axis: str) -> str:
    """tp, cp, pp, or data (dp, fsdp and dp x fsdp)."""
    return "data" if axis in ("dp", "fsdp", "data") else axis


__all__ = ["StageRole", "Timed", "axis_family", "busiest_stage", "stage_collectives", "step_collectives", "timed"]
