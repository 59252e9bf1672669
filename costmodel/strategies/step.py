"""Predicted time of one training step: matmuls, memory-bound ops, communication, pipeline bubble.

T = (T_matmul + T_elementwise + T_TP + T_CP + T_p2p) / (1 - bubble) + exposed data-axis comm, where
TP/CP/p2p traffic sits on the critical path (not overlapped, as in Megatron-LM 2022) and DDP/FSDP
traffic overlaps with backward compute unless --overlap none. Collective times are bandwidth-bound
(bytes sent / link bandwidth), as in `cost4d comm`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from costmodel.errors import CostModelError
from costmodel.formulas import pipeline as pl
from costmodel.formulas import step as fs
from costmodel.specs.layout import Layout
from costmodel.specs.load import hardware_dir
from costmodel.specs.recipe import Recipe
from costmodel.strategies.comm import timed_collectives
from costmodel.strategies.flops import step_flops
from costmodel.strategies.stages import stage_layer_counts


@dataclass(frozen=True)
class StepBreakdown:
    matmul_s: float
    elementwise_s: float
    tp_s: float
    cp_s: float
    p2p_s: float
    data_comm_s: float
    data_exposed_s: float
    bubble: float
    step_s: float
    global_tokens: int
    model_flops: float  # whole step, all devices
    hardware_flops: float
    devices: int
    peak_flops: float
    matmul_efficiency: float

    @property
    def tokens_per_s(self) -> float:
        return self.global_tokens / self.step_s

    @property
    def mfu(self) -> float:
        return self.model_flops / (self.step_s * self.devices * self.peak_flops)

    @property
    def hfu(self) -> float:
        return self.hardware_flops / (self.step_s * self.devices * self.peak_flops)


def matmul_efficiency(model, layout: Layout, hardware) -> float:
    """The step model's matmul efficiency: from the measured table for the MLP's first matmul shape
    (tokens of a micro-batch x F/t x h), else the spec's constant."""
    sm = hardware.step_model
    if sm is None:
        raise CostModelError(f"{hardware.name} has no step_model section (matmul efficiency, elementwise passes)")
    if sm.matmul_table:
        width, ffn = (model.d_model, model.d_ff) if model.kind == "ffn" else (model.hidden, model.ffn_hidden)
        from costmodel.measure.matmul import table_efficiency

        return table_efficiency(hardware_dir() / Path(sm.matmul_table), layout.tokens // layout.cp,
                                ffn / layout.tp, width, hardware.flops("bf16"))
    if sm.matmul_efficiency is None:
        raise CostModelError(f"{hardware.name}: step_model needs matmul_efficiency or matmul_table")
    return sm.matmul_efficiency


def step_breakdown(model, recipe: Recipe, layout: Layout, hardware, overlap: str = "overlap") -> StepBreakdown:
    """Predict one optimizer step of ``layout`` on ``hardware``."""
    if overlap not in ("overlap", "none"):
        raise CostModelError(f"--overlap {overlap!r}: use overlap or none")
    if layout.tokens == 0:
        raise CostModelError("--tokens must be positive for a step time (micro-batch x sequence)")
    peak = hardware.flops("bf16")
    flops = step_flops(model, layout)
    micro_steps = layout.m * layout.grad_accum
    global_tokens = layout.tokens * micro_steps * layout.data
    devices = layout.devices
    efficiency = matmul_efficiency(model, layout, hardware)
    hw_flops = flops.hardware_per_token * global_tokens
    matmul = fs.matmul_seconds(flops=hw_flops / devices, peak_flops=peak, efficiency=efficiency)
    layers = max(stage_layer_counts(model.layers, layout.pp))
    wide, heads, seq = ((model.d_model + model.d_ff, 0, 0) if model.kind == "ffn" else
                        (model.hidden, model.heads, model.seq_len))
    elementwise = fs.elementwise_seconds(
        tokens=layout.tokens // layout.cp * micro_steps, layers=layers, hidden=wide, heads=heads, seq_len=seq,
        act_bytes=recipe.activation_bytes, passes=hardware.step_model.elementwise_passes, tp=layout.tp,
        hbm_bandwidth=hardware.hbm.bandwidth_bytes_per_s, flash=layout.flash)
    by_axis = {"tp": 0.0, "cp": 0.0, "pp": 0.0, "data": 0.0}
    for row in timed_collectives(model, recipe, layout, hardware):
        axis = row.collective.axis
        by_axis["data" if axis in ("dp", "fsdp", "data") else axis] += row.seconds
    bubble = pl.bubble_fraction(stages=layout.pp, microbatches=layout.m, chunks=layout.chunks,
                                schedule=layout.schedule)
    critical = matmul + elementwise + by_axis["tp"] + by_axis["cp"] + by_axis["pp"]
    backward_compute = (matmul + elementwise) * 2 / 3  # backward is 2 of the 3 matmul passes
    exposed = fs.exposed_seconds(comm=by_axis["data"], hidden_behind=backward_compute, overlap=overlap)
    step = fs.pipelined_seconds(critical=critical, bubble=bubble) + exposed
    return StepBreakdown(matmul, elementwise, by_axis["tp"], by_axis["cp"], by_axis["pp"], by_axis["data"],
                         exposed, bubble, step, global_tokens, flops.per_token * global_tokens, hw_flops,
                         devices, peak, efficiency)
