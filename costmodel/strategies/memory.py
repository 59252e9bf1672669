"""Per-device memory by component for a model, recipe and layout."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from costmodel.formulas import memory as mem
from costmodel.specs.layout import Layout
from costmodel.specs.recipe import Recipe
from costmodel.strategies import activations as acts
from costmodel.strategies import checks, data, stages
from costmodel.strategies import model as mq

#: Persistent state, in the order it is printed: component -> recipe attribute (bytes/param).
STATE_BYTES = {
    "weights": "weight_bytes",
    "master_weights": "master_bytes",
    "grads": "grad_bytes",
    "optimizer": "optimizer_bytes",
}


def state_components(*, params, recipe: Recipe, zero_stage: int, fsdp) -> dict:
    """Bytes per device of each kind of persistent state the recipe keeps."""
    out = {}
    for name, attribute in STATE_BYTES.items():
        per_param = getattr(recipe, attribute)
        if per_param:
            out[name] = mem.state_bytes_per_device(
                params=params, bytes_per_param=per_param,
                shards=data.shards(name, recipe, zero_stage, fsdp))
    return out


def memory_components(*, params, activation_bytes, weight_copy_bytes, recipe: Recipe,
                      zero_stage: int, fsdp, shard_fraction) -> dict:
    """All components per device: state, weight copies, activations (numbers or symbols)."""
    out = state_components(params=params, recipe=recipe, zero_stage=zero_stage, fsdp=fsdp)
    out["weight_copies"] = weight_copy_bytes
    out["activations"] = mem.sharded_activation_bytes_per_device(
        activation_bytes=activation_bytes, fraction=shard_fraction, shards=fsdp)
    return out


@dataclass(frozen=True)
class MemoryBreakdown:
    """What one device holds, and the numbers it was computed from."""

    params: int  # whole model
    params_per_device: int  # this device's share before data-axis sharding (P / (tp pp))
    stage_layers: int
    activation_bytes_per_token: float  # per device, before data-axis sharding
    activation_bytes: float  # A: per device, before data-axis sharding
    weight_copies_kind: str  # "autocast copies", "gathered weights" or "none"
    state_bytes_unsharded: int  # the whole model's persistent state on one device
    components: dict = field(default_factory=dict)
    stage: int = 0  # pipeline stage (0 = first)
    stages: tuple = ()  # with pp > 1: every stage's breakdown

    @property
    def total_bytes(self) -> float:
        return sum(self.components.values())

    @property
    def state_bytes(self) -> float:
        """Persistent state on this device (weights, master, grads, optimizer)."""
        return sum(v for k, v in self.components.items() if k in STATE_BYTES)


def weight_copies(model, recipe: Recipe, layout: Layout, params_per_device: int,
                  first_stage: bool = True) -> tuple[str, float]:
    """Unsharded low-precision weights kept until backward, and which kind they are."""
    zero_stage = layout.zero_stage
    if zero_stage >= 3:
        if layout.reshard_after_forward:
            return "none", 0
        return "gathered weights", recipe.compute_bytes * params_per_device
    if recipe.compute_weights == "persistent":
        return "none", 0  # autograd saves the kept low-precision parameters themselves
    unsaved = mq.first_layer_unsaved_params(model) // layout.tp if first_stage else 0
    return "autocast copies", mem.autocast_weight_copy_bytes(
        params=params_per_device, compute_bytes=recipe.compute_bytes, unsaved_params=unsaved)


def stage_with_most_params(model, layout: Layout) -> int:
    """The stage whose device holds the most parameters (stage 0 on ties): the one with the most
    data-axis traffic. (Memory reports the stage with the largest total, usually the same.)"""
    sizes = [stages.stage_params_per_device(model, layout, i) for i in range(layout.pp)]
    return sizes.index(max(sizes))


def stage_breakdown(model, recipe: Recipe, layout: Layout, stage: int) -> MemoryBreakdown:
    """Per-device memory of pipeline stage ``stage``."""
    layers = stages.stage_layer_counts(model.layers, layout.pp)[stage]
    first, last = stage == 0, stage == layout.pp - 1
    p_dev = stages.stage_params_per_device(model, layout, stage)
    per_token = acts.stage_bytes_per_token(model, recipe.activation_bytes, layout, layers, first, last,
                                           autocast=recipe.compute_weights == "transient")
    per_token *= acts.in_flight(layout, stage)
    activation_bytes = per_token * layout.tokens / layout.cp
    kind, copies = weight_copies(model, recipe, layout, p_dev, first)
    components = memory_components(
        params=p_dev, activation_bytes=activation_bytes, weight_copy_bytes=copies, recipe=recipe,
        zero_stage=layout.zero_stage, fsdp=layout.fsdp, shard_fraction=layout.shard_activations)
    return MemoryBreakdown(
        params=mq.total_params(model), params_per_device=p_dev, stage_layers=layers,
        activation_bytes_per_token=per_token, activation_bytes=activation_bytes,
        weight_copies_kind=kind, components=components,
        state_bytes_unsharded=mq.total_params(model) * recipe.state_bytes_per_param, stage=stage)


def memory_breakdown(model, recipe: Recipe, layout: Layout) -> MemoryBreakdown:
    """Per-device memory of the heaviest pipeline stage; ``.stages`` has every stage's total."""
    checks.check_layout(model, layout)
    per_stage = [stage_breakdown(model, recipe, layout, i) for i in range(layout.pp)]
    heaviest = max(per_stage, key=lambda b: b.total_bytes)
    return replace(heaviest, stages=tuple(per_stage) if layout.pp > 1 else ())
