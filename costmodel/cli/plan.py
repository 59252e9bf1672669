"""`cost4d plan`: the best 4D layouts for a model, a cluster and a global batch."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from costmodel.cli import options as o
from costmodel.inputs import arguments
from costmodel.inputs.numbers import real, whole
from costmodel.units import UnitSystem


#: the search's options, shared by `cost4d plan` and `cost4d plot plan`
StepHardwareOpt = Annotated[str, typer.Option("--hardware", metavar="NAME|FILE",
                                              help="Device name or spec file (needs a step_model).")]
GpusOpt = Annotated[int, typer.Option("--gpus", parser=whole(*arguments.GPUS), metavar="N", help="Devices to lay out.")]
GlobalBatchOpt = Annotated[int, typer.Option("--global-batch", parser=whole(*arguments.GLOBAL_BATCH), metavar="TOKENS",
                                             help="Tokens per optimizer step (all replicas, all micro-batches).")]
SeqOpt = Annotated[Optional[int], typer.Option("--seq", parser=whole(*arguments.SEQ), metavar="TOKENS",
                                               help="Sequence length of every layout (default: the model's).")]
PrecisionOpt = Annotated[str, typer.Option("--precision", metavar="bf16|fp8",
                                           help="Matmul precision, as in `cost4d step`.")]
HeadroomOpt = Annotated[float, typer.Option("--headroom", parser=real(*arguments.HEADROOM), metavar="FRACTION",
                                            help="Fraction of HBM to leave free (e.g. 0.05).")]
#: what counts as fitting (--memory): the predicted peak, or the high end of the framework's band too
FITS = ("likely", "sure")
MemoryOpt = Annotated[str, o.choices(FITS, "WHICH", help=(
    "Which layouts count as fitting: likely (the predicted peak fits; a row says 'may not fit' where the "
    "framework's fitted band reaches past the HBM) or sure (the band's high end fits too: every row 'fits')."))]


def search(model: str, hardware: str, gpus: int, global_batch: int, seq, recipe, framework: str, precision: str,
           kernels,
           top: int, headroom: float, document: int | None = None, memory: str = "likely", split: str | None = None):
    """(framework profile, model spec, recipe, device, sequence, the plan, its header): the search both
    commands run, with one line for a model without a sequence length or a cluster where nothing fits."""
    from costmodel.errors import CostModelError
    from costmodel.solve.plan import plan as run
    from costmodel.specs.load import load_hardware, load_run, profile_name

    if memory not in FITS:
        raise CostModelError(f"--memory {memory[:40]!r}: use {' or '.join(FITS)}")
    frame, spec, rec = load_run(model, recipe, framework)
    device = load_hardware(hardware)
    length = seq or getattr(spec, "seq_len", None)
    if not length:
        raise CostModelError(f"{spec.name} has no sequence length: give --seq")
    result = run(spec, rec, device, devices=gpus, global_tokens=global_batch, seq=length,
                 framework=frame, precision=precision, kernels=kernels, top=top, headroom=headroom,
                 document=document, memory=memory, split=split)
    if not result.best:
        hint = ("; its stages take whole, equal layer counts: --split ends counts the embedding and the loss as "
                "layers too" if frame is not None and frame.whole_chunks and split not in (None, "ends") else "")
        raise CostModelError(f"no layout of {gpus:,} x {device.name} fits {spec.name} with {global_batch:,} tokens "
                             f"per step: " + "; ".join(f"{n:,} rejected by {r}" for r, n in result.rejected.items())
                             + hint)
    from costmodel.cost.overlap import data_overlap_source

    header = {"model": spec.name, "hardware": device.name, "devices": gpus, "global_tokens": global_batch, "seq": length,
              "recipe": rec.name, "framework": profile_name(frame), "precision": precision,
              "kernels": kernels if kernels is not None else (frame.kernels if frame is not None else "fused"),
              "data_overlap_source": data_overlap_source(frame)}
    return frame, spec, rec, device, length, result, header


def plan(
    model: o.ModelOpt,
    hardware: StepHardwareOpt,
    gpus: GpusOpt,
    global_batch: GlobalBatchOpt,
    seq: SeqOpt = None,
    recipe: o.RecipeOpt = None,
    framework: o.FrameworkOpt = "exact",
    precision: PrecisionOpt = "bf16",
    kernels: o.KernelsOpt = None,
    top: Annotated[int, typer.Option(parser=whole(*arguments.TOP), metavar="K", help="How many layouts to print.")] = 5,
    headroom: HeadroomOpt = 0.0,
    memory: MemoryOpt = "likely",
    document: o.DocumentOpt = None,
    split: o.SplitOpt = None,
    explain: Annotated[Optional[int], typer.Option(parser=whole(1, 1000), metavar="N",
                                                   help="Print the N-th layout's full step breakdown too.")] = None,
    plot: Annotated[Optional[str], typer.Option(metavar="FILE.png|svg",
        help="Also draw tokens/s against peak memory of every feasible layout, the Pareto front marked "
        "(needs matplotlib: pip install matplotlib).")] = None,
    units: o.UnitsOpt = UnitSystem.si,
    as_json: o.JsonOpt = False,
) -> None:
    """Search every layout that fits (data x FSDP/HSDP x TP+SP x PP schedules x CP x EP x micro-batch x recompute).

    Ranked by predicted tokens/s; each row's `cost4d step` command reproduces it.

    Example: cost4d plan --model llama3-70b --hardware h100-sxm --gpus 512 --global-batch 4194304 --seq 8192
    """
    from costmodel.errors import CostModelError
    from costmodel.report.plan import plan as report
    from costmodel.solve.plan import command, why

    if plot is not None:
        from costmodel.report.plot import check_path

        check_path(plot)
    if explain is not None and explain > top:
        raise CostModelError(f"--explain {explain} is beyond --top {top}")
    frame, spec, rec, device, length, result, header = search(model, hardware, gpus, global_batch, seq, recipe,
                                                              framework, precision, kernels, top, headroom, document,
                                                              memory, split)
    # the names or files the user gave: a profile or recipe file is named by its path, not its name field
    commands = [command(model, hardware, p.layout, recipe=recipe if recipe is not None else rec.name,
                        framework=None if frame is None else framework, precision=precision, kernels=kernels)
                for p in result.best]
    reason = why(result.best[0], result.best[1], units) if len(result.best) > 1 else None
    details = [_details(spec, rec, device, p, frame, precision, kernels) for p in result.best]
    report(result, commands, header, reason=reason, as_json=as_json, details=details,
           cp_in_data=frame is not None and frame.cp_in_data, units=units)
    if plot is not None:
        from costmodel.report.plot import plan_cloud

        plan_cloud(result, header, plot)
    if explain is not None and not as_json:
        from costmodel.cost.evaluate import evaluate_layout
        from costmodel.report.step import step as step_report
        from costmodel.specs.layout import Layout

        chosen = result.best[explain - 1].layout
        cost = evaluate_layout(spec, rec, Layout(**chosen), device, precision=precision,
                               framework=frame, kernels=kernels)
        from costmodel.report.common import output_width
        from costmodel.report.tables import command_lines

        typer.echo(f"\n# {explain}\n" + "\n".join(command_lines(commands[explain - 1], output_width())))
        step_report(cost, device, as_json=False)


def _details(spec, rec, device, planned, frame, precision, kernels) -> dict:
    """What one layout at a time adds to a row: the phase that peaks, the memory verdict against the
    fit's band, and the step's range (the same numbers `memory` and `step` print)."""
    from costmodel.cost.evaluate import evaluate_layout
    from costmodel.report.memory import verdict
    from costmodel.specs.layout import Layout

    cost = evaluate_layout(spec, rec, Layout(**planned.layout), device, precision=precision,
                           framework=frame, kernels=kernels)
    low_high = cost.step_range
    capacity = device.hbm.usable_bytes or device.hbm.capacity_bytes
    return {"peak_phase": cost.heaviest.reserved_phase, "memory_verdict": verdict(cost, capacity),
            "step_s_low": low_high[0] if low_high else None, "step_s_high": low_high[1] if low_high else None}


def register(app) -> None:
    app.command("plan")(plan)
