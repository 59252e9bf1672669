"""The aggregator's results in the shapes the tests compare: one place that calls costmodel.cost."""

from __future__ import annotations

from costmodel.cost.evaluate import evaluate_layout
from costmodel.cost.point import Point
from costmodel.cost.shape import Shape
from costmodel.parallel import pipeline


class Memory:
    """The heaviest stage's memory with the whole model's figures beside it."""

    def __init__(self, cost):
        top = cost.heaviest
        self.params = cost.params
        self.state_bytes_unsharded = cost.state_bytes_unsharded
        self.components = top.components
        self.total_bytes = top.total_bytes
        self.activation_bytes = top.activation_bytes
        self.activation_bytes_per_token = top.stage.activation_bytes_per_token
        self.params_per_device = top.stage.params


def memory(model, recipe, layout) -> Memory:
    return Memory(evaluate_layout(model, recipe, layout))


def stages(model, recipe, layout):
    return evaluate_layout(model, recipe, layout).stages


def collectives(model, recipe, layout):
    return evaluate_layout(model, recipe, layout).collectives


def timed(model, recipe, layout, hardware):
    return evaluate_layout(model, recipe, layout, hardware).collectives


def step(model, recipe, layout, hardware, **options):
    return evaluate_layout(model, recipe, layout, hardware, **options).step


def layer_bytes_per_token(model, act_bytes, layout, fused_swiglu: bool = False):
    """One layer keeping everything (less the attention core under selective recompute), per token."""
    return Shape.of(model).layer_activation_bytes_per_token(
        act_bytes=act_bytes, tp=layout.tp, sp=layout.sp, selective=layout.recompute == "selective",
        flash=layout.flash, norm_stats=layout.norm_stats, eager=layout.eager, fused_swiglu=fused_swiglu)


def input_bytes_per_token(model, act_bytes, layout):
    return Shape.of(model).layer_input_bytes_per_token(act_bytes=act_bytes, tp=layout.tp, sp=layout.sp)


def first_stage_in_flight(layout):
    return pipeline.in_flight(Point.of(layout), pipeline.StageRole(0, 1, int(layout.pp == 1)))
