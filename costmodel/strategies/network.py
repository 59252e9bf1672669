"""Which network level each logical axis runs on, and the egress bandwidth that gives it.

GPU: axes are placed innermost first (tp, cp, fsdp, dp, pp, the Megatron order); an axis whose
devices, together with the axes inside it, fit in the fastest level's domain (the NVLink node)
runs there; otherwise it crosses the scale-out level and runs at the NIC's bandwidth.
TPU: every axis runs on ICI at W_ici M, with M the torus axes it spans (M_X for the data axis,
M_Y for tp); a mesh larger than one ICI domain puts the outermost data axis on DCN.
"""

from __future__ import annotations

from dataclasses import dataclass

from costmodel.errors import CostModelError
from costmodel.specs.hardware import Hardware
from costmodel.specs.layout import Layout

AXIS_ORDER = ("tp", "cp", "fsdp", "dp", "pp")  # innermost first


@dataclass(frozen=True)
class AxisLink:
    """The level an axis runs on and the bandwidth one device sends at on it."""

    level: str
    bandwidth: float  # B/s egress per device on this axis
    note: str


def _degree(layout: Layout, axis: str) -> int:
    return {"tp": layout.tp, "cp": layout.cp, "fsdp": layout.fsdp, "dp": layout.dp,
            "pp": layout.pp}[axis]


def axis_link(hardware: Hardware, layout: Layout, axis: str) -> AxisLink:
    """Network level and egress bandwidth of one axis (``data`` = dp x fsdp as one group)."""
    if hardware.kind == "tpu":
        return _tpu_link(hardware, layout, axis)
    fast, slow = hardware.network[0], hardware.network[-1]
    stop = "dp" if axis == "data" else axis  # the data axis is fsdp and dp together
    span = 1  # devices in this axis's group together with the axes inside it
    for name in AXIS_ORDER:
        span *= _degree(layout, name)
        if name == stop:
            break
    if fast.domain_size is None or span <= fast.domain_size or len(hardware.network) == 1:
        return AxisLink(fast.name, fast.bandwidth_bytes_per_s, f"within one {fast.name} domain")
    return AxisLink(slow.name, slow.bandwidth_bytes_per_s,
                    f"{span} devices exceed the {fast.name} domain of {fast.domain_size}")


def _tpu_link(hardware: Hardware, layout: Layout, axis: str) -> AxisLink:
    ici = hardware.level("ici")
    if ici.domain_size and layout.devices > ici.domain_size and axis in ("dp", "data"):
        try:
            dcn = hardware.level("dcn")
        except ValueError:
            raise CostModelError(f"{layout.devices} chips exceed one {hardware.name} ICI domain "
                                 f"({ici.domain_size}) and the spec has no 'dcn' level") from None
        return AxisLink("dcn", dcn.bandwidth_bytes_per_s, "mesh larger than one ICI domain")
    m = layout.my if axis == "tp" else layout.mx if axis in ("dp", "fsdp", "data") else 1
    if ici.torus_axes and m > ici.torus_axes:
        raise CostModelError(f"an axis cannot span {m} torus axes: {hardware.name} has {ici.torus_axes}")
    return AxisLink("ici", ici.bandwidth_bytes_per_s * m, f"W_ici x M = {m} torus axes")
