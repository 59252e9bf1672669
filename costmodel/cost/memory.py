"""Per-device memory by component, for every stage that can be the heaviest, and the heaviest.

Components: persistent state (low-precision weights, master weights, gradients, optimizer state,
each divided by N where the ZeRO stage shards it; FSDP's unsharded gradients inside pipeline stages), weight
copies kept for backward, activations. A framework's terms (cost/framework_terms.py) join them by phase.
"""

from __future__ import annotations

import functools
from dataclasses import field

from costmodel.formulas import memory as mem
from costmodel.mathops import exact_div, maximum, where
from costmodel.parallel import data, expert
from costmodel.parallel.collective import present
from costmodel.cost.framework_terms import overheads
from costmodel.cost.stage import Stage, activation_bytes
from costmodel.record import record

#: Persistent state, in the order it is printed: component -> recipe attribute (bytes/param).
STATE_BYTES = {
    "weights": "weight_bytes",
    "master_weights": "master_bytes",
    "grads": "grad_bytes",
    "optimizer": "optimizer_bytes",
}


def state_components(*, params, recipe, zero: int, fsdp, expert_params=0, expert_fsdp=1) -> dict:
    """Bytes per device of each kind of persistent state the recipe keeps; of the ``params``,
    ``expert_params`` (routed experts) are sharded over their own ``expert_fsdp`` shards."""
    out = {}
    for name, attribute in STATE_BYTES.items():
        per_param = getattr(recipe, attribute)
        if per_param:
            out[name] = mem.state_bytes_per_device(params=params - expert_params, bytes_per_param=per_param,
                                                   shards=data.shards(name, recipe, zero, fsdp))
            if not (isinstance(expert_params, int) and expert_params == 0):
                out[name] = out[name] + mem.state_bytes_per_device(
                    params=expert_params, bytes_per_param=per_param, shards=data.shards(name, recipe, zero, expert_fsdp))
    return out


def weight_copy_kind(recipe, point) -> str:
    """Which unsharded low-precision weights a device keeps until backward (a single layout's)."""
    point = point.sharding
    if data.fsdp_active(point.zero, point.fsdp) is True:
        kept = not point.reshard_after_forward or data.fsdp_in_pipeline(point)
        return "gathered weights" if kept else "none"
    if recipe.compute_weights == "persistent":
        return "none"  # autograd saves the kept low-precision parameters themselves
    return "autocast copies"


def fsdp_gathers_in_compute_dtype(recipe, point) -> bool:
    """Whether FSDP shards the weights of an autocast recipe whose master dtype is not its compute dtype: cost4d then
    gathers them in the compute dtype (FSDP2's MixedPrecisionPolicy(param_dtype=...), as tests/dist_workers.py runs
    it) and frees them after forward, where FSDP without that policy would gather the master dtype and autocast would
    save a compute-dtype copy of each weight for backward (a single layout's)."""
    return (recipe.casts == "autocast" and recipe.autocast and recipe.master != recipe.compute
            and data.fsdp_active(point.sharding.zero, point.sharding.fsdp) is True)


def weight_copy_bytes(recipe, point, *, params, unsaved, copied=None):
    """FSDP: the gathered copy if kept from forward to backward (or, inside torch's pipeline stages, which
    reshard nothing after a backward (stage.py backward_one_chunk), gathered again by each backward and kept); else
    autocast's saved bf16 copies b_c (P_c - P_unsaved) of the ``copied`` matmul weights (default all ``params``;
    ``unsaved``: the first stage's first matmuls when the stack is fed with data)."""
    point = point.sharding
    whole = recipe.compute_bytes * params
    gathered = where(data.fsdp_in_pipeline(point), whole, 0) if point.reshard_after_forward else whole
    if recipe.compute_weights == "persistent":
        other = 0
    else:
        other = mem.autocast_weight_copy_bytes(params=params if copied is None else copied,
                                               compute_bytes=recipe.compute_bytes, unsaved_params=unsaved)
    return where(data.fsdp_active(point.zero, point.fsdp), gathered, other)


def unsaved_params(shape, point, st: Stage):
    """Parameters on this device whose low-precision copy autograd does not save."""
    return exact_div(st.role.first * shape.unsaved_first_layer_params(), point.tp)


