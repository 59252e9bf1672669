"""The Python API's arguments, checked as the CLI checks its options: the same ranges, one CostModelError
that names the API's parameter (``gpus``, ``bandwidth``), never the CLI's flag (``--gpus``, ``--ici-bandwidth``).

The ranges are declared here once; the CLI's options build their parsers from them (cli/options.py, cli/plan.py).
"""

from __future__ import annotations

import difflib
import functools
import inspect
import math
import numbers
import re

from costmodel.errors import CostModelError
from costmodel.inputs import bounds
from costmodel.inputs.files import shown
from costmodel.inputs.numbers import real, whole

#: devices along one axis of a layout (--fsdp, --tp, ...; fsdp=, tp=)
DEGREE = (1, bounds.DEVICES)
#: torus axes one logical axis spans (M_X, M_Y; --mx, --my)
TORUS_AXES = (1, 8)
#: the planner's cluster, its global batch in tokens, its sequence length, how many layouts it returns
GPUS = (1, bounds.DEVICES)
GLOBAL_BATCH = (1, bounds.TOKENS)
SEQ = (1, bounds.SEQUENCE)
TOP = (1, 1000)
#: how many layouts the API returns: every feasible one if asked (a script ranks or plots them all)
TOP_RETURNED = (1, 10**9)
#: fraction of HBM the planner leaves free
HEADROOM = (0, 0.9)


def whole_number(name: str, value, lo: int, hi: int) -> int:
    """``value`` as an int in [lo, hi] (an int or numpy integer; a bool, float or string is refused)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise CostModelError(f"{name} = {shown(value)}: give a whole number from {lo:,} to {hi:,}")
    try:
        return whole(lo, hi)(int(value))
    except ValueError as err:
        raise CostModelError(f"{name} = {err}") from None


def real_number(name: str, value, lo: float, hi: float) -> float:
    """``value`` as a finite float in [lo, hi] (an int or float; a bool or string is refused)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise CostModelError(f"{name} = {shown(value)}: give a number from {lo:g} to {hi:g}")
    try:
        return real(lo, hi)(value if isinstance(value, (int, float)) else float(value))
    except ValueError as err:
        raise CostModelError(f"{name} = {err}") from None


def choice(name: str, value, allowed: tuple[str, ...]) -> str:
    """``value`` if it is one of ``allowed``."""
    if not isinstance(value, str) or value not in allowed:
        raise CostModelError(f"{name} = {shown(value)}: use {', '.join(allowed[:-1])} or {allowed[-1]}")
    return value


def torus_shape(name: str, value, most: int) -> tuple[int, ...]:
    """A TPU torus: a tuple or list of whole numbers of chips per axis, (4, 4, 4), or the CLI's text '4x4x4';
    at most ``most`` axes and :data:`bounds.DEVICES` chips."""
    if isinstance(value, str):
        if not re.fullmatch(r"\s*[0-9]{1,9}(\s*x\s*[0-9]{1,9})*\s*", value):
            raise CostModelError(f"{name} = {shown(value)}: give the torus shape as e.g. (4, 4, 4) or '4x4x4'")
        value = tuple(int(part) for part in value.split("x"))
    if not isinstance(value, (tuple, list)) or not value or any(
            isinstance(n, bool) or not isinstance(n, numbers.Integral) for n in value):
        raise CostModelError(f"{name} = {shown(value)}: give the torus shape as whole numbers of chips per axis, "
                             "e.g. (4, 4, 4) or '4x4x4'")
    shape = tuple(int(n) for n in value)
    if len(shape) > most:
        raise CostModelError(f"{name} = {shown(value)} has {len(shape)} axes; the torus has at most {most}")
    if any(n < 1 for n in shape) or math.prod(shape) > bounds.DEVICES:
        raise CostModelError(f"{name} = {shown(value)}: every axis needs 1 or more chips, "
                             f"{bounds.DEVICES:,} in all at most")
    return shape


def checked_names(*extra: str):
    """Decorator: a call naming an argument the function does not take (nor, through its ``**kwargs``, one of
    ``extra``), or leaving out one it needs, is one CostModelError naming it and the closest it takes, where
    Python would raise a TypeError."""

    def wrap(function):
        signature = inspect.signature(function)
        takes = [name for name, p in signature.parameters.items() if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)]
        takes += [name for name in extra if name not in takes]

        @functools.wraps(function)
        def checked(*args, **kwargs):
            for name in kwargs:
                if name not in takes:
                    close = difflib.get_close_matches(name, takes, n=1, cutoff=0.0)
                    raise CostModelError(f"{function.__name__}: no argument {shown(name)}; closest: {close[0]} "
                                         f"(all: {', '.join(takes)})")
            try:
                signature.bind(*args, **kwargs)
            except TypeError as err:
                raise CostModelError(f"{function.__name__}: {err}") from None
            return function(*args, **kwargs)

        return checked

    return wrap
