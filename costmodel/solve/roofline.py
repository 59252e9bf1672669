"""The step on a roofline: each part the step model times, placed by FLOPs per byte it moves.

A roofline bounds what a kernel achieves by min(C, I W): C the peak FLOP/s, W a bandwidth, I the
arithmetic intensity in FLOP per byte moved (Williams, Waterman and Patterson 2009, CACM 52(4):65-76);
the Scaling Book ("All About Rooflines") draws communication the same way, W an interconnect's.

Every part shares one numerator F, the step's matmul FLOPs per device (model + recomputed), so that the
heights compare. The matmuls sit at their GEMM's intensity; every other part at F over the bytes it
moves (the elementwise ops over HBM, an axis's collectives over its network level). The height of each
is F over its time in the step model (costmodel.cost.step): the lowest point is where the time goes,
and a part whose point lies above the step's own height F / T_step takes less of the step than the matmuls.
"""

from __future__ import annotations

from costmodel.cost.collectives import axis_family
from costmodel.cost.gemm import mlp_gemm_shape
from costmodel.formulas.flops import flash_attention_hbm_bytes_per_token, matmul_intensity
from costmodel.record import record

#: what each axis family's collectives are called on the figure
PARTS = {"tp": "TP collectives", "cp": "CP collectives", "pp": "pipeline sends", "ep": "EP all-to-alls",
         "data": "data-axis collectives"}


@record
class Mark:
    """One part of the step: its share of F, the bytes it moves over ``resource``, its time."""

    name: str
    resource: str  # HBM, or the network level(s) its traffic runs on
    flops: float  # F: the step's matmul FLOPs per device
    bytes: float  # moved over the resource per device per step
    seconds: float  # its time in the step model

    @property
    def intensity(self) -> float:
        """FLOP per byte."""
        return self.flops / self.bytes

    @property
    def flops_per_s(self) -> float:
        return self.flops / self.seconds


@record
class Roofline:
    """A step's kernels and collectives on a roofline: the peak, the bandwidth roofs, the marks."""

    peak_flops: float  # C at the step's precision (dense)
    precision: str
    roofs: dict  # name -> bandwidth (B/s): HBM, then each network level, fastest first
    marks: list[Mark]
    step_flops_per_s: float  # F / T_step


def roofline(cost, hardware) -> Roofline:
    """The parts of ``cost.step`` (a single layout, evaluated with ``hardware``) on the device's roofline.

    The matmuls' GEMM is the one whose measured efficiency the step model reads (cost.gemm.mlp_gemm_shape)."""
    st, shape, point = cost.step, cost.shape, cost.point
    flops = st.hardware_flops / st.devices
    rows, cols, depth = mlp_gemm_shape(shape, point)
    element = 1 if st.precision == "fp8" else cost.recipe.activation_bytes  # fp8 GEMMs read 1-byte operands
    intensity = matmul_intensity(rows=rows, cols=cols, depth=depth, element_bytes=element)
    hbm = hardware.hbm.bandwidth_bytes_per_s
    marks = [Mark("matmuls", "HBM", flops, flops / intensity, st.matmul_s)]
    if st.attention_s > 0:  # flash attention's kernels: their own part where the device has a table
        marks.append(Mark("flash attention", "HBM", flops, _attention_bytes(cost), st.attention_s))
    achieved = hbm * hardware.step_model.hbm_efficiency  # memory-bound parts: their time is their bytes over it
    if st.elementwise_s > 0:
        marks.append(Mark("elementwise ops", "HBM", flops, st.elementwise_s * achieved, st.elementwise_s))
    if st.optimizer_s > 0:
        marks.append(Mark("optimizer step", "HBM", flops, st.optimizer_s * achieved, st.optimizer_s))
    axes: dict[str, list] = {}
    for row in cost.collectives:
        axes.setdefault(axis_family(row.collective.axis), []).append(row)
    for family, rows in axes.items():
        sent, seconds = sum(r.collective.bytes_sent for r in rows), sum(r.seconds for r in rows)
        if sent > 0 and seconds > 0:
            levels = "+".join(dict.fromkeys(r.level for r in rows))
            marks.append(Mark(PARTS[family], levels, flops, sent, seconds))
    roofs = {"HBM": hbm, **{level.name: level.bandwidth_bytes_per_s for level in hardware.network}}
    return Roofline(st.peak_flops, st.precision, roofs, marks, flops / st.step_s)


def _attention_bytes(cost) -> float:
    """Flash attention's HBM traffic per device per step: per token and layer (a / t query heads on a TP rank,
    k / t KV heads but at least one), over an even share of the layers and the tokens one device runs."""
    st, shape, point = cost.step, cost.shape, cost.point
    per_token = flash_attention_hbm_bytes_per_token(heads=shape.heads / point.tp, kv_heads=max(shape.kv_heads / point.tp, 1),
                                                    head_dim=shape.head_dim, element_bytes=cost.recipe.activation_bytes,
                                                    rerun=cost.flops.attention_rerun)
    tokens = st.global_tokens / point.data / point.cp  # one device's tokens per step
    return per_token * shape.layers / point.pp * tokens