def components(recipe, point, *, params, activation_bytes, weight_copies, expert_params=0, reduce_bytes=None) -> dict:
    """All components per device from P (params before data sharding, of which ``expert_params`` routed
    experts), A (activations) and the copies; ``reduce_bytes``: the gradients' reduce dtype (default the
    recipe's grad_comm), which FSDP inside pipeline stages accumulates them in."""
    out = state_components(params=params, recipe=recipe, zero=point.zero, fsdp=point.sharding.fsdp,
                           expert_params=expert_params, expert_fsdp=expert.expert_shards(point))
    if point.zero == 3 and present(point.pp):  # FSDP inside pipeline stages syncs once per step: unsharded until then
        out["unsharded_grads"] = where(data.fsdp_in_pipeline(point), mem.pipelined_fsdp_grad_bytes(
            params=params, reduce_bytes=recipe.grad_comm_bytes if reduce_bytes is None else reduce_bytes), 0)
    out["weight_copies"] = weight_copies
    out["activations"] = mem.sharded_activation_bytes_per_device(
        activation_bytes=activation_bytes, fraction=point.shard_activations, shards=point.fsdp)
    return out


FORWARD_BACKWARD, GRAD_SYNC, OPTIMIZER = "forward-backward", "gradient sync", "optimizer step"
#: the step's phases in order: backward's activations gone, a framework that reduces after backward (DeepSpeed
#: ZeRO-1 without overlap_comm, its pipeline engine) holds the full gradients and its buffers at once
PHASES = (FORWARD_BACKWARD, GRAD_SYNC, OPTIMIZER)
#: overhead term -> the phases it is allocated in, and whether its size is fitted (reserved, not allocated)
OVERHEADS = {
    "ddp_buckets": ((FORWARD_BACKWARD, GRAD_SYNC, OPTIMIZER), False),
    "sp_gather_buffer": ((FORWARD_BACKWARD, GRAD_SYNC, OPTIMIZER), False),
    "pending_reduce_scatters": ((FORWARD_BACKWARD,), False),
    "loss_upcast": ((FORWARD_BACKWARD,), False),
    "recomputed_layer": ((FORWARD_BACKWARD,), False),
    "ring_attention": ((FORWARD_BACKWARD,), False),
    "wgrad_cache": ((FORWARD_BACKWARD, GRAD_SYNC, OPTIMIZER), False),
    "fsdp_in_flight": ((FORWARD_BACKWARD,), False),
    "p2p_buffers": ((FORWARD_BACKWARD,), False),
    "zero1_gather": ((OPTIMIZER,), False),
    "zero_grad_bucket": ((FORWARD_BACKWARD, GRAD_SYNC), False),
    "zero3_grad_bucket": ((FORWARD_BACKWARD, GRAD_SYNC, OPTIMIZER), False),
    "zero3_bucket_copy": ((FORWARD_BACKWARD,), False),
    "zero_output_grad": ((FORWARD_BACKWARD,), False),
    "zero2_partition_overhang": ((FORWARD_BACKWARD, GRAD_SYNC, OPTIMIZER), False),
    "zero1_grad_buffer": ((FORWARD_BACKWARD,), False),
    "zero1_sync_buffer": ((GRAD_SYNC,), False),
    "zero2_accumulation_buffer": ((FORWARD_BACKWARD,), False),
    "zero1_freed_grads": ((OPTIMIZER,), False),
    "zero_step_grads": ((OPTIMIZER,), False),
    "zero3_live_params": ((FORWARD_BACKWARD,), False),
    "optimizer_temporaries": ((OPTIMIZER,), False),
    "activation_reserve": ((FORWARD_BACKWARD,), True),
    "reserve": ((FORWARD_BACKWARD, GRAD_SYNC, OPTIMIZER), True),
}
#: terms whose one flat block is larger than any activation the allocator frees before it: it gets a
#: segment of its own, which the caching allocator keeps reserved through every later phase
#: (torch.cuda caching allocator: freed blocks are cached, not returned, and a request larger than
#: every cached free block maps a new segment; docs 'CUDA semantics: memory management').
CACHED_SEGMENTS = ("zero1_gather",)
#: terms the caching allocator holds reserved but no tensor holds: blocks freed by the host that it cannot
#: reuse until the stream work recorded on them is done (reserved, not allocated; sized, not fitted)
RESERVED_ONLY = ("pending_reduce_scatters",)


def reserved_only(term: str) -> bool:
    """Whether a term counts in the reserved peak only, not the allocated one: the fitted reserve, and blocks
    no tensor holds (:data:`RESERVED_ONLY`)."""
    return OVERHEADS[term][1] or term in RESERVED_ONLY
