"""Parallel layout: the degree of each axis, ZeRO stage, tokens resident, and the axis mapping."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from costmodel.specs.base import Spec

Degree = Annotated[int, Field(ge=1)]


class Layout(Spec):
    """How one training step is spread over devices.

    The data axis is dp x fsdp: ``fsdp`` shards state at ZeRO stage ``zero`` (3 = FSDP), ``dp``
    replicates (plain DDP, or the replicate dimension of HSDP when both are > 1).
    """

    dp: Degree = Field(1, description="replicas on the data axis (DDP; HSDP replicas)")
    fsdp: Degree = Field(1, description="shards on the data axis (ZeRO / FSDP)")
    zero: Literal[0, 1, 2, 3] = Field(
        3, description="ZeRO stage on the fsdp axis: 1 optimizer, 2 + grads, 3 + weights (FSDP)")
    tp: Degree = Field(1, description="tensor-parallel degree (Megatron column/row split)")
    sp: bool = Field(False, description="sequence parallel inside the TP group")
    pp: Degree = Field(1, description="pipeline stages")
    cp: Degree = Field(1, description="context-parallel degree (sequence split across devices)")
    tokens: Annotated[int, Field(ge=0)] = Field(
        0, description="tokens one model replica holds at once: micro-batch x sequence (tokens)")
    shard_activations: Annotated[float, Field(ge=0, le=1)] = Field(
        0.0, description="fraction of saved activations sharded over the fsdp axis (XXL (b): 0.5)")
    reshard_after_forward: bool = Field(
        True, description="FSDP frees gathered weights after forward and gathers again in backward")
    mx: Degree = Field(1, description="M_X: torus axes the data axis spans (TPU)")
    my: Degree = Field(1, description="M_Y: torus axes the TP axis spans (TPU)")

    @model_validator(mode="after")
    def _check(self) -> "Layout":
        if self.sp and self.tp == 1:
            raise ValueError("sequence parallel (--sp) needs --tp > 1")
        if self.shard_activations and self.fsdp == 1:
            raise ValueError("--shard-activations shards over the fsdp axis: it needs --fsdp > 1")
        if self.cp > 1 and self.tokens % self.cp:
            raise ValueError(f"--cp {self.cp} does not divide --tokens {self.tokens}")
        return self

    @property
    def devices(self) -> int:
        """Devices in the mesh: dp x fsdp x tp x pp x cp."""
        return self.dp * self.fsdp * self.tp * self.pp * self.cp

    @property
    def data(self) -> int:
        """Degree of the whole data axis (X in the Scaling Book)."""
        return self.dp * self.fsdp

    @property
    def zero_stage(self) -> int:
        """The ZeRO stage in force (0 when there is nothing to shard over)."""
        return self.zero if self.fsdp > 1 else 0
