"""The pipeline axis: L layers over p stages, micro-batches in flight, the bubble, stage-to-stage sends.

Stages: :mod:`.stages` (layers and role of a stage; the stages the aggregator must look at);
traffic: :func:`collectives`; rules: :func:`checks`.
"""

from __future__ import annotations

from costmodel.formulas.pipeline import bubble_fraction, p2p_bytes_per_microbatch
from costmodel.mathops import ceil_div, above_one, exact_div, indicator, where
from costmodel.parallel.collective import Collective, Rule, present, times_each
from costmodel.parallel.data.state import runs_autocast
from costmodel.parallel.pipeline.stages import (StageRole, in_flight, output_in_flight, representative_stages, slots,
                                                stage_layers, stage_start)

NAME = "pp"


def checks(shape, point) -> list[Rule]:
    """No more stages than layers (uneven splits are allowed: the first stages take one more), and at
    least one layer in every interleaved model chunk; under the ends split the embedding and the loss count as
    layers (Megatron-core builds a first or last chunk that holds only them)."""
    room = slots(shape.layers, point.split)
    what = f"{shape.layers} layers" + (" and its embedding and loss" if point.split == "ends" else "")
    return [Rule(point.pp <= room, lambda: f"--pp {point.pp} is more than the model's {what}"),
            Rule(point.pp * point.chunks <= room,
                 lambda: f"--pp {point.pp} x --chunks {point.chunks} = {point.pp * point.chunks} model chunks, "
                 f"more than the model's {what}")] + _compute_split_rules(shape, point)


def _compute_split_rules(shape, point) -> list[Rule]:
    """A compute-balanced split must leave every stage a block: the final norm and output layer sit on
    stage ceil(L c p / C) - 1 and the loss on the next, so ceil(L c p / C) >= p - 1 (C = L c + c_o).
    nanotron asserts otherwise (models/base.py L211-235 leaves the last ranks without a PipelineBlock)."""
    if point.split != "compute":
        return []
    layer, output = shape.split_costs()
    total = shape.layers * layer + output
    used = ceil_div(shape.layers * layer * point.pp, total) + 1  # stages that get a block
    return [Rule(used >= point.pp, lambda: f"--pp {point.pp} with --split compute leaves the last "
                 f"{point.pp - used} stage(s) without a layer, the output layer or the loss; use --pp <= {used}")]


def bubble(point):
    """Idle fraction of the step for the point's schedule (0 with one stage)."""
    return bubble_fraction(stages=point.pp, microbatches=point.microbatches, chunks=point.chunks,
                           schedule=point.schedule)


def p2p_bytes(shape, recipe, point):
    """Bytes a stage sends to the next per micro-batch (and the gradient back): b T h (/ t with SP), b the residual
    stream's dtype: the activations', or under torch.autocast the parameters' (autocast lowers matmuls, not the
    residual adds, so the stream a stage hands on stays fp32)."""
    residual = where(runs_autocast(recipe, point), recipe.master_bytes, recipe.activation_bytes)
    return p2p_bytes_per_microbatch(tokens=exact_div(point.tokens, point.cp), hidden=shape.width,
                                    act_bytes=residual, tp=point.tp, sp=point.sp)


def collectives(shape, recipe, point) -> list[Collective]:
    """A middle stage sends each micro-batch's activation on and its gradient back, v times with
    v interleaved chunks (Narayanan et al. 2021, arXiv:2104.04473, Sec. 2.2.2: interleaving
    multiplies p2p traffic by v); per step, grad_accum x m micro-batches."""
    if not present(point.pp):
        return []
    size = p2p_bytes(shape, recipe, point)
    sends = point.chunks * indicator(above_one(point.pp))  # a send has no (n - 1)/n to vanish at one stage
    return times_each((
        Collective("send/recv", "pp", "activations to the next stage", "forward", 2, sends, size),
        Collective("send/recv", "pp", "gradients to the previous stage", "backward", 2, sends, size)), point.micro_steps)


__all__ = ["NAME", "StageRole", "bubble", "checks", "collectives", "in_flight", "output_in_flight", "p2p_bytes",
           "representative_stages", "stage_layers", "stage_start"]
