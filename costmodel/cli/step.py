"""`cost4d step`: predicted time per step, tokens/s, MFU and HFU, with the breakdown."""

from __future__ import annotations

from typing import Annotated

import typer

from costmodel.cli import options as o
from costmodel.cli.layout import MEMORY, with_layout


@with_layout(*MEMORY, "checkpoint", "mx", "my", "placement", "document")
def step(
    model: o.ModelOpt,
    hardware: Annotated[str, typer.Option(metavar="NAME|FILE",
                                          help="Device name or spec file (needs a step_model section).")],
    recipe: o.RecipeOpt = None,
    framework: o.FrameworkOpt = "exact",
    overlap: Annotated[str | None, typer.Option(
        "--data-overlap", metavar="overlap|none", show_default=False, help="overlap: DDP/FSDP traffic hides behind "
        "backward compute; none: it adds. Default: the framework's own (megatron: none, Megatron-core's "
        "overlap_grad_reduce is off unless asked; deepspeed: none below ZeRO-3, its overlap_comm; nanotron: none, as its "
        "runs fit; torchtitan and exact: overlap). A framework's fitted time (nanotron on h100-sxm) sets its own: none.")]
    = None,
    tp_overlap: Annotated[str, typer.Option(
        metavar="none|overlap", help="TP collectives: on the critical path (none; Megatron's default) or overlapped "
        "with the matmuls they feed (async TP, Transformer Engine userbuffers): only what exceeds them shows.")]
    = "none",
    p2p_overlap: Annotated[str, typer.Option(
        metavar="none|overlap", help="Pipeline sends: on the critical path (none) or hidden behind the next "
        "micro-batch's compute (overlap).")] = "none",
    cp_overlap: Annotated[str | None, typer.Option(
        metavar="overlap|none", show_default=False, help="Context parallelism's traffic: ring attention's K/V passes "
        "hidden behind the attention blocks they feed, only what exceeds them shows (overlap), or on the critical "
        "path (none). Default under a framework: overlap for ring, allgather and alltoall (Transformer Engine's P2P "
        "ring and torch's ring attention overlap each block with the next pass), none for a2a (Ulysses); without "
        "one, none (as h100-sxm's step fraction was fitted).")] = None,
    precision: Annotated[str, typer.Option(
        metavar="bf16|fp8", help="Matmul precision: bf16, or fp8 linear layers (per-tensor scaling, at the spec's "
        "fitted fp8_efficiency; attention stays bf16). MFU is then against the fp8 peak, as NVIDIA reports it.")]
    = "bf16",
    fp8_casts: Annotated[str, typer.Option(
        metavar="te|fused", help="With --precision fp8, the casts to fp8: te (Transformer Engine's cast and transpose "
        "kernels, counted as HBM traffic: NeMo, Megatron, torchtitan's float8) or fused (into the neighbouring "
        "kernels: XLA, MaxText).")] = "te",
    kernels: o.KernelsOpt = None,
    attention_flops: Annotated[str, typer.Option(
        metavar="full|causal", help="How MFU counts attention's Q K^T and A V: full s x s (PaLM, Megatron; what "
        "FlopCounterMode counts) or causal (half: Llama 3 and many reports). The time model is the same.")] = "full",
    attention_kernel: o.AttentionKernelOpt = None,
    as_json: o.JsonOpt = False,
    *,
    layout,
) -> None:
    """Predicted time per optimizer step: matmuls, memory-bound ops, collectives, pipeline bubble.

    Collective times come from the same time model as `cost4d comm` (calibrated where the spec is).
    Example: cost4d step --model llama3-70b --hardware h100-sxm --tp 8 --pp 4 --sp --fsdp 8
    --tokens 8192 --microbatches 16 --recompute selective
    """
    from costmodel.errors import CostModelError
    from costmodel.report.step import step as report

    if attention_flops not in ("full", "causal"):
        from costmodel.inputs.files import shown

        raise CostModelError(f"--attention-flops {shown(attention_flops)}: use full or causal")

    cost, device = step_cost(model, hardware, recipe, framework, layout, overlap=overlap, precision=precision,
                             tp_overlap=tp_overlap, p2p_overlap=p2p_overlap, attention_kernel=attention_kernel,
                             cp_overlap=cp_overlap,
                             fp8_casts=fp8_casts, kernels=kernels)
    report(cost, device, as_json=as_json, convention=attention_flops)


def step_cost(model: str, hardware: str, recipe, framework: str, layout, **options):
    """(cost with its step time, device): the run `step` and `plot roofline` evaluate, with one line for
    --tokens 0 or a device without a step model."""
    from costmodel.cost.evaluate import evaluate_layout
    from costmodel.errors import CostModelError
    from costmodel.specs.load import load_hardware, load_run

    frame, spec, rec = load_run(model, recipe, framework)
    device = load_hardware(hardware)
    if layout.tokens == 0:
        raise CostModelError("--tokens must be positive for a step time (micro-batch x sequence)")
    if device.step_model is None:
        raise CostModelError(f"{device.name} has no step_model section (matmul efficiency, achieved HBM bandwidth)")
    return evaluate_layout(spec, rec, layout, device, framework=frame, **options), device


def register(app) -> None:
    app.command("step")(step)
