"""`cost4d plot`: figures of what the other commands compute (matplotlib, the `cost4d[plot]` extra)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from costmodel.cli import options as o
from costmodel.specs import SCHEDULES
from costmodel.cli.layout import MEMORY, with_batch_question, with_layout
from costmodel.cli.measure import with_log_hints
from costmodel.cli.plan import (GlobalBatchOpt, GpusOpt, HeadroomOpt, MemoryOpt, PrecisionOpt, SeqOpt, StepHardwareOpt,
                                search)
from costmodel.cli.solve import FSDP_SOLVE
from costmodel.inputs.numbers import whole
from costmodel.units import UnitSystem

plot_app = typer.Typer(help="Figures (PNG or SVG; needs matplotlib: pip install matplotlib): the pipeline "
                       "schedule's timeline, memory per stage, memory vs FSDP shards, the compute-bound batch, the step on a roofline, "
                       "predicted vs measured collectives, the planner's layouts.", no_args_is_help=True)

FigureOpt = Annotated[str, typer.Option("--out", metavar="FILE.png|svg", help="Where to write the figure.")]
PlotJsonOpt = Annotated[bool, typer.Option("--json", help="After writing the figure, print JSON: the file and the "
                                           "numbers it draws (README, JSON output).")]
#: stage x micro-batch x chunk passes a timeline draws at most: beyond, its bars are narrower than a pixel
TIMELINE_PASSES = 16_384


@plot_app.command("pipeline")
def pipeline_cmd(
    out: FigureOpt,
    pp: Annotated[int, typer.Option("--pp", parser=whole(1, 256), metavar="N", help="Pipeline stages.")] = 4,
    microbatches: Annotated[int, typer.Option(parser=whole(1, 1024), metavar="N", help="Micro-batches per step.")] = 8,
    schedule: Annotated[str, o.choices(SCHEDULES, "SCHEDULE", help="The schedule to play out: "
                                       + ", ".join(SCHEDULES) + ".")] = "1f1b",
    chunks: Annotated[int, typer.Option(parser=whole(1, 64), metavar="V",
                                        help="Model chunks per device (--schedule interleaved).")] = 1,
    as_json: PlotJsonOpt = False,
) -> None:
    """The schedule played out op by op: each stage's forwards and backwards (ZB-H1: input- and weight-gradient
    passes), and the bubble they leave (equal to the pipeline model's; tests/test_timeline.py).

    Example: cost4d plot pipeline --pp 4 --microbatches 8 --schedule interleaved --chunks 2 --out interleaved.png
    """
    from costmodel.errors import CostModelError
    from costmodel.report.plot import check_path, pipeline_timeline
    from costmodel.solve.timeline import idle_fraction, timeline

    check_path(out, "--out")
    if pp * microbatches * chunks > TIMELINE_PASSES:
        raise CostModelError(f"--pp {pp} x --microbatches {microbatches} x --chunks {chunks} = "
                             f"{pp * microbatches * chunks:,} forward passes: a timeline draws at most "
                             f"{TIMELINE_PASSES:,} (beyond, a pass is narrower than a pixel)")
    ops = timeline(schedule, pp, microbatches, chunks=chunks)
    bubble = idle_fraction(ops, pp)
    pipeline_timeline(ops, pp, schedule, bubble, out, chunks=chunks)
    _done(as_json, out, "pipeline", f"{schedule}" + (f" (v = {chunks})" if chunks > 1 else "") + f", {pp} stages, "
          f"{microbatches} micro-batches: bubble {bubble:.2%} of the step",
          lambda d: d.pipeline(ops, pp, schedule, microbatches, chunks, bubble))


@plot_app.command("memory")
@with_layout(*MEMORY)
def memory_cmd(
    model: o.ModelOpt,
    out: FigureOpt,
    recipe: o.RecipeOpt = None,
    framework: o.FrameworkOpt = "exact",
    units: o.UnitsOpt = UnitSystem.si,
    as_json: PlotJsonOpt = False,
    *,
    layout,
) -> None:
    """Memory per device by component for every pipeline stage, stacked (what `cost4d memory` prints).

    Example: cost4d plot memory --model llama3-70b --pp 8 --tp 8 --sp --tokens 8192 --microbatches 16 --out stages.png
    """
    from costmodel.cost.evaluate import evaluate_layout
    from costmodel.report.plot import check_path, stage_memory
    from costmodel.specs.load import load_run

    check_path(out, "--out")
    frame, spec, rec = load_run(model, recipe, framework)
    cost = evaluate_layout(spec, rec, layout, framework=frame)
    stage_memory(cost, out, units, _described(layout, frame))
    _done(as_json, out, "memory", f"{spec.name}: memory per device of {len(cost.stages)} stage(s)",
          lambda d: d.stage_memory(cost))


@plot_app.command("fsdp")
@with_layout(*FSDP_SOLVE, fixed={"fsdp": 2})
def fsdp_cmd(
    model: o.ModelOpt,
    out: FigureOpt,
    limit: o.LimitOpt = None,
    hardware: o.HardwareOpt = None,
    recipe: o.RecipeOpt = None,
    framework: o.FrameworkOpt = "exact",
    units: o.UnitsOpt = UnitSystem.si,
    as_json: PlotJsonOpt = False,
    *,
    layout,
) -> None:
    """Memory per device against N_FSDP from 2 to 4x the answer, the limit (--limit, else the device's
    usable HBM) and the smallest N under it (what `cost4d solve fsdp` answers).

    Example: cost4d plot fsdp --model xxl --limit 95GB --out fsdp.png
    """
    from costmodel.cli.solve import _fsdp_answer, _limit
    from costmodel.report.plot import check_path, fsdp_memory
    from costmodel.solve.fsdp import admissible, memory_at
    from costmodel.specs.load import load_run

    check_path(out, "--out")
    frame, spec, rec = load_run(model, recipe, framework)
    limit_bytes, source = _limit(limit, hardware)
    answer = _fsdp_answer(spec, rec, layout, limit_bytes, source, frame).n_fsdp
    count, admitted = admissible(spec, layout, 4 * answer)  # from 2: the FSDP regime; with --ep, N the experts admit
    shards = sorted({answer, *(n for n in map(admitted, range(count)) if _doubling(n) or _doubling(n / layout.ep))})
    need = [memory_at(spec, rec, layout, n, frame) for n in shards]
    fsdp_memory(shards, need, limit_bytes, answer, spec.name, source, units, out,
                f"recipe {rec.name}; " + _described(layout.model_copy(update={"fsdp": 1}), frame).replace(
                    "one device", "no other parallel axis", 1))
    _done(as_json, out, "fsdp", f"{spec.name}: memory per device for N_FSDP {shards[0]} to {shards[-1]}, smallest "
          f"under {source}: {answer}", lambda d: d.fsdp_memory(shards, need, limit_bytes, answer, source))


@plot_app.command("batch")
@with_batch_question
def batch_cmd(model: o.ModelOpt, out: FigureOpt, as_json: PlotJsonOpt = False, *, question) -> None:
    """T_math against T_comms per MLP layer as the global batch grows, the compute-bound crossover marked
    (what `cost4d solve batch` answers; Scaling Book conventions).

    Example: cost4d plot batch --model xxl --hardware tpu-v5p --fsdp 16 --tp 4 --mx 2 --out batch.png
    """
    from costmodel.report.plot import batch_crossover, check_path
    from costmodel.solve.batch import solve_batch
    from costmodel.solve.crossover import curves

    check_path(out, "--out")
    spec, device, problem = question
    answer = solve_batch(problem)
    drawn = curves([answer])
    batch_crossover(drawn, f"{spec.name} on {device.name}", out)
    _done(as_json, out, "batch", f"{spec.name} on {device.name}, overlap {problem.overlap}: "
          + (answer.verdict if answer.any_batch else
             f"compute-bound from B = {answer.global_batch:,.0f} tokens ({answer.per_device_batch:,.1f} per device)"),
          lambda d: d.batch_crossover(drawn))


@plot_app.command("roofline")
@with_layout(*MEMORY, "checkpoint", "mx", "my", "placement", "document")
def roofline_cmd(
    model: o.ModelOpt,
    hardware: Annotated[str, typer.Option(metavar="NAME|FILE", help="Device name or spec file (needs a step_model).")],
    out: FigureOpt,
    recipe: o.RecipeOpt = None,
    framework: o.FrameworkOpt = "exact",
    precision: PrecisionOpt = "bf16",
    attention_kernel: o.AttentionKernelOpt = None,
    as_json: PlotJsonOpt = False,
    *,
    layout,
) -> None:
    """The step's matmuls, flash attention, elementwise ops, the optimizer step and each axis's collectives on the device's roofline (peak FLOP/s,
    HBM and network bandwidths): FLOP per byte each moves against FLOP/s, log-log (what `cost4d step` times).

    Example: cost4d plot roofline --model llama3-70b --hardware h100-sxm --tp 8 --pp 4 --sp --fsdp 8 --tokens 8192
    --microbatches 16 --out roofline.png
    """
    from costmodel.cli.step import step_cost
    from costmodel.report.common import layout_text
    from costmodel.report.plot import check_path, roofline
    from costmodel.solve.roofline import roofline as place

    check_path(out, "--out")
    cost, device = step_cost(model, hardware, recipe, framework, layout, precision=precision,
                             attention_kernel=attention_kernel)
    spec = cost.shape
    placed = place(cost, device)
    roofline(placed, f"{spec.name} on {device.name}: {layout_text(layout, cost.point.cp_in_data)}, {layout.tokens:,} tokens per micro-batch"
             f", m = {layout.m}; recipe {cost.recipe.name}", out)
    slowest = min(placed.marks, key=lambda m: m.flops_per_s)
    _done(as_json, out, "roofline", f"{spec.name} on {device.name}: the step at {placed.step_flops_per_s / 1e12:,.0f} "
          f"TFLOP/s per device of {placed.peak_flops / 1e12:,.0f}; the longest part before overlap: {slowest.name} "
          f"({slowest.seconds:,.3f} s)", lambda d: d.roofline(placed))


@plot_app.command("validate")
@with_log_hints
def validate_cmd(
    results: Annotated[list[Path], typer.Argument(
        metavar="FILE", help="cost4d results JSON or nccl-tests logs; shipped:FOLDER for the logs that ship with cost4d.")],
    out: FigureOpt,
    hardware: o.HardwareOpt = None,
    placement: Annotated[str, typer.Option(metavar="out-of-place|in-place|both",
                                           help="Which of the log's two timings to draw.")] = "out-of-place",
    as_json: PlotJsonOpt = False,
    *,
    hints,
) -> None:
    """Predicted against measured time per message size, one series per collective and algorithm (the rows
    `cost4d validate` prints).

    Example: cost4d plot validate shipped:h100-8gpu-together-nccl-tests --hardware h100-sxm --out validate.png
    """
    from costmodel.cli.measure import check_validate_options, load_measurements, say_notes
    from costmodel.errors import CostModelError
    from costmodel.measure.validate import check_networked, compare, median_abs_error
    from costmodel.report.plot import check_path, validation
    from costmodel.specs.load import load_hardware

    check_validate_options(hardware, placement)
    check_path(out, "--out")
    spec = load_hardware(hardware)
    docs = load_measurements(results, hints)
    check_networked(docs)
    rows = compare(docs, spec, placement)
    if not rows:
        raise CostModelError(f"the measurements have no {placement} rows above 0 bytes to compare")
    say_notes(docs, spec)
    validation(rows, f"{spec.name}, nccl-tests {placement}", out)
    error = median_abs_error(rows)
    _done(as_json, out, "validate", f"{spec.name}: {len(rows)} rows, median |error| over sizes >= 1 MiB "
          + (f"{error:.1f}%" if error is not None else "-"), lambda d: d.validation(rows, spec.name, placement))


@plot_app.command("plan")
def plan_cmd(
    model: o.ModelOpt,
    hardware: StepHardwareOpt,
    gpus: GpusOpt,
    global_batch: GlobalBatchOpt,
    out: FigureOpt,
    seq: SeqOpt = None,
    recipe: o.RecipeOpt = None,
    framework: o.FrameworkOpt = "exact",
    precision: PrecisionOpt = "bf16",
    headroom: HeadroomOpt = 0.0,
    memory: MemoryOpt = "likely",
    split: o.SplitOpt = None,
    as_json: PlotJsonOpt = False,
) -> None:
    """Tokens/s against peak memory of every feasible layout, the Pareto front highlighted (the figure of
    `cost4d plan --plot`, without the table).

    Example: cost4d plot plan --model llama3-8b --hardware h100-sxm --gpus 16 --global-batch 1048576 --seq 8192
    --out plan.png
    """
    from costmodel.report.plot import check_path, plan_cloud

    check_path(out, "--out")
    _, spec, _, device, _, result, header = search(model, hardware, gpus, global_batch, seq, recipe, framework,
                                                   precision, None, 1, headroom, memory=memory, split=split)
    plan_cloud(result, header, out)
    _done(as_json, out, "plan", f"{spec.name} on {gpus:,} x {device.name}: {result.feasible:,} feasible layouts, the "
          f"best {result.best[0].tokens_per_s:,.0f} tokens/s", lambda d: d.plan_cloud(result))


def _done(as_json: bool, out: str, kind: str, summary: str, data) -> None:
    """The figure's one line, or with --json its record: the file, the line and ``data(plot_data)``, the numbers drawn."""
    if not as_json:
        typer.echo(f"{summary} -> {out}")
        return
    from costmodel.report import plot_data

    plot_data.emit(out, kind, summary, data(plot_data))


def register(app) -> None:
    app.add_typer(plot_app, name="plot")


def _doubling(n: float) -> bool:
    """Whether n is a power of two (1, 2, 4, ...): the shard counts a memory-vs-N plot marks."""
    return n >= 1 and n == int(n) and int(n) & (int(n) - 1) == 0


def _described(layout, frame) -> str:
    """A figure's layout line: the axes, the tokens, the framework profile."""
    from costmodel.report.common import layout_text
    from costmodel.specs.load import profile_name

    folded = frame is not None and frame.cp_in_data
    return f"{layout_text(layout, folded)}; {layout.tokens:,} tokens per micro-batch; framework {profile_name(frame)}"
