"""`cost4d plot`: figures of what the other commands compute (matplotlib, the `cost4d[plot]` extra)."""

from __future__ import annotations

from typing import Annotated

import typer

from costmodel.cli import options as o
from costmodel.cli.layout import MEMORY, with_layout
from costmodel.inputs.numbers import whole
from costmodel.units import UnitSystem

plot_app = typer.Typer(help="Figures (PNG or SVG; needs matplotlib: pip install 'cost4d[plot]'): the pipeline "
                       "schedule's timeline, memory per stage. `cost4d plan --plot` draws the planner's search.",
                       no_args_is_help=True)

FigureOpt = Annotated[str, typer.Option("--out", metavar="FILE.png|svg", help="Where to write the figure.")]


@plot_app.command("pipeline")
def pipeline_cmd(
    out: FigureOpt,
    pp: Annotated[int, typer.Option("--pp", parser=whole(1, 256), metavar="N", help="Pipeline stages.")] = 4,
    microbatches: Annotated[int, typer.Option(parser=whole(1, 1024), metavar="N", help="Micro-batches per step.")] = 8,
    schedule: Annotated[str, typer.Option(metavar="gpipe|1f1b", help="The schedule to play out.")] = "1f1b",
) -> None:
    """The schedule played out op by op: each stage's forwards and backwards, and the bubble they leave
    (equal to the bubble formula; tests/test_timeline.py).

    Example: cost4d plot pipeline --pp 4 --microbatches 8 --schedule 1f1b --out 1f1b.png
    """
    from costmodel.report.plot import check_path, pipeline_timeline
    from costmodel.solve.timeline import idle_fraction, timeline

    check_path(out, "--out")
    ops = timeline(schedule, pp, microbatches)
    bubble = idle_fraction(ops, pp)
    pipeline_timeline(ops, pp, schedule, bubble, out)
    typer.echo(f"{schedule}, {pp} stages, {microbatches} micro-batches: bubble {bubble:.2%} of the step -> {out}")


@plot_app.command("memory")
@with_layout(*MEMORY)
def memory_cmd(
    model: o.ModelOpt,
    out: FigureOpt,
    recipe: o.RecipeOpt = None,
    framework: o.FrameworkOpt = "exact",
    units: o.UnitsOpt = UnitSystem.si,
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
    cost = evaluate_layout(spec, rec, layout, framework=None if frame.exact else frame)
    stage_memory(cost, out, units)
    typer.echo(f"{spec.name}: memory per device of {len(cost.stages)} stage(s) -> {out}")


def register(app) -> None:
    app.add_typer(plot_app, name="plot")
