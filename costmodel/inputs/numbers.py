"""The one place numbers typed by users are read: ASCII digits, finite, in range, with units.

Each factory returns a parser for a typer option (``typer.Option(parser=whole(1, DEVICES))``).
Parsers take the option's text, or its default unchanged, and raise ValueError with a message that
quotes the value and says what is allowed; the CLI prints it as one line and exits 2.
"""

from __future__ import annotations

import math
import numbers
import re

from costmodel.errors import CostModelError
from costmodel.inputs.files import shown

_WHOLE = re.compile(r"\+?[0-9]{1,19}")
_REAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]{1,4})?")
_SIZE = re.compile(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]{1,4})?)\s*([A-Za-z]*)\s*")


def _range(lo, hi) -> str:
    return f"from {lo:,} to {hi:,}" if isinstance(lo, int) else f"from {lo:g} to {hi:g}"


def whole(lo: int, hi: int):
    """Parser of a whole number in [lo, hi], written in ASCII digits ('1e3', '٣', '²' are refused)."""

    def parse(value) -> int:
        if isinstance(value, int) and not isinstance(value, bool):
            number = value
        else:
            text = str(value).strip()
            if not _WHOLE.fullmatch(text):
                raise ValueError(f"{shown(text)} is not a whole number {_range(lo, hi)} (digits 0-9 only)")
            number = int(text)
        if not lo <= number <= hi:
            raise ValueError(f"{number:,} is out of range: allowed {_range(lo, hi)}")
        return number

    return parse


def real(lo: float, hi: float, *, above: bool = False):
    """Parser of a finite decimal number in [lo, hi] (in (lo, hi] with ``above``); inf and nan are refused."""

    def parse(value) -> float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            number = float(value)
        else:
            text = str(value).strip()
            if not _REAL.fullmatch(text):
                raise ValueError(f"{shown(text)} is not a decimal number (e.g. 0.5 or 1.8e11)")
            number = float(text)
        if not math.isfinite(number) or not (lo < number if above else lo <= number) or number > hi:
            low = f"above {lo:g}" if above else f"from {lo:g}"
            raise ValueError(f"{shown(value)} is out of range: allowed {low} to {hi:g}")
        return number

    return parse


def size(text: str, *, flag: str, lo: float, hi: float, unit_required: bool) -> float:
    """'95GB' -> 95e9, '80GiB' -> 80 * 2**30; a plain number is bytes unless ``unit_required``."""
    from costmodel.units import unit_bytes

    match = _SIZE.fullmatch(text)
    if not match:
        raise CostModelError(f"{flag} {shown(text)}: not a size; write e.g. 95GB (1e9 B), 80GiB (2^30 B) "
                             "or 4096B")
    number, unit = match.groups()
    if not unit and unit_required:
        raise CostModelError(f"{flag} {shown(text)}: give a unit, e.g. {number}GB (1e9 B) or "
                             f"{number}GiB (2^30 B); B for bytes")
    try:
        value = float(number) * (unit_bytes(unit) if unit else 1)
    except CostModelError as err:
        raise CostModelError(f"{flag} {shown(text)}: {err}") from None
    if not (math.isfinite(value) and lo <= value <= hi):
        raise CostModelError(f"{flag} {shown(text)}: {value:g} B is out of range: allowed {lo:g} B to {hi:g} B")
    return value


def memory_limit(value, flag: str = "--limit") -> float:
    """A memory limit in bytes: text with a unit ('95GB', '80GiB') or a number of bytes."""
    from costmodel.inputs.bounds import MEMORY

    if isinstance(value, str):
        return size(value, flag=flag, lo=MEMORY[0], hi=MEMORY[1], unit_required=True)
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise CostModelError(f"{flag} {shown(value)}: give a size such as '95GB' or a number of bytes")
    number = float(value)
    if not (math.isfinite(number) and MEMORY[0] <= number <= MEMORY[1]):
        raise CostModelError(f"{flag} {value!r}: allowed {MEMORY[0]:g} B to {MEMORY[1]:g} B")
    return number
