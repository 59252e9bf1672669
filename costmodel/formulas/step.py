"""Time of one training step from its parts (seconds)."""

from __future__ import annotations

from costmodel.mathops import maximum, minimum, where


def matmul_seconds(*, flops, peak_flops, efficiency):
    """Matmul time: FLOPs / (C e), e the achieved fraction of dense peak for the shape."""
    return flops / (peak_flops * efficiency)


def gemm_shape_efficiency(*, flops, peak_flops, measured_flops, measured_efficiency, overhead_s):
    """A GEMM's achieved / peak where only one kernel was measured: each GEMM takes its work at a plateau rate
    plus a fixed time, t = F / (e_max C) + t_0, with e_max such that the measured kernel (F_m at e_m) lies on the
    curve, and no shape above the measured one faster than it:

        e(F) = min(e_m, F / (C (F / (e_max C) + t_0))),   e_max = F_m / (C (F_m / (e_m C) - t_0))

    t_0 (launch, prologue and epilogue, the last wave) is fitted on a measured GEMM table
    (benchmarks/fit_gemm_overhead.py)."""
    plateau = measured_flops / (peak_flops * (measured_flops / (measured_efficiency * peak_flops) - overhead_s))
    return minimum(measured_efficiency, flops / (peak_flops * (flops / (plateau * peak_flops) + overhead_s)))


def attention_kernel_seconds(*, forward_flops, rerun, masked, rate_fwd, rate_bwd, sustained):
    """Flash attention's kernels: ``forward_flops`` the Q K^T and A V of one forward over the full s x s,
    ``masked`` the fraction a mask leaves (1/2 causal), ``rerun`` the forwards recomputation adds (0..1 of
    them). Backward does 2.5 x the forward's work (five matmuls, the scores recomputed), each pass at its
    measured rate x the fraction a step sustains:

        T = F m (1 + r) / (R_fwd s) + 2.5 F m / (R_bwd s)

    Source: the FlashAttention benchmarks' FLOP convention (Dao-AILab/flash-attention, benchmarks/
    benchmark_flash_attention.py ``flops``), which the measured rates are quoted in."""
    work = forward_flops * masked
    return work * (1 + rerun) / (rate_fwd * sustained) + 2.5 * work / (rate_bwd * sustained)


def optimizer_step_bytes_per_param(*, master, grads, optimizer, weights):
    """HBM bytes the optimizer step moves per parameter it updates: every state read once (master weights,
    gradient, optimizer states) and all but the gradient written once, the kept low-precision weights
    rewritten from the updated master: 2 b_m + b_g + 2 b_o + b_w.

    Source: torch.optim.AdamW's fused and foreach steps update param, exp_avg and exp_avg_sq in place from
    the gradient (torch/optim/adamw.py: _fused_adamw, _multi_tensor_adamw); Megatron-LM's distributed
    optimizer then copies the main (fp32) params into the bf16 model params
    (core/optimizer/distrib_optimizer.py: _copy_main_params_to_model_params)."""
    return 2 * master + grads + 2 * optimizer + weights


def pipelined_seconds(*, critical, bubble):
    """Work on the critical path stretched by the pipeline bubble: W / (1 - bubble fraction).

    Source: Narayanan et al. 2021, arXiv:2104.04473, Sec. 2.2 (bubble = idle fraction of the step)."""
    return critical / (1 - bubble)


def exposed_seconds(*, comm, hidden_behind, overlap):
    """Communication left on the critical path: all of it ('none'), or what compute does not hide
    ('overlap': max(0, comm - compute it runs beside), as DDP/FSDP overlap with backward); ``overlap`` may
    also be a condition (a bool, or a mask over a plan's layouts)."""
    if isinstance(overlap, str):
        overlap = overlap != "none"
    if overlap is False:
        return comm
    return where(overlap, maximum(comm - hidden_behind, 0), comm)


def utilisation(*, flops, seconds, devices, peak_flops):
    """FLOPs over what the devices could do in that time: F / (T N C). MFU with model FLOPs, HFU with
    model + recomputed FLOPs (Chowdhery et al. 2022, arXiv:2204.02311, App. B; Korthikanti et al. 2022)."""
    return flops / (seconds * devices * peak_flops)


def host_floor_seconds(*, micro_batches, layers, per_layer):
    """A stage's host-bound floor over the step: every micro-batch runs each of its layers' forward and
    backward no faster than ``per_layer`` (Python, kernel launches and synchronising collectives: work
    the GPU waits on when the kernels are small)."""
    return micro_batches * layers * per_layer


def framework_critical_seconds(*, critical, kernel_factor, floor):
    """The critical path as a framework runs it: its kernels take ``kernel_factor`` x the modelled GPU
    time, and no stage runs faster than its host-bound ``floor`` (:func:`host_floor_seconds`)."""
    return maximum(kernel_factor * critical, floor)
