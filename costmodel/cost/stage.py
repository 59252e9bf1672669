"""What one pipeline stage holds on one device: layers, parameters (and its root), activations per token."""

from __future__ import annotations

from dataclasses import dataclass

from costmodel.mathops import ceil_div, exact_div
from costmodel.parallel import pipeline, tensor
from costmodel.parallel.pipeline import StageRole


@dataclass(frozen=True)
class Stage:
    role: StageRole
    layers: object
    params: object  # on one device, before data-axis sharding
    root_params: object  # of which outside the blocks (embeddings, final norm, output layer)
    activation_bytes_per_token: object  # one micro-batch token, times the micro-batches in flight
    in_flight: object


def recomputed_layers(layers, point):
    """Layers whose activations are recomputed: none, all ('full') or one per K ('every')."""
    if point.recompute == "full":
        return layers
    if point.recompute == "every":
        return ceil_div(layers, point.recompute_layers)
    return 0


def stage(shape, recipe, point, role: StageRole) -> Stage:
    """The stage ``role`` of ``point`` on one device (replicated KV heads counted on every rank)."""
    shape = tensor.as_held(shape, point)
    layers = pipeline.stage_layers(shape.layers, point.pp, role, point.split, shape.split_costs())
    params, root = tensor.stage_params_per_device(shape, layers=layers, first=role.first, last=role.last,
                                                  tp=point.tp, ends=point.tp_ends)
    act = recipe.activation_bytes
    kept = shape.layer_activation_bytes_per_token(act_bytes=act, tp=point.tp, sp=point.sp,
                                                  selective=point.recompute == "selective", flash=point.flash,
                                                  norm_stats=point.norm_stats, eager=point.eager)
    again = recomputed_layers(layers, point)
    per_token = (layers - again) * kept + again * shape.layer_input_bytes_per_token(act_bytes=act, tp=point.tp,
                                                                                    sp=point.sp)
    per_token = per_token + role.first * shape.first_stage_extra_bytes_per_token(
        act_bytes=act, autocast=recipe.compute_weights == "transient")
    per_token = per_token + role.last * shape.last_stage_extra_bytes_per_token(act_bytes=act, tp=point.tp,
                                                                              norm_stats=point.norm_stats)
    flight = pipeline.in_flight(point, role)
    return Stage(role, layers, params, root, per_token * flight, flight)


def activation_bytes(stage: Stage, point):
    """A: the stage's saved activations on one device, before data-axis sharding (tokens / c each)."""
    return stage.activation_bytes_per_token * exact_div(point.tokens, point.cp)
