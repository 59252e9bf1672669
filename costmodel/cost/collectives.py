"""Every collective of one optimizer step, from every axis, for the device that carries the most (the data axis's
on the stage with the most parameters, the layers' on the one with the most layers), each with the group's
placement and its time (the one time model of :mod:`costmodel.cost.network`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from costmodel.cost.stage import Stage, recomputed_layers
from costmodel.mathops import family, where
from costmodel.parallel import context, data, expert, pipeline, tensor
from costmodel.parallel.collective import SUBGROUPS, Collective, listed
from costmodel.parallel.pipeline import StageRole
from costmodel.record import record

if TYPE_CHECKING:
    from costmodel.cost.placement import Placement


def stage_collectives(shape, recipe, point, st: Stage) -> list[Collective]:
    """What one device of stage ``st`` joins in one step, axis by axis."""
    return data_rows(shape, recipe, point, st) + layer_rows(shape, recipe, point, st)


def data_rows(shape, recipe, point, st: Stage) -> list[Collective]:
    """The data axis's traffic of stage ``st`` (gradients and FSDP's gathers, the routed experts' over theirs)."""
    out = data.collectives(params=st.params - st.expert_params, root_params=st.root_params, layers=st.layers,
                           recipe=recipe, point=point)
    if shape.moe:
        out += expert.data_collectives(params=st.expert_params, layers=st.moe_layers, recipe=recipe, point=point)
    return out


def layer_rows(shape, recipe, point, st: Stage) -> list[Collective]:
    """The traffic each micro-batch's layers of stage ``st`` send (TP and SP, the experts' all-to-alls, CP) and the
    pipeline's sends."""
    role = st.role
    recomputed = recomputed_layers(st.layers, point)
    recomputed_dense = None if st.dense_layers is None else recomputed_layers(st.dense_layers, point)
    out = tensor.collectives(shape, recipe, point, layers=st.layers, first=role.first, last=role.last,
                             dense_layers=st.dense_layers, recomputed=recomputed, recomputed_dense=recomputed_dense)
    out += expert.collectives(shape, recipe, point, moe_layers=st.moe_layers,
                              recomputed=recomputed - (0 if recomputed_dense is None else recomputed_dense))
    # torchtitan's op policy saves the SDPA op whole, and torch's ring attention runs inside it: its traffic never reruns
    out += context.collectives(shape, recipe, point, layers=st.layers,
                               recomputed=0 if point.recompute == "op" else recomputed)
    out += pipeline.collectives(shape, recipe, point)
    return out


def busiest_stage(stages: list[Stage], key=None) -> Stage:
    """The stage with the most of ``key`` (default: parameters, which the data axis's traffic follows), the first on
    ties. ``stages``: every stage, or the representative ones (first, middles, last), each element of an array
    choosing its own (a stage a layout lacks never wins); a formula compares the first and the last."""
    key = key or (lambda st: st.params)
    if len(stages) == 1:
        return stages[0]
    if family(*(key(st) for st in stages)) == "sympy":
        stages = [stages[0], stages[-1]]
    best = stages[0]
    for st in stages[1:]:
        wins = key(st) > key(best)
        if family(wins) == "numpy":
            wins = wins & st.role.exists
        best = (st if wins else best) if family(wins) == "number" else _either(wins, st, best)
    return best


def busiest_layers(st: Stage):
    """What ranks a stage by its layers' traffic: its MoE layers first (each sends the experts' all-to-alls), then
    its layers."""
    return st.moe_layers * 4096 + st.layers  # more layers than any model has per stage


def _either(wins, a: Stage, b: Stage) -> Stage:
    """``a`` where ``wins``, else ``b``, field by field (arrays, formulas)."""
    def pick(x, y):
        return x if x is y else where(wins, x, y)

    role = StageRole(None, pick(a.role.first, b.role.first), pick(a.role.last, b.role.last))
    dense = None if b.dense_layers is None else pick(a.dense_layers, b.dense_layers)
    copied = None if b.copied_params is None else pick(a.copied_params, b.copied_params)
    return Stage(role, pick(a.layers, b.layers), pick(a.params, b.params), pick(a.root_params, b.root_params),
                 pick(a.activation_bytes_per_token, b.activation_bytes_per_token), pick(a.in_flight, b.in_flight),
                 dense, pick(a.expert_params, b.expert_params), copied)


