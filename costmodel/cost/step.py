"""Predicted time of one training step: matmuls, memory-bound ops, communication, pipeline bubble.

T = (T_matmul + T_elementwise + T_TP + T_CP + T_EP + T_p2p) / (1 - bubble) + exposed data-axis comm, where
TP/CP/EP/p2p traffic sits on the critical path (not overlapped, as in Megatron-LM 2022) and DDP/FSDP
traffic overlaps with backward compute unless overlap is 'none'. Collective times come from the
one time model (:func:`costmodel.cost.network.collective_seconds`), calibrated where the spec is.
"""

from __future__ import annotations

from costmodel.cost import memory_bound
from costmodel.cost.attention import attention_seconds
from costmodel.cost.collectives import Timed, axis_family
from costmodel.cost.flops import StepFlops, most_layers
from costmodel.cost.gemm import expert_matmul_efficiency, matmul_efficiency
from costmodel.cost.overlap import cp_exposed_seconds
from costmodel.cost.placement import placement
from costmodel.errors import CostModelError
from costmodel.inputs.files import shown
from costmodel.formulas import memory_bound as mb
from costmodel.formulas import step as fs
from costmodel.mathops import above_one, ceil_div, exact_div, where
from costmodel.parallel import pipeline
from costmodel.parallel.data import fsdp_active, fsdp_in_pipeline
from costmodel.record import record

OVERLAPS = ("overlap", "none")
#: how fp8 casts run: Transformer Engine's own kernels (HBM traffic), or fused into their neighbours (XLA)
FP8_CASTS = ("te", "fused")
PRECISIONS = ("bf16", "fp8")


@record
class StepTime:
    """One step's time by part: each on the critical path or hidden behind compute, with its range."""

    matmul_s: object
    elementwise_s: object
    tp_s: object
    cp_s: object
    p2p_s: object
    data_comm_s: object
    data_exposed_s: object
    bubble: object
    step_s: object
    global_tokens: object
    model_flops: object  # whole step, all devices
    hardware_flops: object
    devices: object
    peak_flops: float
    matmul_efficiency: object
    overlap: str = "overlap"
    attention_flops: object = 0  # of model_flops: attention's Q K^T and A V over the full s x s
    precision: str = "bf16"  # of the linear layers' matmuls; peak_flops is this precision's
    tp_exposed_s: object = 0  # of tp_s, what the matmuls do not hide (all of it without TP overlap)
    p2p_exposed_s: object = 0  # of p2p_s, what compute does not hide
    tp_overlap: str = "none"
    p2p_overlap: str = "none"
    ep_s: object = 0  # the MoE layers' dispatch and combine all-to-alls (on the critical path)
    expert_efficiency: object = None  # the routed experts' matmuls (MoE models)
    framework_s: object = 0  # the framework's slower kernels or host-bound floor, beyond the critical path
    host_floor_s: object = 0  # the framework's host-bound floor of the slowest stage over the step
    attention_s: object = 0  # flash attention's kernels at their measured rate (0: attention is in matmul_s)
    attention_kernel: str | None = None  # the kernel attention_s is timed with (None: the GEMM efficiency)
    attention_rates: tuple | None = None  # (forward, backward) FLOP/s of that kernel at this head dim and length
    optimizer_s: object = 0  # the optimizer step of the device with the most parameters to update (HBM-bound)
    overlap_why: str = ""  # whose choice the data-axis overlap is (--data-overlap, the framework's default, ...)
    fp8_casts: str = "te"  # with precision fp8: te (cast kernels counted) or fused
    kernels: str = "fused"  # the memory-bound ops: fused kernels or eager PyTorch (cost/memory_bound.py)
    fsdp_copy_s: object = 0  # of elementwise_s, FSDP2's copy-out after each all-gather and copy-in before each
    # reduce-scatter (cost/memory_bound.fsdp2_copy_bytes)
    cp_exposed_s: object = 0  # of cp_s, what attention does not hide
    cp_overlap: str = "none"
    attention_rerun_flops: object = 0  # of hardware_flops beyond model_flops, attention's rerun (full s x s)
    slowest_measured_s: object = None  # a framework no run times (unmeasured_time): the step at the fitted time of
    # the slowest framework that has runs (cost/evaluate.slowest_measured_time), its range's slow end

    @property
    def modelled_critical_s(self):
        """The critical path of one stage as the hardware model times it (compute, exposed TP, CP, EP and
        pipeline traffic), before a framework's time and the bubble."""
        return (self.matmul_s + self.attention_s + self.elementwise_s + self.tp_exposed_s + self.cp_exposed_s
                + self.ep_s + self.p2p_exposed_s)

    @property
    def critical_parts(self) -> dict:
        """The step as parts that sum to it: compute, exposed communication, the bubble's share of the
        pipelined critical path, and the exposed data-axis traffic."""
        critical = self.modelled_critical_s + self.framework_s
        return {"matmul_s": self.matmul_s, "attention_s": self.attention_s, "elementwise_s": self.elementwise_s,
                "tp_exposed_s": self.tp_exposed_s, "cp_exposed_s": self.cp_exposed_s, "ep_s": self.ep_s,
                "p2p_exposed_s": self.p2p_exposed_s,
                "framework_s": self.framework_s,
                "bubble_s": fs.pipelined_seconds(critical=critical, bubble=self.bubble) - critical,
                "data_exposed_s": self.data_exposed_s, "optimizer_s": self.optimizer_s}

    def mfu_with(self, convention: str = "full"):
        """MFU with attention counted over the full s x s or (``causal``) half of it."""
        flops = self.model_flops - (self.attention_flops / 2 if convention == "causal" else 0)
        return fs.utilisation(flops=flops, seconds=self.step_s, devices=self.devices, peak_flops=self.peak_flops)

    @property
    def tokens_per_s(self):
        return self.global_tokens / self.step_s

    @property
    def mfu(self):
        """Model FLOPs utilisation: model FLOPs / (step time x devices x dense peak)."""
        return fs.utilisation(flops=self.model_flops, seconds=self.step_s, devices=self.devices,
                              peak_flops=self.peak_flops)

    @property
    def hfu(self):
        """Hardware FLOPs utilisation: model + recomputed FLOPs over the same."""
        return self.hfu_with("full")

    def hfu_with(self, convention: str = "full"):
        """HFU with attention, and its rerun, counted over the full s x s or (``causal``) half of it, as MFU is."""
        causal = (self.attention_flops + self.attention_rerun_flops) / 2 if convention == "causal" else 0
        return fs.utilisation(flops=self.hardware_flops - causal, seconds=self.step_s, devices=self.devices,
                              peak_flops=self.peak_flops)

    @property
    def parts(self) -> dict:
        return {"matmul_s": self.matmul_s, "attention_s": self.attention_s, "elementwise_s": self.elementwise_s,
                "tp_s": self.tp_s,
                "cp_s": self.cp_s, "ep_s": self.ep_s, "p2p_s": self.p2p_s, "framework_s": self.framework_s,
                "data_comm_s": self.data_comm_s, "data_exposed_s": self.data_exposed_s, "optimizer_s": self.optimizer_s}


