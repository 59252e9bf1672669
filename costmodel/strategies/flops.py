"""FLOPs of one step for a model and layout: per token, per step, per device."""

from __future__ import annotations

from dataclasses import dataclass

from costmodel.formulas import flops as fl
from costmodel.specs.layout import Layout
from costmodel.strategies.activations import recomputed_layers
from costmodel.strategies import checks
from costmodel.strategies import model as mq


@dataclass(frozen=True)
class StepFlops:
    forward_per_token: float
    backward_per_token: float
    tokens: int  # tokens of one model replica's step
    devices_per_replica: int  # tp x pp x cp share one replica's work
    recompute_per_token: float = 0  # forward FLOPs run again in backward (HFU counts them, MFU not)

    @property
    def hardware_per_token(self) -> float:
        """What the hardware runs: model FLOPs + recomputation (HFU's numerator)."""
        return self.per_token + self.recompute_per_token

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


def recompute_flops_per_token(model, layout: Layout, seq_len: int | None = None):
    """Forward FLOPs recomputation adds per token: the recomputed layers' forward (full, every:K) or
    the attention core's Q K^T and A V (selective; Korthikanti et al. 2022, Sec. 5)."""
    layer = mq.layer_forward_flops_per_token(model, seq_len)
    if layout.recompute == "selective":
        if model.kind != "transformer":
            return 0
        return model.layers * fl.attention_score_flops_per_token(
            seq_len=seq_len or model.seq_len, heads=model.heads, head_dim=model.dim_per_head)
    return recomputed_layers(model.layers, layout) * layer


def step_flops(model, layout: Layout, seq_len: int | None = None) -> StepFlops:
    """Forward and backward FLOPs of one step over ``layout.tokens`` tokens per replica."""
    checks.check_layout(model, layout)
    return StepFlops(
        forward_per_token=mq.forward_flops_per_token(model, seq_len),
        backward_per_token=mq.backward_flops_per_token(model, seq_len),
        tokens=layout.tokens, devices_per_replica=layout.tp * layout.pp * layout.cp,
        recompute_per_token=recompute_flops_per_token(model, layout, seq_len))
