"""The results document as a pydantic model: every field a reader uses is checked before use.

Measured times must be positive and finite, sizes whole and bounded, the environment consistent
(nodes x GPUs per node = world size), each run's collective and algorithm known. Fields a reader
does not use (library versions, argv, hosts) may be anything that JSON holds.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from costmodel.inputs import bounds
from costmodel.measure.results import FORMAT, canonical_algorithm, canonical_collective
from costmodel.specs.base import Checked, Name, count

Devices = count(bounds.DEVICES)
Rate = Annotated[float, Field(ge=0, le=bounds.RATE)]


class Record(Checked):
    """A part of a results file: checked like a spec, but fields cost4d does not read are kept."""

    model_config = Checked.model_config | {"extra": "allow"}  # strict like a spec: true is not 1, "0.5" not 0.5


class Row(Record):
    bytes: Annotated[int, Field(ge=0, le=bounds.MESSAGE)]
    placement: Literal["out-of-place", "in-place"] = "out-of-place"
    time_s: Annotated[float, Field(ge=bounds.MEASURED[0], le=bounds.MEASURED[1])]
    count: Annotated[int, Field(ge=0, le=bounds.MESSAGE)] | None = None
    dtype: Name | None = None
    algbw_bytes_per_s: Rate | None = None
    busbw_bytes_per_s: Rate | None = None


class Environment(Record):
    world_size: Devices
    nodes: Devices
    gpus_per_node: Devices
    gpus_per_thread: Devices | None = None  # nccl-tests -g: one thread launches this many GPUs' kernels

    @model_validator(mode="after")
    def _consistent(self) -> "Environment":
        if self.nodes * self.gpus_per_node != self.world_size:
            raise ValueError(f"nodes x gpus_per_node = {self.nodes} x {self.gpus_per_node} is not world_size "
                             f"{self.world_size}")
        return self


class Run(Record):
    collective: Name
    algorithm: Name = "auto"
    rows: list[Row] = Field(min_length=1)
    environment: Environment | None = None
    nccl: Name | None = None  # the NCCL release its log states (logs imported together keep their own)

    @field_validator("collective")
    @classmethod
    def _collective(cls, value: str) -> str:
        return canonical_collective(value)

    @field_validator("algorithm")
    @classmethod
    def _algorithm(cls, value: str) -> str:
        return canonical_algorithm(value)


class Results(Record):
    format: Literal[FORMAT]
    source: dict[str, Any] = Field(default_factory=dict)
    environment: Environment
    runs: list[Run] = Field(min_length=1)
    status: Name | None = None
