"""One collective of a training step: what it moves, over which axis, how often."""

from __future__ import annotations

from dataclasses import dataclass

from costmodel.formulas.comms import BYTES_SENT


@dataclass(frozen=True)
class Collective:
    """``calls`` calls per step of ``op`` over ``group`` devices on ``axis``, each on a buffer of
    ``buffer_bytes`` (nccl-tests' S). Quantities may be numbers or sympy expressions."""

    op: str  # all-gather | reduce-scatter | all-reduce | all-to-all
    axis: str  # dp | fsdp | data | tp
    purpose: str
    phase: str  # forward | backward | optimizer
    group: object
    calls: object
    buffer_bytes: object

    @property
    def bytes_sent_per_call(self):
        """Bytes one device sends in one call (ring algorithm)."""
        return BYTES_SENT[self.op](buffer_bytes=self.buffer_bytes, group=self.group)

    @property
    def bytes_sent(self):
        """Bytes one device sends in this collective over the whole step."""
        return self.calls * self.bytes_sent_per_call
