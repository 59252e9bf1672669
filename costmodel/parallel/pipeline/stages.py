"""Pipeline stages: how many layers a stage holds, its role (first, last), micro-batches in flight.

A single layout can look at every stage. An array of layouts (or a formula) looks at a few, which
together always contain the heaviest: the first (most layers, most micro-batches in flight, the
embeddings), the second (the heaviest of the middle stages: most layers and in flight among them,
and unlike the first it saves its first layer's weight copy) and the last (the output layer). A mixture
of experts whose first L_d layers are dense adds the middle stages up to the L_d-th: the first stage of
only expert layers, heavier than the dense ones before it, starts at one of them (each holds a layer).
"""

from __future__ import annotations

from costmodel.formulas import pipeline as pl
from costmodel.mathops import above_one, ceil_div, equals, floor_div, indicator, minimum, remainder, where
from costmodel.record import record


@record
class StageRole:
    """Which stage: ``index`` 0, 1, ... or None for the last (p - 1); ``first``/``last`` are 0/1
    masks (numbers, arrays or expressions), ``exists`` masks a stage a layout does not have."""

    index: int | None
    first: object
    last: object
    exists: object = True


def every_stage(pp: int) -> list[StageRole]:
    """Every stage of a single layout with ``pp`` (an int) stages."""
    return [StageRole(i, int(i == 0), int(i == pp - 1)) for i in range(pp)]


def representative_stages(pp, dense_layers=0, split: str = "even") -> list[StageRole]:
    """Stages that contain the heaviest: all of them for an int pp, else the first, the middle ones from
    the second to the ``dense_layers``-th (a whole number; else only the second) and the last. Under the ``ends``
    split a stage may start a layer earlier than its index (the first holds the embedding's slot: at p = L + 2 it
    holds no layer), so the first expert layer can sit on stage L_d + 1: one middle stage more."""
    if isinstance(pp, int):
        return every_stage(pp)
    single = indicator(equals(pp, 1))  # a letter p is above 1: no stage is both first and last
    if isinstance(dense_layers, int):
        middles = range(1, max(1, dense_layers + (1 if split == "ends" and dense_layers else 0)) + 1)
    else:  # a letter L_d: the second stage stands for the middle ones
        middles = range(1, 2)
    return [StageRole(0, 1, single),
            *(StageRole(i, 0, indicator(equals(pp, i + 1)), exists=pp > i if i > 1 else above_one(pp))
              for i in middles),
            StageRole(None, single, 1)]


def stage_layers(layers, pp, role: StageRole, split: str = "even", costs=None):
    """Layers on a stage (checks reject p > L).

    ``even``: L // p each, the first L % p stages one more (Megatron's uniform split).
    ``ends``: even over L + 2, the embedding and the loss counting as a layer each on the first and the last stage
    (Megatron-core's account_for_embedding_in_pipeline_split and account_for_loss_in_pipeline_split,
    transformer_block.get_num_layers_to_build adds one layer for each; NeMo's Llama 3.1 405B recipe sets both).
    Megatron-core wants L + 2 to divide over p (and the chunks); cost4d spreads a remainder as ``even`` does.
    ``compute``: balanced by compute, ``costs`` = (c, c_o), the cost of a layer and of the output
    layer (:func:`~costmodel.formulas.pipeline.balanced_stage_end`); the first stages take more layers
    because the last also runs the output layer. Arrays and formulas see stage 1 as the middle one.
    """
    if split == "compute":
        def end(i):
            return pl.balanced_stage_end(stage=i, stages=pp, layers=layers, layer_cost=costs[0], output_cost=costs[1])
        if role.index == 0:
            return end(0)
        if role.index is None:
            return layers - where(above_one(pp), end(pp - 2), 0)
        return end(role.index) - end(role.index - 1)
    if split == "ends":
        return _even(slots(layers, split), pp, role) - role.first - role.last
    return _even(layers, pp, role)


def slots(layers, split: str = "even"):
    """What the stages split: the layers, and under ``ends`` the embedding's and the loss's slot too (L + 2)."""
    return layers + 2 if split == "ends" else layers


def whole_chunks(layers, split, pp, chunks=1):
    """Whether the layers (:func:`slots`: L + 2 under ``ends``) divide over ``pp`` stages of ``chunks`` model chunks
    each: what Megatron-core asserts (transformer_block.get_num_layers_to_build) and any interleaved schedule
    needs. Numbers or arrays."""
    return slots(layers, split) % (pp * chunks) == 0


def _even(slots, pp, role: StageRole):
    """Megatron's uniform split of ``slots`` over p stages: the first slots % p take one more."""
    if role.index == 0:
        return ceil_div(slots, pp)
    if role.index is None:
        return floor_div(slots, pp)
    return floor_div(slots, pp) + indicator(role.index < remainder(slots, pp))


def stage_start(layers, pp, role: StageRole, split: str = "even", costs=None):
    """Index of a stage's first layer: the layers on the stages before it (the last: L less its own)."""
    if role.index == 0:
        return 0
    if role.index is None:
        return layers - stage_layers(layers, pp, role, split, costs)
    if split == "compute":
        return pl.balanced_stage_end(stage=role.index - 1, stages=pp, layers=layers, layer_cost=costs[0],
                                     output_cost=costs[1])
    if split == "ends":  # the slots before it, less the embedding's
        return _even_start(slots(layers, split), pp, role) - 1
    return _even_start(layers, pp, role)


def _even_start(slots, pp, role: StageRole):
    """Slots on the stages before a middle one under Megatron's uniform split (:func:`_even`)."""
    return role.index * floor_div(slots, pp) + minimum(role.index, remainder(slots, pp))


def output_in_flight(point, role: StageRole):
    """Micro-batches' worth of the output layer's saved tensors (and the loss's) the last stage holds at its peak:
    under interleaved 1F1B one, as each forward of the last model chunk runs straight into its backward on the last
    rank (Megatron-LM core/pipeline_parallel/schedules.py, forward_backward_pipelining_with_interleaving: its warm-up
    of (v - 1) p forwards holds only earlier chunks); under the other schedules the stage's :func:`in_flight`."""
    return 1 if point.schedule == "interleaved" else in_flight(point, role)


def in_flight(point, role: StageRole):
    """Micro-batches' worth of activations the stage holds at its peak.

    GPipe holds all m; 1F1B and ZB-H1 min(p - i, m) (Narayanan et al. 2021, Sec. 2.2.1); interleaved
    1F1B Megatron's warm-up count in chunks (:func:`costmodel.formulas.pipeline.interleaved_in_flight`:
    Korthikanti's p (1 + (p - 1)/(p v)) on stage 0 when m >= 2p). With one stage, one micro-batch at a
    time (the rest is gradient accumulation).
    """
    index = point.pp - 1 if role.index is None else role.index
    if point.schedule == "interleaved":
        count = pl.interleaved_in_flight(stage=index, stages=point.pp, microbatches=point.microbatches,
                                         chunks=point.chunks)
    else:
        count = pl.microbatches_in_flight(stage=index, stages=point.pp, microbatches=point.microbatches,
                                          schedule=point.schedule)
    return where(above_one(point.pp), count, 1)
