"""Activation bytes a device keeps, per token of one micro-batch: per layer, by recompute policy,
and per pipeline stage (layers on the stage, micro-batches in flight, the output layer's extras)."""

from __future__ import annotations

from costmodel.formulas import activations as ac
from costmodel.formulas import memory as mem
from costmodel.formulas import pipeline as pl
from costmodel.specs.layout import Layout
from costmodel.specs.model import FFNStack


def _layer_parts(model, act_bytes: int, layout: Layout) -> tuple:
    """(outside-TP, inside-TP, attention-core) bytes per token of one transformer layer."""
    stats = (4 if model.norm == "rmsnorm" else 8) if layout.norm_stats else 0  # fp32 rstd (and mean)
    outside = ac.outside_tp_bytes_per_token(hidden=model.hidden, act_bytes=act_bytes, dropout=model.dropout,
                                            norm_stat_bytes=stats)
    inside = ac.inside_tp_bytes_per_token(
        hidden=model.hidden, ffn_hidden=model.ffn_hidden, heads=model.heads, kv_heads=model.kv_heads,
        head_dim=model.dim_per_head, act_bytes=act_bytes, gated=model.mlp == "swiglu")
    core = ac.attention_core_bytes_per_token(
        heads=model.heads, head_dim=model.dim_per_head, seq_len=model.seq_len, act_bytes=act_bytes,
        dropout=model.dropout, flash=layout.flash)
    return outside, inside, core


def full_layer_bytes_per_token(model, act_bytes: int, layout: Layout, autocast: bool = True) -> float:
    """One layer keeping everything (selective applied if asked), per token."""
    if isinstance(model, FFNStack):
        return act_bytes * mem.ffn_activation_elements_per_token(
            d_model=model.d_model, d_ff=model.d_ff, layers=1, gated=model.gated,
            activation=model.activation, tp=layout.tp, sp=layout.sp)
    outside, inside, core = _layer_parts(model, act_bytes, layout)
    policy = "selective" if layout.recompute == "selective" else "none"
    return ac.layer_activation_bytes_per_token(outside=outside, inside=inside, core=core, tp=layout.tp,
                                               sp=layout.sp, policy=policy)


def input_bytes_per_token(model, act_bytes: int, layout: Layout) -> float:
    """A fully recomputed layer keeps its input only (split over t with SP)."""
    width = model.d_model if isinstance(model, FFNStack) else model.hidden
    return ac.layer_input_bytes_per_token(hidden=width, act_bytes=act_bytes) / (layout.tp if layout.sp else 1)


def recomputed_layers(layers: int, layout: Layout) -> int:
    """Layers whose activations are recomputed: none, all ('full') or every k-th ('every')."""
    if layout.recompute == "full":
        return layers
    if layout.recompute == "every":
        return -(-layers // layout.recompute_layers)
    return 0


def stage_bytes_per_token(model, act_bytes: int, layout: Layout, layers: int, first: bool, last: bool,
                          autocast: bool = True) -> float:
    """Bytes per micro-batch token a stage with ``layers`` layers keeps for one micro-batch."""
    kept = full_layer_bytes_per_token(model, act_bytes, layout)
    again = recomputed_layers(layers, layout)
    total = (layers - again) * kept + again * input_bytes_per_token(model, act_bytes, layout)
    if isinstance(model, FFNStack):
        if autocast and first:  # the stack's fp32 input is cast once per matmul that reads it
            total += act_bytes * mem.autocast_input_cast_elements_per_token(d_model=model.d_model, gated=model.gated)
        return total
    if last:
        total += ac.output_layer_bytes_per_token(hidden=model.hidden, vocab=model.vocab, act_bytes=act_bytes,
                                                 tp=layout.tp)
    return total


def in_flight(layout: Layout, stage: int) -> float:
    """Micro-batches' worth of activations stage ``stage`` holds (interleaving included on stage 0)."""
    if layout.pp == 1:
        return 1
    count = pl.microbatches_in_flight(stage=stage, stages=layout.pp, microbatches=layout.m,
                                      schedule=layout.schedule)
    if layout.schedule == "interleaved" and stage == 0:
        count *= pl.interleave_factor(stages=layout.pp, chunks=layout.chunks)
    return count
