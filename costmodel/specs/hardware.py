"""Hardware specs: one device's compute, HBM and network levels, each table with its source.

Files live in ``hardware/<name>.toml`` (shipped inside the wheel as ``costmodel/_hardware``).
Keys carry their units (``bandwidth_bytes_per_s``); values are stored in base units.
"""


import dataclasses
from typing import Annotated, Literal

from pydantic import field_validator, model_validator

from costmodel.inputs import bounds
from costmodel.specs.base import HighError, LowError, Name, Seconds, Spec, Text, count, field, rate

Flops = rate(bounds.FLOPS)
Bandwidth = rate(bounds.BANDWIDTH)
Devices = count(bounds.DEVICES)


class PeakFlops(Spec):
    """Dense peak FLOP/s of one device per dtype (no 2:4 sparsity)."""

    fp64: Flops | None = None
    fp32: Flops | None = None
    tf32: Flops | None = None
    bf16: Flops | None = None
    fp16: Flops | None = None
    fp8: Flops | None = None
    int8: Flops | None = None
    fp4: Flops | None = None
    source: Text


class HBM(Spec):
    """High-bandwidth memory of one device."""

    capacity_bytes: Annotated[int, field(ge=2**20, le=2**60)] = field(description="nominal capacity (bytes)")
    usable_bytes: Annotated[int, field(ge=2**20, le=2**60)] | None = field(
        None, description="what the driver or runtime exposes (bytes), where a source gives it")
    bandwidth_bytes_per_s: Bandwidth = field(description="HBM bandwidth (B/s)")
    marketed_gb: Annotated[float, field(gt=0, le=1e9)] | None = field(
        None, description="the capacity as marketed, in the vendor's 'GB' (80 for 'H100 80GB')")
    source: Text


class NetworkLevel(Spec):
    """One level of the interconnect.

    GPU levels: ``bandwidth_bytes_per_s`` is what one device can send out at once, one direction.
    ICI: per torus axis, bidirectional (the Scaling Book's W_ici).
    """

    name: Name
    kind: Literal["nvlink", "xgmi", "neuronlink", "ici", "pcie", "infiniband", "ethernet", "efa", "dcn"]
    bandwidth_bytes_per_s: Bandwidth
    domain_size: Devices | None = field(
        None, description="devices connected at this level; None = unbounded scale-out")
    torus_axes: Annotated[int, field(gt=0, le=8)] | None = field(None, description="ICI only: torus dimensions")
    max_shape: Annotated[list[Devices], field(max_length=8)] | None = field(None, description="ICI only: largest slice")
    wraparound: bool | None = field(None, description="ICI only: whether full axes wrap around")
    nvls: bool = field(False, description="in-switch reduction (NVLink SHARP) available at this level")
    latency_s: Seconds | None = field(
        None, description="fixed cost of one ring collective at this level (s); None = not known (0)")
    hop_latency_s: Seconds | None = field(
        None, description="added per ring step (n - 1 steps per pass) (s); None = not known (0)")
    nvls_latency_s: Seconds | None = field(
        None, description="fixed cost of one NVLS all-reduce (s); None = not known (0)")
    latency_source: Text = field("", description="where the latency figures come from")
    efficiency: Annotated[float, field(gt=0, le=1)] | None = field(
        None, description="fraction of bandwidth_bytes_per_s a ring achieves; None = not known (1)")
    source: Text


class Calibration(Spec):
    """Latency and effective bandwidth fitted to measurements for one collective and algorithm."""

    collective: Name
    algorithm: Name
    level: Name
    ranks: Devices
    latency_s: Seconds
    bandwidth_bytes_per_s: Bandwidth | None = field(
        description="B in the algorithm's time formula (null: time does not grow with size, or model nccl)")
    model: Literal["ring", "nccl"] = field(
        "ring", description="ring: t = latency_s + c S / B on this level and group size; nccl: t = latency_s + "
        "scale x NCCL's tuned time, for any group on this level (it carries over to other sizes of group)")
    scale: Annotated[float, field(ge=0, le=1e3)] | None = field(None, description="model nccl: the factor on NCCL's time")
    median_abs_error_pct: Annotated[float, field(ge=0, le=1e6)]
    source: Text


