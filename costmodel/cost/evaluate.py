"""The aggregator's one entry point: memory, FLOPs, collectives and step time of a layout.

``evaluate(shape, recipe, point, hardware)`` runs the same wiring whatever the point holds:

* numbers (``Point.of(layout)``): one layout, checked, every stage, labels for the tables;
* numpy arrays (``Point(tp=array, ...)``): one element per layout, a ``valid`` mask instead of errors;
* sympy letters (``point.symbolic()``, ``shape.symbolic()``): the formulas ``--symbolic`` prints.
"""

from __future__ import annotations

import functools
from dataclasses import replace
from typing import TYPE_CHECKING

from costmodel.cost import checks
from costmodel.cost.collectives import Timed, step_collectives, timed
from costmodel.cost.flops import StepFlops, six_n_t, step_flops
from costmodel.cost.memory import StageMemory, heaviest, heaviest_total, optimizer_params, stages_memory
from costmodel.cost.point import QUANTITIES, Point
from costmodel.cost.runs import cp_kinds, framework_zero
from costmodel.cost.stage import stage
from costmodel.errors import CostModelError
from costmodel.cost.shape import Shape
from costmodel.mathops import family, minimum, total, where
from costmodel.parallel import pipeline
from costmodel.parallel.pipeline import representative_stages
from costmodel.record import record

if TYPE_CHECKING:
    from costmodel.cost.step import StepTime


@record
class Cost:
    """Everything cost4d says about one layout (or an array of layouts, or their formula)."""

    shape: Shape
    recipe: object
    point: Point
    stages: list[StageMemory]  # every stage (one layout) or the three that contain the heaviest
    memory_bytes: object  # the heaviest stage's total per device
    flops: StepFlops
    collectives: list  # Collective, or Timed with a hardware
    step: StepTime | None
    valid: object = True  # arrays: the mask of layouts every axis accepts
    framework: object = None  # the profile whose overheads the memory includes (None: exact)
    hardware: object = None  # the device the collectives and the step were timed on (None: not timed)

    @property
    def heaviest(self) -> StageMemory:
        """The heaviest stage of a single layout (the first of equals)."""
        return heaviest(self.stages)

    @property
    def params(self):
        """All trainable parameters of the model."""
        return self.shape.total_params()

    @property
    def state_bytes_unsharded(self):
        """The whole model's persistent state on one device (weights + master + grads + optimizer)."""
        return self.params * self.recipe.state_bytes_per_param

    @property
    def bubble(self):
        """Idle fraction of the step for the pipeline schedule (0 with one stage)."""
        return pipeline.bubble(self.point)

    @property
    def p2p_bytes_per_microbatch(self):
        """Bytes a stage sends to the next per micro-batch, each way."""
        return pipeline.p2p_bytes(self.shape, self.recipe, self.point)

    @property
    def six_n_t(self):
        """6 N T for one micro-batch of the replica (N: the parameters a token uses, all of them when dense)."""
        return six_n_t(self.shape.active_params(), self.point.tokens)

    @property
    def step_range(self):
        """(low, high) seconds: where the measured step lay for the runs the step model was fitted on
        (cost.step_range.band), or None without a step or a fitted band (MoE models, devices with none)."""
        if self.step is None:
            return None
        from costmodel.cost.step_range import band

        return band(self.step, self.hardware, self.shape.moe, self.framework)

    @property
    def range_omits_framework(self) -> bool:
        """Whether :attr:`step_range` leaves the framework's own overheads out: a framework with no runs in the
        training data, on a device where no measured framework's fitted time applies to bound its slow end."""
        return (self.step is not None and self.framework is not None and bool(self.framework.unmeasured_time)
                and self.step.slowest_measured_s is None)

    @property
    def bytes_sent(self):
        """Bytes one device sends per step, over every collective."""
        return total(_collective(c).bytes_sent for c in self.collectives)

    @property
    def comm_seconds(self):
        """Sum of every collective's time (no overlap)."""
        return total(c.seconds for c in self.collectives)


