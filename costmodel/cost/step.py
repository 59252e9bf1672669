"""Predicted time of one training step: matmuls, memory-bound ops, communication, pipeline bubble.

T = (T_matmul + T_elementwise + T_TP + T_CP + T_p2p) / (1 - bubble) + exposed data-axis comm, where
TP/CP/p2p traffic sits on the critical path (not overlapped, as in Megatron-LM 2022) and DDP/FSDP
traffic overlaps with backward compute unless overlap is 'none'. Collective times come from the
one time model (:func:`costmodel.cost.network.collective_seconds`), calibrated where the spec is.
"""

from __future__ import annotations

from dataclasses import dataclass

from costmodel.cost.collectives import Timed, axis_family
from costmodel.cost.flops import StepFlops
from costmodel.errors import CostModelError
from costmodel.inputs.files import shown
from costmodel.formulas import step as fs
from costmodel.mathops import ceil_div, exact_div, family
from costmodel.parallel import pipeline

OVERLAPS = ("overlap", "none")


@dataclass(frozen=True)
class StepTime:
    matmul_s: object
    elementwise_s: object
    tp_s: object
    cp_s: object
    p2p_s: object
    data_comm_s: object
    data_exposed_s: object
    bubble: object
    step_s: object
    global_tokens: object
    model_flops: object  # whole step, all devices
    hardware_flops: object
    devices: object
    peak_flops: float
    matmul_efficiency: object
    overlap: str = "overlap"

    @property
    def tokens_per_s(self):
        return self.global_tokens / self.step_s

    @property
    def mfu(self):
        """Model FLOPs utilisation: model FLOPs / (step time x devices x dense peak)."""
        return fs.utilisation(flops=self.model_flops, seconds=self.step_s, devices=self.devices,
                              peak_flops=self.peak_flops)

    @property
    def hfu(self):
        """Hardware FLOPs utilisation: model + recomputed FLOPs over the same."""
        return fs.utilisation(flops=self.hardware_flops, seconds=self.step_s, devices=self.devices,
                              peak_flops=self.peak_flops)

    @property
    def parts(self) -> dict:
        return {"matmul_s": self.matmul_s, "elementwise_s": self.elementwise_s, "tp_s": self.tp_s,
                "cp_s": self.cp_s, "p2p_s": self.p2p_s, "data_comm_s": self.data_comm_s,
                "data_exposed_s": self.data_exposed_s}


def matmul_efficiency(shape, point, hardware):
    """Achieved / dense peak of the step's matmuls: the measured table's figure for the MLP's first
    matmul shape (tokens of a micro-batch x F/t x D), else the spec's constant, times the fraction a
    whole step sustains (``sustained_fraction``). In a formula it is the letter e_mm (its value comes
    from the table at the layout)."""
    isolated = _isolated_efficiency(shape, point, hardware)
    sustained = hardware.step_model.sustained_fraction
    if sustained == 1 or family(isolated) == "sympy":  # the letter e_mm stands for the product
        return isolated
    return isolated * sustained


def _isolated_efficiency(shape, point, hardware):
    sm = hardware.step_model
    if sm is None:
        raise CostModelError(f"{hardware.name} has no step_model section (matmul efficiency, elementwise passes)")
    if sm.matmul_table:
        m, n = exact_div(point.tokens, point.cp), exact_div(shape.mlp_width, point.tp)
        if family(m, n) == "sympy":
            import sympy

            return sympy.Symbol("e_mm", positive=True)
        from costmodel.measure.matmul import table_efficiency
        from costmodel.specs.load import table_file

        return table_efficiency(table_file(hardware, sm.matmul_table), m, n, shape.width, hardware.flops("bf16"))
    if sm.matmul_efficiency is None:
        raise CostModelError(f"{hardware.name}: step_model needs matmul_efficiency or matmul_table")
    return sm.matmul_efficiency


def step_time(shape, recipe, point, hardware, flops: StepFlops, timed: list[Timed],
              overlap: str = "overlap") -> StepTime:
    """One optimizer step of ``point`` on ``hardware``, from its FLOPs and timed collectives."""
    if overlap not in OVERLAPS:
        raise CostModelError(f"--overlap {shown(overlap)}: use overlap or none")
    peak = hardware.flops("bf16")
    global_tokens = point.tokens * point.micro_steps * point.data
    devices = point.devices
    efficiency = matmul_efficiency(shape, point, hardware)
    hw_flops = flops.hardware_per_token * global_tokens
    matmul = fs.matmul_seconds(flops=hw_flops / devices, peak_flops=peak, efficiency=efficiency)
    heads, seq = (shape.heads, shape.seq_len) if shape.attention else (0, 0)
    width = shape.width if shape.attention else shape.width + shape.mlp_width
    elementwise = fs.elementwise_seconds(
        tokens=exact_div(point.tokens, point.cp) * point.micro_steps, layers=ceil_div(shape.layers, point.pp),
        hidden=width, heads=heads, seq_len=seq, act_bytes=recipe.activation_bytes,
        passes=hardware.step_model.elementwise_passes, tp=point.tp, hbm_bandwidth=hardware.hbm.bandwidth_bytes_per_s,
        flash=point.flash)
    by_axis = {"tp": 0, "cp": 0, "pp": 0, "data": 0}
    for row in timed:
        family_ = axis_family(row.collective.axis)
        by_axis[family_] = by_axis[family_] + row.seconds
    bubble = pipeline.bubble(point)
    critical = matmul + elementwise + by_axis["tp"] + by_axis["cp"] + by_axis["pp"]
    backward_compute = (matmul + elementwise) * 2 / 3  # backward is 2 of the 3 matmul passes
    exposed = fs.exposed_seconds(comm=by_axis["data"], hidden_behind=backward_compute, overlap=overlap)
    step = fs.pipelined_seconds(critical=critical, bubble=bubble) + exposed
    return StepTime(matmul, elementwise, by_axis["tp"], by_axis["cp"], by_axis["pp"], by_axis["data"], exposed,
                    bubble, step, global_tokens, flops.per_token * global_tokens, hw_flops, devices, peak, efficiency,
                    overlap)
