"""Units at the edges: dtype sizes, byte prefixes (GB = 1e9, GiB = 2**30) and parsing of sizes.

Everything inside the package is bytes, FLOP, seconds, B/s and FLOP/s; this module is where
those become "3517.6 GB" or "3276.0 GiB", always naming which.
"""

from __future__ import annotations

from enum import Enum

from costmodel.errors import CostModelError
from costmodel.inputs.files import shown

#: bytes per element of each training dtype ("none" = the state is not kept).
DTYPE_BYTES: dict[str, int] = {
    "fp64": 8,
    "fp32": 4,
    "tf32": 4,  # stored in 4 bytes; only the multiply is reduced precision
    "bf16": 2,
    "fp16": 2,
    "fp8": 1,
    "int8": 1,
    "none": 0,
}


class UnitSystem(str, Enum):
    """How byte counts are printed: SI (GB = 1e9 B, the vendors' and ZeRO's unit) or IEC (GiB = 2**30 B)."""

    si = "si"
    iec = "iec"


_SI = [("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)]
_IEC = [("TiB", 2.0**40), ("GiB", 2.0**30), ("MiB", 2.0**20), ("KiB", 2.0**10)]
_ALL = {name.lower(): size for name, size in _SI + _IEC} | {"b": 1, "kb": 1e3}


def dtype_bytes(dtype: str) -> int:
    """Bytes per element of ``dtype`` (a key of :data:`DTYPE_BYTES`)."""
    try:
        return DTYPE_BYTES[dtype]
    except KeyError:
        raise CostModelError(f"unknown dtype {shown(dtype)}; known: {', '.join(DTYPE_BYTES)}") from None


def unit_bytes(unit: str) -> float:
    """Bytes in one ``unit`` ("GB", "GiB", ...)."""
    try:
        return _ALL[unit.lower()]
    except KeyError:
        known = ", ".join(n for n, _ in _SI + _IEC)
        raise CostModelError(f"unknown unit {shown(unit)}; use one of {known}") from None


def format_bytes(value: float, units: UnitSystem = UnitSystem.si, digits: int = 1) -> str:
    """``value`` bytes as e.g. '3517.6 GB' (SI) or '3276.0 GiB' (IEC), picking the largest prefix <= value."""
    table = _SI if units == UnitSystem.si else _IEC
    for name, size in table:
        if abs(value) >= size:
            return f"{value / size:,.{digits}f} {name}"
    return f"{value:,.0f} B"


def in_unit(value: float, units: UnitSystem) -> tuple[float, str]:
    """``value`` bytes in GB or GiB (fixed prefix, for columns that must line up)."""
    return (value / 1e9, "GB") if units == UnitSystem.si else (value / 2.0**30, "GiB")
