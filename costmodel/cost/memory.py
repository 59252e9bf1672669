"""Per-device memory by component, for every stage that can be the heaviest, and the heaviest.

Components: persistent state (low-precision weights, master weights, gradients, optimizer state,
each divided by N where the ZeRO stage shards it), weight copies kept for backward, activations.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from costmodel.formulas import memory as mem
from costmodel.mathops import exact_div, maximum, where
from costmodel.parallel import data
from costmodel.cost.stage import Stage, activation_bytes

#: Persistent state, in the order it is printed: component -> recipe attribute (bytes/param).
STATE_BYTES = {
    "weights": "weight_bytes",
    "master_weights": "master_bytes",
    "grads": "grad_bytes",
    "optimizer": "optimizer_bytes",
}


def state_components(*, params, recipe, zero: int, fsdp) -> dict:
    """Bytes per device of each kind of persistent state the recipe keeps."""
    out = {}
    for name, attribute in STATE_BYTES.items():
        per_param = getattr(recipe, attribute)
        if per_param:
            out[name] = mem.state_bytes_per_device(params=params, bytes_per_param=per_param,
                                                   shards=data.shards(name, recipe, zero, fsdp))
    return out


def weight_copy_kind(recipe, point) -> str:
    """Which unsharded low-precision weights a device keeps until backward (a single layout's)."""
    if data.fsdp_active(point.zero, point.fsdp) is True:
        return "gathered weights" if not point.reshard_after_forward else "none"
    if recipe.compute_weights == "persistent":
        return "none"  # autograd saves the kept low-precision parameters themselves
    return "autocast copies"


def weight_copy_bytes(recipe, point, *, params, unsaved):
    """FSDP: the gathered copy if kept from forward to backward; else autocast's saved bf16 copies
    b_c (P - P_unsaved) (``unsaved``: the first stage's first matmuls when the stack is fed with data)."""
    gathered = 0 if point.reshard_after_forward else recipe.compute_bytes * params
    if recipe.compute_weights == "persistent":
        other = 0
    else:
        other = mem.autocast_weight_copy_bytes(params=params, compute_bytes=recipe.compute_bytes,
                                               unsaved_params=unsaved)
    return where(data.fsdp_active(point.zero, point.fsdp), gathered, other)


def unsaved_params(shape, point, st: Stage):
    """Parameters on this device whose low-precision copy autograd does not save."""
    return exact_div(st.role.first * shape.unsaved_first_layer_params(), point.tp)


def components(recipe, point, *, params, activation_bytes, weight_copies) -> dict:
    """All components per device from P (params before data sharding), A (activations) and the copies."""
    out = state_components(params=params, recipe=recipe, zero=point.zero, fsdp=point.fsdp)
    out["weight_copies"] = weight_copies
    out["activations"] = mem.sharded_activation_bytes_per_device(
        activation_bytes=activation_bytes, fraction=point.shard_activations, shards=point.fsdp)
    return out


@dataclass(frozen=True)
class StageMemory:
    """What one device of one stage holds, and the numbers it was computed from."""

    stage: Stage
    activation_bytes: object  # A
    components: dict = field(default_factory=dict)

    @property
    def total_bytes(self):
        return sum(self.components.values())

    @property
    def activation_bytes_per_token(self):
        """Saved bytes per micro-batch token, times the micro-batches in flight."""
        return self.stage.activation_bytes_per_token

    @property
    def params_per_device(self):
        """The stage's parameters on one device, before data-axis sharding."""
        return self.stage.params

    @property
    def state_bytes(self):
        return sum(v for k, v in self.components.items() if k in STATE_BYTES)


def stage_memory(shape, recipe, point, st: Stage) -> StageMemory:
    """Components per device of one stage."""
    acts = activation_bytes(st, point)
    copies = weight_copy_bytes(recipe, point, params=st.params, unsaved=unsaved_params(shape, point, st))
    return StageMemory(st, acts, components(recipe, point, params=st.params, activation_bytes=acts,
                                            weight_copies=copies))


def stages_memory(shape, recipe, point, stages: list[Stage]) -> list[StageMemory]:
    """Memory of every stage (one layout) or of the three that contain the heaviest (arrays, formulas)."""
    return [stage_memory(shape, recipe, point, st) for st in stages]


def heaviest_total(stages: list[StageMemory]):
    """The largest total over the stages a layout has."""
    out = None
    for s in stages:
        value = where(s.stage.role.exists, s.total_bytes, 0)
        out = value if out is None else maximum(out, value)
    return out


def heaviest(stages: list[StageMemory]) -> StageMemory:
    """The heaviest stage of a single layout (the first of equals)."""
    return max(stages, key=lambda s: s.total_bytes)