def step_collectives(shape, recipe, point, stages: list[Stage]) -> list[Collective]:
    """Collectives of one step on the device that carries the most: the data axis's on the stage with the most
    parameters, the layers' (TP, experts, CP) on the stage with the most MoE layers, then the most layers, which
    the pipeline waits on (``stages``: every stage of a layout, or the representative ones)."""
    data_stage, work_stage = busiest_stage(stages), busiest_stage(stages, busiest_layers)
    return listed(data_rows(shape, recipe, point, data_stage) + layer_rows(shape, recipe, point, work_stage))


@record
class Timed:
    """A collective with where it runs and how long its calls take over the step."""

    collective: Collective
    placement: Placement
    seconds_per_call: object
    level: str = ""  # single layouts only
    calibration: str = ""  # single layouts only

    @property
    def seconds(self):
        return self.collective.calls * self.seconds_per_call


def timed(hardware, point, collectives: list[Collective], labels: bool = True) -> list[Timed]:
    """Each collective with its placement and time; ``labels`` names level and calibration (one layout).
    Placement and link cost are computed once per axis and op (t = latency + per_byte x S)."""
    from costmodel.cost import network  # timing only: `memory` and `flops` never place a group
    from costmodel.cost.placement import placement, subgroup_placement

    placements, costs, out, priced, seen = {}, {}, [], {}, []
    for c in collectives:
        if c.axis not in placements:
            placements[c.axis] = (subgroup_placement(hardware, point, c.axis, c.group)
                                  if c.axis in SUBGROUPS else placement(hardware, point, c.axis))
        where_ = placements[c.axis]
        if (c.axis, c.op) not in costs:
            costs[c.axis, c.op] = network.link_cost(hardware, c.op, where_)
        extra = {}
        if labels:
            extra = dict(level=network.level_label(hardware, where_, c.op),
                         calibration=network.calibration_used(hardware, c.op, where_))
        out.append(Timed(c, where_, _priced(priced, seen, (c.axis, c.op), costs[c.axis, c.op], c.buffer_bytes),
                         **extra))
    for where_ in placements.values():
        where_.memo.clear()  # what the ops on a group shared while priced (the rows keep their times, not it)
    return out


def _priced(memo: dict, seen: list, key: tuple, cost, buffer_bytes):
    """cost.seconds(buffer_bytes), once per distinct array of sizes on one (axis, op): the rows of a
    step repeat them (forward and backward gathers of the same weights), and pricing an array with
    NCCL's tuner is the aggregator's costliest part. Numbers and formulas are priced directly."""
    if type(buffer_bytes).__module__ != "numpy" or getattr(buffer_bytes, "ndim", 0) == 0:
        return cost.seconds(buffer_bytes)
    buffer_bytes = _first_equal(seen, buffer_bytes)
    hit = memo.get((*key, id(buffer_bytes)))  # ``seen`` holds the buffer: its id is not reused meanwhile
    if hit is None:
        import numpy as np

        hit = cost.seconds(buffer_bytes)
        empty = buffer_bytes == 0
        if empty.any():  # an empty buffer is no call: the single-layout path drops such rows (no latency either)
            hit = np.where(empty, 0.0, hit)
        memo[(*key, id(buffer_bytes))] = hit
    return hit


def _first_equal(seen: list, array):
    """The first array of ``seen`` equal to ``array`` (the same sizes computed twice, for two rows), else
    ``array``, now seen: equal buffers become one object, which pricing then recognises by identity
    (cost/nccl.py indexes a buffer's sizes once for all the ops on a group). A few elements rule most out."""
    for other in seen:
        if other is array or (other.shape == array.shape and other.dtype == array.dtype
                              and (other.flat[:16] == array.flat[:16]).all() and (other == array).all()):
            return other
    seen.append(array)
    return array


def axis_family(axis: str) -> str:
    """tp (and expert TP), cp, pp, ep, or data (dp, fsdp and dp x fsdp, and the routed experts' expert-dp,
    expert-fsdp, expert-data)."""
    if axis in ("etp", *SUBGROUPS):
        return SUBGROUPS.get(axis, "tp")
    return "data" if axis in ("dp", "fsdp", "data", *expert.EXPERT_AXES.values()) else axis


__all__ = ["StageRole", "Timed", "axis_family", "busiest_stage", "stage_collectives", "step_collectives", "timed"]
