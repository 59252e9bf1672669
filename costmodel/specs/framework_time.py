"""A framework's measured step time: the constants fitted on its runs, their spread, and its stalls."""

from typing import Annotated

from pydantic import model_validator

from costmodel.specs.base import HighError, LowError, Name, Spec, Text, field


class Stalls(Spec):
    """Of a framework's measured runs at one node count, with or without a pipeline, how many stalled: ran more
    than ``FrameworkTime.stall_ratio`` x the fitted prediction."""

    pipelined: bool
    nodes: Annotated[int, field(ge=1, le=2**20)]
    stalled: Annotated[int, field(ge=0, le=2**20)]
    runs: Annotated[int, field(ge=1, le=2**20)]


class FrameworkTime(Spec):
    """What a framework adds to the step time beyond the hardware's step model (kernels as fast as the
    recipes the hardware was fitted on, DDP traffic overlapped), fitted on the framework's measured runs.

    Per micro-batch, a pipeline stage takes max(kernel_factor x its GPU work, its layers x the host floor);
    the floor per layer is layer_floor_s for each node the TP group spans, plus pipeline_tp_rank_s per
    TP rank when the pipeline spans nodes. The data-axis traffic runs unoverlapped at data_factor x the
    collective model's time (``cost.step.host_floor``, ``formulas.step.framework_critical_seconds``)."""

    hardware: Name = field(description="the device its runs were measured on: the time applies there only")
    kernel_factor: Annotated[float, field(ge=0.5, le=10)] = field(
        description="each micro-batch's critical path (its kernels and the TP, CP, EP and pipeline traffic on it) "
        "relative to the hardware step model's (fitted)")
    layer_floor_s: Annotated[float, field(ge=0, le=1)] = field(
        description="host-bound floor of one layer's forward and backward per micro-batch, per node the TP "
        "group spans (fitted)")
    pipeline_tp_rank_s: Annotated[float, field(ge=0, le=1)] = field(
        description="added to the floor per TP rank when the pipeline spans nodes (fitted; empirical)")
    data_factor: Annotated[float, field(ge=0, le=100)] = field(
        description="data-axis traffic, unoverlapped, as a multiple of the collective model's time (fitted)")
    error_low: LowError = field(
        description="5th percentile of predicted / measured - 1 over the fitted runs")
    error_high: HighError = field(
        description="95th percentile of predicted / measured - 1 over the fitted runs")
    stall_ratio: Annotated[float, field(gt=1, le=100)] | None = field(
        None, description="measured / predicted beyond which a run counts as stalled (the fit's cap on |log error|)")
    steady_low: LowError | None = field(
        None, description="5th percentile of predicted / measured - 1 over the fitted runs that did not stall")
    steady_high: HighError | None = field(
        None, description="95th percentile of predicted / measured - 1 over the fitted runs that did not stall")
    stalls: list[Stalls] = field(
        default_factory=list, description="how many of its measured runs stalled, by node count and pipeline")
    max_nodes: Annotated[int, field(ge=1, le=2**20)] | None = field(
        None, description="the most nodes a fitted run spanned: beyond them the steady band is not printed")
    fitted_on: Text = ""

    @model_validator(mode="after")
    def _stall_fields_together(self) -> "FrameworkTime":
        given = [self.stall_ratio is not None, self.steady_low is not None, self.steady_high is not None]
        if any(given) and not all(given):
            raise ValueError("stall_ratio, steady_low and steady_high go together: give all three or none")
        return self

    def stall_rate(self, pipelined: bool, nodes) -> Stalls | None:
        """The measured runs' stalls at the nearest node count at or below ``nodes`` (else the smallest count), with
        or without a pipeline; None without such runs."""
        rows = sorted((s for s in self.stalls if s.pipelined == pipelined), key=lambda s: s.nodes)
        below = [s for s in rows if s.nodes <= nodes]
        return below[-1] if below else (rows[0] if rows else None)
