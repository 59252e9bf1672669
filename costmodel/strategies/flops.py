"""FLOPs of one step for a model and layout: per token, per step, per device."""

from __future__ import annotations

from dataclasses import dataclass

from costmodel.specs.layout import Layout
from costmodel.strategies import checks
from costmodel.strategies import model as mq


@dataclass(frozen=True)
class StepFlops:
    forward_per_token: float
    backward_per_token: float
    tokens: int  # tokens of one model replica's step
    devices_per_replica: int  # tp x pp x cp share one replica's work

    @property
    def per_token(self) -> float:
        return self.forward_per_token + self.backward_per_token

    @property
    def forward(self) -> float:
        return self.forward_per_token * self.tokens

    @property
    def backward(self) -> float:
        return self.backward_per_token * self.tokens

    @property
    def total(self) -> float:
        return self.per_token * self.tokens

    @property
    def per_device(self) -> float:
        """Even split of one replica's FLOPs over its tp x pp x cp devices."""
        return self.total / self.devices_per_replica


def step_flops(model, layout: Layout, seq_len: int | None = None) -> StepFlops:
    """Forward and backward FLOPs of one step over ``layout.tokens`` tokens per replica."""
    checks.check_layout(model, layout)
    return StepFlops(
        forward_per_token=mq.forward_flops_per_token(model, seq_len),
        backward_per_token=mq.backward_flops_per_token(model, seq_len),
        tokens=layout.tokens, devices_per_replica=layout.tp * layout.pp * layout.cp)
