"""All collectives of one training step for a model, recipe and layout, with their times."""

from __future__ import annotations

from dataclasses import dataclass

from costmodel.formulas.comms import transfer_seconds
from costmodel.specs.hardware import Hardware
from costmodel.specs.layout import Layout
from costmodel.specs.recipe import Recipe
from costmodel.strategies import checks
from costmodel.strategies.collective import Collective
from costmodel.strategies.data_comm import data_collectives
from costmodel.strategies.memory import params_per_device
from costmodel.strategies.network import AxisLink, axis_link
from costmodel.strategies.stages import stage_layer_counts
from costmodel.strategies.tensor_comm import tensor_collectives


def step_collectives(model, recipe: Recipe, layout: Layout) -> list[Collective]:
    """Every collective one device joins in one step (forward + backward + optimizer)."""
    checks.check_layout(model, layout)
    layers = max(stage_layer_counts(model.layers, layout.pp))
    out = data_collectives(
        params=params_per_device(model, layout), recipe=recipe, zero_stage=layout.zero_stage,
        fsdp=layout.fsdp, dp=layout.dp, layers=layers,
        reshard_after_forward=layout.reshard_after_forward,
        has_fsdp=layout.fsdp > 1, has_dp=layout.dp > 1)
    if layout.tp > 1:
        width = model.d_model if model.kind == "ffn" else model.hidden
        out += tensor_collectives(
            tokens=layout.tokens // layout.cp, width=width, layers=layers, tp=layout.tp,
            act_bytes=recipe.activation_bytes, sp=layout.sp,
            pairs_per_layer=1 if model.kind == "ffn" else 2)
    return out


@dataclass(frozen=True)
class TimedCollective:
    collective: Collective
    link: AxisLink

    @property
    def seconds(self) -> float:
        return transfer_seconds(bytes_sent=self.collective.bytes_sent, bandwidth=self.link.bandwidth)


def timed_collectives(model, recipe: Recipe, layout: Layout, hardware: Hardware) -> list[TimedCollective]:
    """Collectives with the level each runs on and its bandwidth-bound time."""
    return [TimedCollective(c, axis_link(hardware, layout, c.axis))
            for c in step_collectives(model, recipe, layout)]