class StepModel(Spec):
    """Parameters of the step-time model beyond peak FLOP/s and bandwidths, with where they came from."""

    matmul_efficiency: Annotated[float, field(gt=0, le=1)] | None = field(
        None, description="achieved / dense peak for large matmuls, when no measured table is given")
    matmul_shape: list[Annotated[int, field(ge=1, le=1_000_000)]] | None = field(
        None, description="m, n, k of the kernel matmul_efficiency was measured on: with matmul_overhead_s, smaller "
        "GEMMs run below it (formulas.step.gemm_shape_efficiency)")
    matmul_overhead_s: Annotated[float, field(ge=0, le=1e-3)] | None = field(
        None, description="fixed time per GEMM (launch, prologue and epilogue, the last wave) on top of its work at "
        "the plateau rate, for a device measured at one shape (fitted on a GEMM table)")
    matmul_table: Name | None = field(
        None, description="measured matmul throughput CSV (device_key,b,m,n,k,dtype,flops_per_s), relative "
        "to the hardware folder")
    tables_peak_flops: Annotated[float, field(ge=1e12, le=1e18)] | None = field(
        None, description="dense bf16 peak of the device the measured tables (GEMM, flash attention) were taken on "
        "(None: this spec's): a spec with another peak keeps the tables' efficiency, not their FLOP/s")
    attention_table: Name | None = field(
        None, description="measured flash-attention throughput CSV (kernel,direction,causal,head_dim,seq,tflops), "
        "relative to the hardware folder; without one, attention's matmuls run at the GEMM efficiency")
    attention_kernel: Name | None = field(
        None, description="the table's kernel a step runs unless the framework or --attention-kernel says "
        "otherwise (cudnn: Transformer Engine's fused attention, as NeMo/Megatron run it; fa2; fa3)")
    sustained_fraction: Annotated[float, field(gt=0, le=1)] = field(
        1.0, description="fraction of the matmul throughput in the table (or matmul_efficiency) that a whole "
        "training step sustains: isolated GEMM benchmarks run at boost clocks, a step at power-limited ones")
    fp8_efficiency: Annotated[float, field(gt=0, le=2)] | None = field(
        None, description="fp8 linear layers (Transformer Engine, per-tensor scaling): achieved fp8 throughput "
        "over fp8 peak, relative to the bf16 efficiency of the same shape (above 1: fp8 GEMMs reach more of their "
        "peak); the casts and their amax are counted apart, as HBM traffic (None: no fp8 model)")
    fp8_error_low: LowError | None = field(
        None, description="as error_low, for --precision fp8 (its own fit's rows)")
    fp8_error_high: HighError | None = field(
        None, description="as error_high, for --precision fp8")
    error_low: LowError | None = field(
        None, description="smallest predicted / measured - 1 of the fit's rows, held out and fitted (the printed band)")
    error_high: HighError | None = field(
        None, description="largest predicted / measured - 1 of the fit's rows, held out and fitted")
    fraction_range: list[Annotated[float, field(gt=0, le=1)]] | None = field(
        None, min_length=2, max_length=2, description="where the sustained fraction is borrowed (no run on this "
        "device): the lowest and highest it could be here (e.g. base / boost clock to 1); the printed range "
        "widens the matmuls' and attention's share of the step by it")
    hbm_efficiency: Annotated[float, field(gt=0, le=1)] = field(
        description="the fraction of HBM bandwidth memory-bound kernels (norms, activations, residual adds, "
        "the optimizer step) achieve: a measured copy or elementwise kernel's bandwidth over the spec's")
    source: Text

    @model_validator(mode="after")
    def _fraction_in_its_range(self) -> "StepModel":
        if self.fraction_range is not None:
            low, high = self.fraction_range
            if not low <= self.sustained_fraction <= high:
                raise ValueError(f"fraction_range [{low}, {high}] must hold sustained_fraction {self.sustained_fraction}")
            if self.error_low is None or self.error_high is None:
                raise ValueError("fraction_range widens a band: give error_low and error_high too")
        return self

    @model_validator(mode="after")
    def _kernel_with_table(self) -> "StepModel":
        if (self.attention_table is None) != (self.attention_kernel is None):
            raise ValueError("attention_table and attention_kernel go together")
        return self

    @model_validator(mode="after")
    def _peak_with_a_table(self) -> "StepModel":
        if self.tables_peak_flops is not None and not (self.matmul_table or self.attention_table):
            raise ValueError("tables_peak_flops is the peak of the device a matmul_table or attention_table was "
                             "measured on: give one")
        return self

    @model_validator(mode="after")
    def _shape_with_overhead(self) -> "StepModel":
        if (self.matmul_shape is None) != (self.matmul_overhead_s is None):
            raise ValueError("matmul_shape and matmul_overhead_s go together")
        if self.matmul_shape is not None and len(self.matmul_shape) != 3:
            raise ValueError("matmul_shape is [m, n, k]")
        if self.matmul_shape is not None and self.matmul_efficiency is None:
            raise ValueError("matmul_shape needs the matmul_efficiency measured at it")
        return self

    @field_validator("matmul_table", "attention_table")
    @classmethod
    def _inside_the_folder(cls, value: str | None) -> str | None:
        if value is not None and (value.startswith(("/", "\\")) or ".." in value.replace("\\", "/").split("/")):
            raise ValueError("must be a path inside the hardware folder (relative, without '..')")
        return value