#: exact components alive during the optimizer step (activations and weight copies are freed)
OPTIMIZER_STATE = tuple(STATE_BYTES)


@record
class StageMemory:
    """What one device of one stage holds, and the numbers it was computed from.

    ``components`` is the exact accounting; ``overheads`` the framework's terms. Peak memory is the
    largest of the step's phases (forward-backward, gradient sync, optimizer step), not the sum of every term.
    """

    stage: Stage
    activation_bytes: object  # A
    components: dict = field(default_factory=dict)
    overheads: dict = field(default_factory=dict)

    @property
    def total_bytes(self):
        """The exact accounting's total (state + weight copies + activations)."""
        return sum(self.components.values())

    def phase_bytes(self, phase: str, *, fitted: bool = True):
        """Bytes in ``phase``: exact components and the overheads allocated then; ``fitted``: what the
        allocator reserves (the fitted terms, blocks not yet reusable, cached segments of earlier phases) instead."""
        names = self.components if phase == FORWARD_BACKWARD else OPTIMIZER_STATE  # activations are freed after
        exact = sum(v for k, v in self.components.items() if k in names)
        return exact + sum(v for k, v in self.overheads.items()
                           if (phase in OVERHEADS[k][0] or (fitted and k in CACHED_SEGMENTS))
                           and (fitted or not reserved_only(k)))

    def _peak(self, fitted: bool):
        if not self.overheads:
            return self.total_bytes
        out = self.phase_bytes(FORWARD_BACKWARD, fitted=fitted)
        for phase in PHASES[1:]:
            out = maximum(out, self.phase_bytes(phase, fitted=fitted))
        return out

    @property
    def peak_bytes(self):
        """What the allocator holds allocated at the peak: the largest phase, named code terms only."""
        return self._peak(False)

    @property
    def reserved_bytes(self):
        """What the caching allocator reserves at the peak: the fitted terms and the cached segments too."""
        return self._peak(True)

    @property
    def peak_phase(self) -> str:
        """The phase whose allocated bytes peak (a single layout)."""
        if not self.overheads:
            return FORWARD_BACKWARD
        return max(PHASES, key=lambda phase: self.phase_bytes(phase, fitted=False))

    @property
    def reserved_phase(self) -> str:
        """The phase whose reserved bytes peak (a single layout): the phase of reserved_bytes."""
        if not self.overheads:
            return FORWARD_BACKWARD
        return max(PHASES, key=lambda phase: self.phase_bytes(phase, fitted=True))

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


def stage_memory(shape, recipe, point, st: Stage, framework=None) -> StageMemory:
    """Components per device of one stage, and the framework's overheads."""
    acts = activation_bytes(st, point)
    copies = weight_copy_bytes(recipe, point, params=st.params, unsaved=unsaved_params(shape, point, st),
                               copied=st.copied_params)
    parts = components(recipe, point, params=st.params, activation_bytes=acts, weight_copies=copies,
                       expert_params=st.expert_params,
                       reduce_bytes=framework.reduce_bytes(recipe) if framework is not None else None)
    return StageMemory(st, acts, parts, overheads(framework, recipe, point, shape, st, parts["activations"]))


def stages_memory(shape, recipe, point, stages: list[Stage], framework=None) -> list[StageMemory]:
    """Memory of every stage (one layout) or of the three that contain the heaviest (arrays, formulas)."""
    return [stage_memory(shape, recipe, point, st, framework) for st in stages]


def heaviest_total(stages: list[StageMemory]):
    """The largest peak (reserved, with the framework's terms) over the stages a layout has."""
    out = None
    for s in stages:
        value = where(s.stage.role.exists, s.reserved_bytes, 0)
        out = value if out is None else maximum(out, value)
    return out


def heaviest(stages: list[StageMemory]) -> StageMemory:
    """The heaviest stage of a single layout (the first of equals)."""
    return max(stages, key=lambda s: s.reserved_bytes)


def optimizer_params(stages, recipe):
    """Parameters the busiest device's optimizer updates: the optimizer state it holds over the bytes each
    parameter keeps there (its ZeRO shard; routed experts sharded their own way), the most over the stages
    (``stages``: cost/memory.StageMemory). Without optimizer states, the master weights (else the weights)."""
    for name, per_param in (("optimizer", recipe.optimizer_bytes), ("master_weights", recipe.master_bytes),
                            ("weights", recipe.weight_bytes)):
        if per_param:
            return functools.reduce(maximum, [s.components.get(name, 0) / per_param for s in stages])
    return 0