def _collective(row):
    return row.collective if isinstance(row, Timed) else row


def evaluate(shape: Shape, recipe, point: Point, hardware=None, *, overlap: str | None = None,
             seq_len=None, framework=None, precision: str = "bf16", tp_overlap: str = "none",
             p2p_overlap: str = "none", attention_kernel: str | None = None, fp8_casts: str = "te", cp_overlap=None,
             kernels: str | None = None) -> Cost:
    """Memory, FLOPs, collectives (timed, with ``hardware``) and step time (with a step model); attention's
    kernel is ``attention_kernel`` (--attention-kernel), else the framework's, else the hardware's; the data
    axis's ``overlap`` (--data-overlap) likewise, else the framework's default (cost.step.data_overlap); the
    memory-bound ops' ``kernels`` (--kernels) else the framework's (fused without one)."""
    kind = family(*(getattr(point, name) for name in ("dp", "fsdp", "tp", "pp", "cp", "tokens", "microbatches")),
                  shape.width, shape.layers)
    valid = True
    if framework is not None:  # how the framework reduces gradients (its ZeRO-1 may all-reduce; over data x CP)
        point = replace(point, zero1_reduce=framework.zero1_reduce, cp_in_data=framework.cp_in_data,
                        fused_swiglu=framework.fused_swiglu)
    if kind == "number":
        checks.check(shape, point, hardware, recipe)
    elif kind == "numpy":
        point = _as_float(point)
        valid = checks.valid(shape, point, hardware, recipe)
    held = [stage(shape, recipe, point, role)
            for role in representative_stages(point.pp, shape.dense_layers if shape.moe else 0, point.split)]
    stages = stages_memory(shape, recipe, point, held, framework)
    memory_bytes = heaviest_total(stages)
    flops = step_flops(shape, point, attention_reach(shape, point, seq_len), held)
    rows = step_collectives(shape, comm_recipe(recipe, framework), point, held)
    step = None
    if hardware is not None:
        rows = timed(hardware, point, rows, labels=kind == "number")
        if hardware.step_model is not None and not (isinstance(point.tokens, int) and point.tokens == 0):
            from costmodel.cost.attention import attention_kernel as kernel_of
            from costmodel.cost.overlap import cp_overlap_default, data_overlap
            from costmodel.cost.step import step_time  # time only: memory and comm skip it

            hidden, why = data_overlap(framework, point, overlap)
            timed_with = functools.partial(
                step_time, shape, recipe, point, hardware, flops, rows, hidden, stages=held, precision=precision,
                tp_overlap=tp_overlap, p2p_overlap=p2p_overlap, overlap_why=why, fp8_casts=fp8_casts,
                cp_overlap=cp_overlap if cp_overlap is not None else cp_overlap_default(framework, point),
                kernels=kernels if kernels is not None else (framework.kernels if framework is not None else "fused"),
                attention_kernel=kernel_of(hardware, framework, attention_kernel, point.flash),
                optimizer_params=optimizer_params(stages, recipe),
                fsdp_copy_bytes=fsdp2_copies(framework, recipe, point, rows))
            step = timed_with(framework_time=framework.time_on(hardware) if framework is not None else None)
            slowest = slowest_measured_time(hardware) if framework is not None and framework.unmeasured_time else None
            if kind == "number" and slowest is not None:
                step = replace(step, slowest_measured_s=timed_with(framework_time=slowest).step_s)
    return Cost(shape, recipe, point, stages, memory_bytes, flops, rows, step, valid, framework, hardware)


def slowest_measured_time(hardware):
    """The fitted time of the framework of the training data whose runs are slowest against the hardware model
    (specs.framework_catalog.SLOWEST_MEASURED) where it applies, on the device its runs were measured on; else None."""
    from costmodel.specs.framework_catalog import FRAMEWORKS, SLOWEST_MEASURED

    return FRAMEWORKS[SLOWEST_MEASURED].time_on(hardware)


