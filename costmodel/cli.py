"""The `cost4d` command line: one command per question, tables with units, --json for scripts."""

from __future__ import annotations

from typing import Annotated

import typer

from costmodel import options as o
from costmodel.errors import CostModelError
from costmodel.layout_options import MEMORY, with_layout
from costmodel.units import UnitSystem

app = typer.Typer(
    name="cost4d",
    help="What 4D-parallel training costs in memory, FLOPs, communication and time, with the formulas.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.command()
def models(as_json: o.JsonOpt = False) -> None:
    """List the built-in models with their parameter counts."""
    from costmodel import catalog_report

    catalog_report.models(as_json)


@app.command()
def hardware(as_json: o.JsonOpt = False) -> None:
    """List the shipped device specs (peak FLOP/s, HBM, network levels)."""
    from costmodel import catalog_report

    catalog_report.hardware(as_json)


@app.command()
@with_layout(*MEMORY)
def memory(
    model: o.ModelOpt,
    recipe: o.RecipeOpt = "cs336",
    hardware: o.HardwareOpt = None,
    units: o.UnitsOpt = UnitSystem.si,
    as_json: o.JsonOpt = False,
    symbolic: o.SymbolicOpt = False,
    *,
    layout,
) -> None:
    """Memory per device by component: weights, master, gradients, optimizer, activations.

    Example: cost4d memory --model xxl --fsdp 38 --tokens 4096 --shard-activations 0.5 --symbolic
    """
    from costmodel import report
    from costmodel.specs.load import load_hardware, load_model, load_recipe
    from costmodel.strategies.memory import memory_breakdown

    spec, rec = load_model(model), load_recipe(recipe)
    device = load_hardware(hardware or "h100-sxm")
    breakdown = memory_breakdown(spec, rec, layout)
    report.memory(spec, rec, layout, breakdown, device, fits=hardware is not None,
                  units=units, as_json=as_json, symbolic=symbolic)


@app.command()
@with_layout("tokens", "tp", "pp", "cp", "recompute", tokens=1)
def flops(
    model: o.ModelOpt,
    seq: int = typer.Option(None, help="Sequence length for the attention term (default: the model's)."),
    as_json: o.JsonOpt = False,
    symbolic: o.SymbolicOpt = False,
    *,
    layout,
) -> None:
    """Forward and backward FLOPs per token and per step (matmuls, as FlopCounterMode counts).

    Model FLOPs (MFU's numerator) count no recomputation; with --recompute the hardware FLOPs
    (HFU's numerator) add the forward work done again in backward.
    """
    from costmodel import report_calc as report
    from costmodel.specs.load import load_model
    from costmodel.strategies.flops import step_flops

    spec = load_model(model)
    if seq is not None and seq <= 0:
        raise CostModelError(f"--seq {seq}: must be positive")
    report.flops(spec, layout, step_flops(spec, layout, seq), as_json=as_json, symbolic=symbolic)


@app.command()
@with_layout("tokens", "dp", "fsdp", "zero", "tp", "sp", "pp", "cp", "reshard", "mx", "my", "schedule",
             "microbatches", "chunks", "cp_kind", "hsdp_group", "grad_accum", "tp_ends")
def comm(
    model: o.ModelOpt,
    hardware: Annotated[str, typer.Option(help="Device name (see `cost4d hardware`) or a spec file.")],
    recipe: o.RecipeOpt = "cs336",
    units: o.UnitsOpt = UnitSystem.si,
    as_json: o.JsonOpt = False,
    symbolic: o.SymbolicOpt = False,
    *,
    layout,
) -> None:
    """Bytes each device sends per step in each collective, and the bandwidth-bound time.

    Example: cost4d comm --model xxl --hardware tpu-v5p --fsdp 16 --tp 4 --mx 2 --tokens 4096
    """
    from costmodel import report_calc as report
    from costmodel.specs.load import load_hardware, load_model, load_recipe
    from costmodel.strategies.comm import timed_collectives

    spec, rec, device = load_model(model), load_recipe(recipe), load_hardware(hardware)
    rows = timed_collectives(spec, rec, layout, device)
    report.comm(spec, rec, layout, device, rows, units=units, as_json=as_json, symbolic=symbolic)


def _register_subcommands() -> None:
    from costmodel.cli_solve import explain_app, solve_app

    from costmodel.cli_measure import register
    from costmodel.cli_step import step

    app.add_typer(solve_app, name="solve")
    app.add_typer(explain_app, name="explain")
    app.command("step")(step)
    register(app)


_register_subcommands()


def main() -> None:
    """Entry point: click's own usage errors and ours both end as one line and exit code 2."""
    try:  # typer >= 0.22 carries its own copy of click
        from typer._click import exceptions as click_errors
    except ImportError:
        from click import exceptions as click_errors

    try:
        code = app(standalone_mode=False)
    except CostModelError as err:
        typer.echo(f"error: {err}", err=True)
        raise SystemExit(2) from None
    except click_errors.ClickException as err:
        typer.echo(f"error: {err.format_message()}", err=True)
        raise SystemExit(err.exit_code) from None
    except getattr(click_errors, "Abort", ()):  # Ctrl-C at a prompt
        raise SystemExit(1) from None
    raise SystemExit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
