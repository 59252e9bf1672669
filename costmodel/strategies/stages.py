"""Pipeline stages: how layers split over p stages and what parameters each stage holds."""

from __future__ import annotations

from costmodel.formulas import params as pa
from costmodel.specs.layout import Layout
from costmodel.specs.model import FFNStack
from costmodel.strategies import model as mq


def stage_layer_counts(layers: int, stages: int) -> list[int]:
    """L split over p stages: L // p each, the first L % p stages one more (uneven splits allowed;
    checks.check_layout rejects p > L)."""
    base, extra = divmod(layers, stages)
    return [base + (1 if i < extra else 0) for i in range(stages)]


def stage_params(model, layers: int, first: bool, last: bool, stages: int) -> int:
    """Parameters on one stage: its blocks, the embeddings on the first, norm and output on the last.

    With tied embeddings and p > 1 the last stage keeps its own copy of the embedding matrix for
    the logits (Megatron's shared embedding, kept in sync by an all-reduce).
    """
    blocks = layers * mq.block_params(model)
    if isinstance(model, FFNStack):
        return blocks
    parts = mq.param_parts(model)
    total = blocks
    if first:
        total += parts.get("embedding", 0) + parts.get("position", 0)
    if last:
        total += pa.norm_params(hidden=model.hidden, with_bias=model.norm == "layernorm") + parts.get("output", 0)
        if model.tied_embeddings and stages > 1:
            total += parts["embedding"]
    return total


def tp_replicated_params(model, layers: int, first: bool, last: bool) -> int:
    """Parameters every TP rank keeps whole: norms, row-parallel biases, learned positions."""
    if isinstance(model, FFNStack):
        return 0
    norm = pa.norm_params(hidden=model.hidden, with_bias=model.norm == "layernorm")
    per_layer = 2 * norm + (2 * model.hidden if model.bias else 0)  # attention-out and MLP-out biases
    parts = mq.param_parts(model)
    return (layers * per_layer + (parts.get("position", 0) if first else 0) + (norm if last else 0))


def block_params_per_device(model, layout: Layout, stage: int) -> int:
    """The stage's blocks on one TP rank (the rest of the stage is its root: embeddings, norm, output)."""
    layers = stage_layer_counts(model.layers, layout.pp)[stage]
    whole = layers * mq.block_params(model)
    replicated = tp_replicated_params(model, layers, False, False)
    return (whole - replicated) // layout.tp + replicated


def stage_params_per_device(model, layout: Layout, stage: int) -> int:
    """A stage's parameters on one TP rank: the split ones / t plus the replicated ones."""
    counts = stage_layer_counts(model.layers, layout.pp)
    first, last = stage == 0, stage == layout.pp - 1
    whole = stage_params(model, counts[stage], first, last, layout.pp)
    replicated = tp_replicated_params(model, counts[stage], first, last)
    return (whole - replicated) // layout.tp + replicated