def matmul_seconds(hw_flops, attention_flops, *, hardware, efficiency, precision: str):
    """Matmul time of ``hw_flops`` (whole step) of which ``attention_flops`` are attention's Q K^T and
    A V. bf16: all at the bf16 peak x e. fp8 (Transformer Engine recipes): the linear layers at the fp8
    peak x e x the spec's fp8_efficiency (casts, amax, fp8 GEMMs' own efficiency), attention in bf16."""
    bf16 = hardware.flops("bf16")
    if precision == "bf16":
        return fs.matmul_seconds(flops=hw_flops, peak_flops=bf16, efficiency=efficiency)
    return (fs.matmul_seconds(flops=attention_flops, peak_flops=bf16, efficiency=efficiency)
            + fs.matmul_seconds(flops=hw_flops - attention_flops, peak_flops=hardware.flops("fp8"),
                                efficiency=efficiency * hardware.step_model.fp8_efficiency))


def step_time(shape, recipe, point, hardware, flops: StepFlops, timed: list[Timed],
              overlap: str = "overlap", stages=None, precision: str = "bf16", tp_overlap: str = "none",
              p2p_overlap: str = "none", framework_time=None, attention_kernel: str | None = None, cp_overlap: str = "none",
              optimizer_params=0, overlap_why: str = "", fp8_casts: str = "te", kernels: str = "fused",
              fsdp_copy_bytes=0) -> StepTime:
    """One optimizer step of ``point`` on ``hardware``, from its FLOPs and timed collectives; with the
    pipeline's ``stages``, the stage with the most layers sets the memory-bound ops' pace and the FLOPs' stage
    imbalance (StepFlops.stage_imbalance, from the same stages) the matmuls'; with a framework's
    measured ``framework_time`` (specs.framework.FrameworkTime), its kernels, host floor and
    unoverlapped data-axis traffic (:func:`host_floor`); with an ``attention_kernel`` of the hardware's
    attention table (cost/attention.py), flash attention's own time instead of GEMM-efficiency FLOPs; the
    optimizer step of ``optimizer_params`` (:func:`optimizer_params`) after the last backward; FSDP2's copies of
    ``fsdp_copy_bytes`` per step with the memory-bound ops (cost/memory_bound.fsdp2_copy_bytes)."""
    for flag, value in (("--data-overlap", overlap), ("--tp-overlap", tp_overlap), ("--p2p-overlap", p2p_overlap),
                        ("--cp-overlap", cp_overlap)):
        if isinstance(value, str) and value not in OVERLAPS:
            raise CostModelError(f"{flag} {shown(value)}: use overlap or none")
    if precision not in PRECISIONS:
        raise CostModelError(f"--precision {shown(precision)}: use bf16 or fp8")
    if fp8_casts not in FP8_CASTS:
        raise CostModelError(f"--fp8-casts {shown(fp8_casts)}: use te or fused")
    if kernels not in memory_bound.KERNELS:
        raise CostModelError(f"--kernels {shown(kernels)}: use fused or eager")
    if precision == "fp8" and (hardware.step_model.fp8_efficiency is None or
                               getattr(hardware.peak_flops, "fp8", None) is None):
        raise CostModelError(f"{hardware.name} has no fp8 step model (needs an fp8 peak and step_model.fp8_efficiency)")
    peak = hardware.flops(precision)
    global_tokens = point.tokens * point.micro_steps * point.data
    devices = point.devices
    efficiency = matmul_efficiency(shape, point, hardware)
    hw_flops = flops.hardware_per_token * global_tokens
    busiest = hw_flops + flops.straggler_per_token * global_tokens  # the EP rank with the most routed tokens
    routed = flops.routed_hardware_per_token * global_tokens  # of busiest, the routed experts' (padding and straggling)
    imbalance = flops.stage_imbalance  # the slowest stage's FLOPs against an even share (1 without stages)
    most = ceil_div(shape.layers, point.pp) if stages is None else most_layers(stages)
    attention = flops.attention_per_token * global_tokens
    kernel = attention_kernel if shape.attention else None
    attention_s, rates = 0, None
    if kernel is None:  # attention's FLOPs (full s x s, or within documents) at the GEMM efficiency
        matmul = matmul_seconds((busiest - routed) * imbalance / devices, attention * imbalance / devices,
                                hardware=hardware, efficiency=efficiency, precision=precision)
    else:  # attention's kernels at their measured rate; the GEMMs without them
        rerun = flops.attention_recompute_per_token * global_tokens
        matmul = matmul_seconds((busiest - routed - attention - rerun) * imbalance / devices, 0,
                                hardware=hardware, efficiency=efficiency, precision=precision)
        attention_s, rates = attention_seconds(
            shape, point, hardware, kernel, rerun=flops.attention_rerun,
            forward_flops=flops.attention_forward_per_token * global_tokens * imbalance / devices)
    expert_efficiency = expert_matmul_efficiency(shape, point, hardware) if shape.moe else None
    if shape.moe:  # the routed experts' matmuls at their own shape's efficiency
        matmul = matmul + matmul_seconds(routed * imbalance / devices, 0, hardware=hardware, precision=precision,
                                         efficiency=expert_efficiency)
    # the slowest stage's layers, its recomputed ones (full: all; every:K: floor(L / K)) with their forward again
    layers = memory_bound.recompute_split(memory_bound.layer_bytes, shape, point, most, recipe.activation_bytes,
                                          kernels)
    if precision == "fp8" and fp8_casts == "te":  # Transformer Engine's casts of each linear layer's operands
        layers = layers + memory_bound.recompute_split(memory_bound.fp8_cast_bytes, shape, point, most,
                                                       recipe.activation_bytes)
    per_token = layers + memory_bound.ends_bytes(shape, point, recipe.activation_bytes, kernels)
    elementwise = mb.hbm_seconds(hbm_bytes=exact_div(point.tokens, point.cp) * point.micro_steps * per_token,
                                 hbm_bandwidth=hardware.hbm.bandwidth_bytes_per_s,
                                 efficiency=hardware.step_model.hbm_efficiency)
    fsdp_copy_s = mb.hbm_seconds(hbm_bytes=fsdp_copy_bytes, hbm_bandwidth=hardware.hbm.bandwidth_bytes_per_s,
                                 efficiency=hardware.step_model.hbm_efficiency)
    elementwise = elementwise + fsdp_copy_s
    by_axis = {"tp": 0, "cp": 0, "pp": 0, "data": 0, "ep": 0}
    for row in timed:
        family_ = axis_family(row.collective.axis)
        by_axis[family_] = by_axis[family_] + row.seconds
    bubble = pipeline.bubble(point)
    # TP collectives overlapped with the matmuls they feed (async TP, Transformer Engine userbuffers);
    # pipeline sends with the next micro-batch's compute; else on the critical path (Megatron's default)
    tp_exposed = fs.exposed_seconds(comm=by_axis["tp"], hidden_behind=matmul, overlap=tp_overlap)
    compute = matmul + attention_s + elementwise
    p2p_exposed = fs.exposed_seconds(comm=by_axis["pp"], hidden_behind=compute, overlap=p2p_overlap)
    attention_time = attention_s if kernel is not None else fs.matmul_seconds(  # its recomputation's too
        flops=(attention + flops.attention_recompute_per_token * global_tokens) * imbalance / devices,
        peak_flops=hardware.flops("bf16"), efficiency=efficiency)
    cp_exposed = cp_exposed_seconds([r for r in timed if axis_family(r.collective.axis) == "cp"], point,
                                    attention_time, cp_overlap)
    critical = compute + tp_exposed + cp_exposed + by_axis["ep"] + p2p_exposed
    backward_compute = compute * 2 / 3  # backward is 2 of the 3 matmul passes
    # FSDP gathers and reduces every micro-batch behind its backward (ZeRO-2 reduces so too). DDP and ZeRO-1 reduce once
    # per step, as the last micro-batch's backward makes the gradients final (Megatron's overlap_grad_reduce):
    # without a pipeline only that backward hides it; with one, each stage's reduction also runs under the
    # other stages' drain (taken, as before, as all of backward: the DGXC fit is unchanged by this rule)
    per_step = where(above_one(point.pp), backward_compute, backward_compute / point.micro_steps)
    shards = point.sharding.fsdp  # the data axis's shards (with a framework's CP ranks folded in)
    every_micro_batch = fsdp_active(point.zero, shards) if point.zero != 2 else above_one(shards)  # ZeRO-2 too
    hidden = where(every_micro_batch, backward_compute, per_step)
    # FSDP inside pipeline stages reduces once, after the stage's last backward (perform_reduce_grad): no compute
    # left to hide those reductions behind
    tail = where(fsdp_in_pipeline(point), sum((row.seconds for row in timed if row.collective.phase == "backward"
                                               and row.collective.axis in ("fsdp", "dp")
                                               and row.collective.op != "all-gather"), 0), 0)
    exposed = fs.exposed_seconds(comm=by_axis["data"] - tail, hidden_behind=hidden, overlap=overlap) + tail
    extra, floor = 0, 0
    if framework_time is not None:  # its kernels and host floor; its data-axis traffic unoverlapped
        floor = host_floor(framework_time, hardware, point, most)
        extra = fs.framework_critical_seconds(critical=critical, kernel_factor=framework_time.kernel_factor,
                                              floor=floor) - critical
        exposed = framework_time.data_factor * by_axis["data"]
        overlap = "none"  # what the fitted time assumes, whatever --data-overlap said: the output must say so
        overlap_why = "its fitted time: unoverlapped"
    optimizer = mb.hbm_seconds(hbm_bytes=optimizer_params * fs.optimizer_step_bytes_per_param(
        master=recipe.master_bytes, grads=recipe.grad_bytes, optimizer=recipe.optimizer_bytes,
        weights=recipe.weight_bytes), hbm_bandwidth=hardware.hbm.bandwidth_bytes_per_s,
        efficiency=hardware.step_model.hbm_efficiency)
    step = fs.pipelined_seconds(critical=critical + extra, bubble=bubble) + exposed + optimizer
    return StepTime(matmul, elementwise, by_axis["tp"], by_axis["cp"], by_axis["pp"], by_axis["data"], exposed,
                    bubble, step, global_tokens, flops.per_token * global_tokens, hw_flops, devices, peak, efficiency,
                    _overlap_name(overlap), attention, precision, tp_exposed, p2p_exposed, tp_overlap, p2p_overlap, by_axis["ep"],
                    expert_efficiency, extra, floor, attention_s, kernel, rates, optimizer, overlap_why, fp8_casts,
                    kernels, fsdp_copy_s, cp_exposed_s=cp_exposed, cp_overlap=cp_overlap,
                    attention_rerun_flops=flops.attention_recompute_per_token * global_tokens)


def _overlap_name(overlap) -> str:
    """--data-overlap's word for a choice (a plan's mask of choices: 'by layout')."""
    if isinstance(overlap, str):
        return overlap
    if getattr(overlap, "ndim", 0):  # one choice per layout
        return "by layout"
    return "overlap" if overlap else "none"


def host_floor(ft, hardware, point, layers):
    """A framework's host-bound floor of the stage with the most ``layers`` over the step: per layer,
    ``layer_floor_s`` for each node the TP group spans, plus ``pipeline_tp_rank_s`` per TP rank when the
    pipeline spans nodes (specs.framework.FrameworkTime)."""
    tp_nodes = placement(hardware, point, "tp").domains
    pipeline_across = where(above_one(placement(hardware, point, "pp").domains), 1, 0)
    per_layer = ft.layer_floor_s * tp_nodes + ft.pipeline_tp_rank_s * point.tp * pipeline_across
    return fs.host_floor_seconds(micro_batches=point.micro_steps, layers=layers, per_layer=per_layer)