def fsdp2_copies(framework, recipe, point, rows):
    """HBM bytes per step of FSDP2's copies on the compute stream (cost/memory_bound.fsdp2_copy_bytes; inside pipeline
    stages its accumulation of unsharded gradients too), where the framework runs FSDP2 (its gathered-block buffers: torchtitan) and the data axis shards weights (ZeRO-3); else 0.
    The exact accounting names no framework: XLA's FSDP (MaxText, among the DGXC runs its step fraction is fitted on)
    and DeepSpeed's ZeRO-3 make no such copies."""
    if framework is None or not framework.fsdp_buffers or point.zero != 3:
        return 0
    from costmodel.cost.memory_bound import fsdp2_copy_bytes
    from costmodel.parallel.data import fsdp_active, fsdp_in_pipeline

    copies = fsdp2_copy_bytes([row.collective for row in rows], grad_bytes=recipe.compute_bytes,
                              reduce_bytes=framework.reduce_bytes(recipe), pipelined=fsdp_in_pipeline(point),
                              microbatches=point.microbatches)
    return where(fsdp_active(point.zero, point.sharding.fsdp), copies, 0)


def comm_recipe(recipe, framework):
    """The recipe the collectives move: the framework's gradient-reduction dtype where it sets one (its
    buckets in memory keep the recipe's)."""
    if framework is None or framework.reduce_dtype is None or framework.reduce_dtype == recipe.grad_comm:
        return recipe
    return recipe.model_copy(update={"grad_comm": framework.reduce_dtype})


def attention_reach(shape, point, seq_len=None):
    """How far attention reaches for the FLOP count: the sequence, or a document of ``point.document`` tokens
    when attention is masked to documents (Llama 3): each token attends within its own document only."""
    if point.document is None or not shape.attention or not point.flash:  # math attention masks a full s x s
        return seq_len
    return minimum(point.document, shape.seq_len if seq_len is None else seq_len)


def _as_float(point: Point) -> Point:
    """Arrays as float64: products such as FLOPs per step overflow int64 (exact for integers below 2^53)."""
    import numpy as np

    arrays = {name: np.asarray(getattr(point, name), dtype=np.float64) for name in QUANTITIES
              if type(getattr(point, name)).__module__.startswith("numpy")}
    return replace(point, **arrays)


def evaluate_layout(model, recipe, layout, hardware=None, *, framework=None, **options) -> Cost:
    """:func:`evaluate` for specs and a validated Layout (what the CLI and the api call); a framework
    profile adds its overheads and, where the layout leaves them open, sets its pipeline split and CP kind."""
    layout = framework_zero(layout, framework)
    point = Point.of(layout)
    if framework is not None and layout.split is None:
        point = replace(point, split=framework.split)
    if layout.cp_kind is None:  # the framework's own context parallelism, else ring
        point = replace(point, cp_kind=cp_kinds(framework)[0])
    return evaluate(layout_shape(model, layout), recipe, point, hardware, framework=framework, **options)


def layout_shape(model, layout) -> Shape:
    """The model's shape with the sequence the layout runs: --seq, else the model's own, shortened to --tokens
    when a micro-batch holds fewer (a replica cannot attend over more tokens than it holds)."""
    shape = Shape.of(model)
    if not shape.attention:
        if layout.document is not None:
            raise CostModelError(f"--document: {shape.name} has no attention to mask")
        return shape
    seq = layout.seq if layout.seq is not None else min(shape.seq_len, layout.tokens) if layout.tokens else shape.seq_len
    check_document(layout.document, seq)
    return shape if seq == shape.seq_len else replace(shape, seq_len=seq)


def check_document(document, seq) -> None:
    """A document fits in a sequence: --document at most --seq (one document per sequence is the default)."""
    if document is not None and not 1 <= document <= seq:
        raise CostModelError(f"--document {document:,}: give 1 to the sequence's {seq:,} tokens (one document per "
                             "sequence is the default)")
