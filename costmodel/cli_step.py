"""`cost4d step`: predicted time per step, tokens/s, MFU and HFU, with the breakdown."""

from __future__ import annotations

from typing import Annotated

import typer

from costmodel import options as o
from costmodel.layout_options import with_layout


@with_layout("tokens", "dp", "fsdp", "zero", "tp", "sp", "pp", "cp", "recompute", "flash", "schedule",
             "microbatches", "chunks", "cp_kind", "grad_accum", "tp_ends")
def step(
    model: o.ModelOpt,
    hardware: Annotated[str, typer.Option(help="Device name or spec file (needs a step_model section).")],
    recipe: o.RecipeOpt = "cs336",
    overlap: Annotated[str, typer.Option(
        help="overlap: DDP/FSDP traffic hides behind backward compute (what frameworks do); none: it adds.")]
    = "overlap",
    as_json: o.JsonOpt = False,
    *,
    layout,
) -> None:
    """Predicted time per optimizer step: matmuls, memory-bound ops, collectives, pipeline bubble.

    Example: cost4d step --model llama3-70b --hardware h100-sxm --tp 8 --pp 4 --sp --fsdp 8
    --tokens 8192 --microbatches 16 --recompute selective
    """
    from costmodel.report import console, emit_json, table
    from costmodel.specs.load import load_hardware, load_model, load_recipe
    from costmodel.strategies.step import step_breakdown

    spec, rec, device = load_model(model), load_recipe(recipe), load_hardware(hardware)
    b = step_breakdown(spec, rec, layout, device, overlap)
    parts = {"matmul_s": b.matmul_s, "elementwise_s": b.elementwise_s, "tp_s": b.tp_s, "cp_s": b.cp_s,
             "p2p_s": b.p2p_s, "data_comm_s": b.data_comm_s, "data_exposed_s": b.data_exposed_s}
    payload = {"model": spec.name, "hardware": device.name, "devices": b.devices, "step_s": b.step_s,
               "tokens_per_step": b.global_tokens, "tokens_per_s": b.tokens_per_s, "mfu": b.mfu, "hfu": b.hfu,
               "bubble_fraction": b.bubble, "matmul_efficiency": b.matmul_efficiency, "overlap": overlap,
               "breakdown": parts, "step_model_source": device.step_model.source}
    if as_json:
        emit_json(payload)
        return
    out = console()
    t = table(f"{spec.name} on {b.devices} x {device.name}: one step", "part", ">seconds", "")
    notes = {"matmul_s": f"at {b.matmul_efficiency:.1%} of dense peak", "elementwise_s": "norms, softmax, ... (HBM)",
             "tp_s": "on the critical path", "cp_s": "on the critical path", "p2p_s": "pipeline sends",
             "data_comm_s": "DDP/FSDP traffic", "data_exposed_s": f"of which exposed ({overlap})"}
    for key, value in parts.items():
        if value:
            t.add_row(key.removesuffix("_s").replace("_", " "), f"{value:.4f}", notes[key])
    t.add_row("pipeline bubble", f"{b.bubble:.1%}", "of the step")
    t.add_row("[bold]step[/]", f"[bold]{b.step_s:.4f}[/]", "")
    out.print(t)
    out.print(f"{b.global_tokens:,} tokens per step -> {b.tokens_per_s:,.0f} tokens/s; MFU {b.mfu:.1%}, "
              f"HFU {b.hfu:.1%} (peak {b.peak_flops / 1e12:,.1f} TFLOP/s bf16 dense)")
    out.print(f"Step-model parameters: {device.step_model.source}")
