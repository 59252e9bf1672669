"""What every axis returns: the collectives it issues and the rules a layout must meet."""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

from costmodel.formulas.comms import BYTES_SENT
from costmodel.record import record

#: collectives over a group of adjacent ranks of an axis -> that axis (tp-kv: the TP ranks that hold copies of
#: one replicated KV head, parallel/tensor/collectives.py)
SUBGROUPS = {"tp-kv": "tp"}


@record
class Collective:
    """``calls`` calls per step of ``op`` over ``group`` devices on ``axis``, each on a buffer of
    ``buffer_bytes`` (nccl-tests' S). Quantities may be numbers, arrays or sympy expressions."""

    op: str  # all-gather | reduce-scatter | all-reduce | all-to-all | send/recv
    axis: str  # dp | fsdp | data (dp x fsdp) | tp | cp | pp: which network level it runs on
    purpose: str
    phase: str  # forward | backward | optimizer
    group: object
    calls: object
    buffer_bytes: object

    @property
    def key(self) -> tuple:
        """What identifies a row across evaluations (numbers, arrays, symbols)."""
        return (self.axis, self.op, self.purpose, self.phase)

    @property
    def bytes_sent_per_call(self):
        """Bytes one device sends in one call (ring algorithm; send/recv: the buffer)."""
        return BYTES_SENT[self.op](buffer_bytes=self.buffer_bytes, group=self.group)

    @property
    def bytes_sent(self):
        """Bytes one device sends in this collective over the whole step."""
        return self.calls * self.bytes_sent_per_call

    def times(self, factor) -> "Collective":
        """The same collective ``factor`` times as often (per micro-batch -> per step)."""
        return self if _literal(factor, 1) else replace(self, calls=self.calls * factor)


def times_each(collectives: list[Collective], factor) -> list[Collective]:
    """:meth:`Collective.times` of every row, one product per distinct call count: the rows of a layer
    share theirs (per micro-batch -> per step: arrays multiply once for all of them)."""
    if _literal(factor, 1):
        return list(collectives)
    products = {}  # id of a row's count -> its product (the rows hold the counts: no id is reused meanwhile)
    for c in collectives:
        if id(c.calls) not in products:
            products[id(c.calls)] = c.calls * factor
    return [replace(c, calls=products[id(c.calls)]) for c in collectives]


def rerun(collectives: list[Collective]) -> list[Collective]:
    """The forward rows of ``collectives`` again, in backward: what a recomputed forward sends (purpose
    "..., recomputed")."""
    return [replace(c, purpose=f"{c.purpose}, recomputed", phase="backward") for c in collectives
            if c.phase == "forward"]


def present(degree) -> bool:
    """Whether an axis's collectives are listed: always, unless its degree is the literal 1.

    An axis of degree 1 sends nothing (every ring factor (n - 1)/n is 0), so leaving it out of a
    single layout and keeping it (at zero) in an array of layouts gives the same totals.
    """
    return not _literal(degree, 1)


def listed(collectives: list[Collective]) -> list[Collective]:
    """Drop the rows whose call count is the literal 0 (a stage that does not issue them) or whose buffer is (no
    tokens: activations' collectives move nothing, and an empty buffer is no call; arrays price it at 0 s)."""
    return [c for c in collectives if not (_literal(c.calls, 0) or _literal(c.buffer_bytes, 0))]


def _literal(value, literal) -> bool:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value == literal
    if type(value).__module__.startswith("sympy"):
        return value.is_number and value == literal
    return False


@record
class Rule:
    """A condition a layout must meet (a bool, or a mask over layouts) and why, in one line."""

    ok: object
    message: Callable[[], str]
