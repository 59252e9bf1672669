"""How a per-device total compares with a device's HBM, under each reading of its capacity."""

from __future__ import annotations

import math

from costmodel.record import record


@record
class Reading:
    """The unsharded state against one reading of a device's HBM capacity."""

    convention: str  # si | nominal | usable
    label: str
    capacity_bytes: float
    ratio: float  # state / capacity
    devices: int  # ceil(ratio)


def devices_worth(state_bytes: float, hardware) -> list[Reading]:
    """How many devices' HBM the unsharded state fills, under each reading of the capacity.

    The vendor's "80GB" is read two ways in the wild: 80e9 bytes (SI), as the CS336 solution
    does, and 80 GiB, the HBM the card actually carries. Both are given, each named.
    """
    hbm = hardware.hbm
    readings = []
    if hbm.marketed_gb:
        readings.append(("si", f"{hbm.marketed_gb:g} GB = {hbm.marketed_gb:g}e9 B", hbm.marketed_gb * 1e9))
    readings.append(("nominal", f"{hbm.capacity_bytes / 2**30:,.1f} GiB = {hbm.capacity_bytes:,} B",
                     hbm.capacity_bytes))
    if hbm.usable_bytes:
        readings.append(("usable", f"usable {hbm.usable_bytes / 2**20:,.0f} MiB", hbm.usable_bytes))
    return [Reading(key, label, cap, state_bytes / cap, math.ceil(state_bytes / cap)) for key, label, cap in readings]


def capacity_bytes(hardware) -> int:
    """What a process can use: the usable figure where the spec gives one, else the nominal capacity."""
    return hardware.hbm.usable_bytes or hardware.hbm.capacity_bytes