class Nccl(Spec):
    """The system as NCCL sees it, for pricing collectives with NCCL's own tuner (cost/nccl.py)."""

    topology: Literal["hgx-h100", "aws-p5", "hgx-a100", "aws-p4de"] = field(
        description="the graphs NCCL's search builds on this system (presets in formulas/nccl_topologies.py)")
    version: Name = field(description="the NCCL release the system runs (major.minor.patch, 2.19.0 or later): its "
                          "tuner decides; releases before 2.26.2 differ where formulas/nccl_versions.py says, later "
                          "ones are priced with 2.26.2's model")
    version_source: Text = field("", description="where the release comes from (a log's header overrides it)")
    launch_s: Seconds | None = field(
        None, description="host time to launch one GPU's share of a collective: no collective takes less, and "
        "one thread driving G GPUs (nccl-tests -g G) takes at least G of these; None = not known (0)")
    launch_source: Text = field("", description="where launch_s comes from")
    network_latency_s: Seconds | None = field(
        None, description="what one network hop takes, measured, where it differs from the latency the NIC "
        "plugin declares (NCCL picks algorithms with the declared one; the time uses this); None = the declared")
    network_latency_source: Text = field("", description="where network_latency_s comes from")
    source: Text

    @field_validator("version")
    @classmethod
    def _release(cls, version: str) -> str:
        from costmodel.formulas.nccl_versions import parse

        parse(version)  # a ValueError names what is wrong
        return version


#: each kind as prose names it ("trn2 is a Trainium chip")
KIND_NAMES = {"gpu": "GPU", "tpu": "TPU", "trainium": "Trainium chip"}


class Hardware(Spec):
    """One accelerator with its memory and network."""

    name: Name
    description: Text = ""
    #: gpu: a switched fast domain plus a scale-out network, collectives by NCCL/RCCL (its tuner where [nccl] says);
    #: tpu: an ICI torus (--mx/--my) plus DCN; trainium: AWS Trainium, priced as gpu's domain + scale-out (its own
    #: collective library, not NCCL: no tuner)
    kind: Literal["gpu", "tpu", "trainium"]
    peak_flops: PeakFlops
    hbm: HBM
    network: list[NetworkLevel] = field(min_length=1, max_length=8, description="fastest level first")
    calibration: list[Calibration] = field(default_factory=list, description="fitted by cost4d validate --fit")
    step_model: StepModel | None = field(None, description="what `cost4d step` needs beyond the datasheet")
    nccl: Nccl | None = field(None, description="price collectives as NCCL's tuner does (GPUs)")
    source: Text = ""
    #: the folder the spec was read from: the one its tables are looked up in (set by the loader)
    _folder: object = dataclasses.field(default=None, compare=False, repr=False)

    @model_validator(mode="after")
    def _check(self) -> "Hardware":
        if self.peak_flops.bf16 is None:
            raise ValueError("peak_flops.bf16 is required (the default compute dtype)")
        if self.kind == "tpu" and not any(level.kind == "ici" for level in self.network):
            raise ValueError("a TPU needs an 'ici' network level")
        if self.nccl is not None and self.kind != "gpu":
            raise ValueError(f"[nccl] prices collectives as NCCL's tuner does, on GPUs; this spec's kind is "
                             f"{self.kind!r}")
        sm = self.step_model
        if sm is not None and sm.matmul_shape is not None:  # the measured kernel must take longer than t_0 alone
            m, n, k = sm.matmul_shape
            took = 2 * m * n * k / (sm.matmul_efficiency * self.peak_flops.bf16)
            if took <= sm.matmul_overhead_s:
                raise ValueError(f"step_model.matmul_shape {m} x {n} x {k} at {sm.matmul_efficiency:g} of peak takes "
                                 f"{took:.3g} s, not more than matmul_overhead_s = {sm.matmul_overhead_s:g} s: "
                                 "the measured kernel must be larger")
        return self

    @property
    def kind_name(self) -> str:
        """The kind as a sentence names it: 'GPU', 'TPU', 'Trainium chip'."""
        return KIND_NAMES[self.kind]

    def flops(self, dtype: str = "bf16") -> float:
        """Dense peak FLOP/s for ``dtype``."""
        value = getattr(self.peak_flops, dtype, None)
        if value is None:
            raise ValueError(f"{self.name} has no peak FLOP/s for {dtype}")
        return value

    def level(self, kind_or_name: str) -> NetworkLevel:
        """The network level with this name or kind."""
        for level in self.network:
            if kind_or_name in (level.name, level.kind):
                return level
        raise ValueError(f"{self.name} has no network level {kind_or_name!r}")
