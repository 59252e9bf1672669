"""The `cost4d` command line: one command per question, tables with units, --json for scripts."""

from __future__ import annotations

from typing import Annotated

import typer

from costmodel import options as o
from costmodel.errors import CostModelError
from costmodel.units import UnitSystem

app = typer.Typer(
    name="cost4d",
    help="What 4D-parallel training costs in memory, FLOPs, communication and time, with the formulas.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _layout(**fields):
    """A Layout from CLI values; a validation error names the flag."""
    from pydantic import ValidationError

    from costmodel.specs.layout import Layout

    try:
        return Layout(**fields)
    except ValidationError as err:
        first = err.errors()[0]
        if first["loc"]:
            flag = "--" + str(first["loc"][0]).replace("_", "-")
            raise CostModelError(f"{flag} {fields.get(first['loc'][0])!r}: {first['msg']}") from None
        raise CostModelError(first["msg"].removeprefix("Value error, ")) from None


def _layout_from(tokens, dp, fsdp, zero, tp, sp, pp, cp, shard_activations=0.0, reshard=True, mx=1, my=1,
                 **advanced):
    return _layout(tokens=tokens, dp=dp, fsdp=fsdp, zero=zero, tp=tp, sp=sp, pp=pp, cp=cp,
                   shard_activations=shard_activations, reshard_after_forward=reshard, mx=mx, my=my,
                   **_advanced(**advanced))


def _advanced(recompute="none", flash=True, schedule="1f1b", microbatches=None, chunks=1, cp_kind="ring",
              grad_accum=1) -> dict:
    """The transformer-training options as Layout fields (--recompute every:K -> every, K)."""
    fields = dict(flash=flash, schedule=schedule, microbatches=microbatches, chunks=chunks, cp_kind=cp_kind,
                  grad_accum=grad_accum, recompute=recompute)
    if recompute.startswith("every:"):
        count = recompute.removeprefix("every:")
        if not count.isdigit() or int(count) < 1:
            raise CostModelError(f"--recompute {recompute!r}: write every:K with K a positive integer")
        fields.update(recompute="every", recompute_layers=int(count))
    return fields


def _hsdp(hsdp_group, dp, fsdp):
    """--hsdp-group G on D data devices: fsdp = G, dp = D / G (D = dp x fsdp as given)."""
    if hsdp_group is None:
        return dp, fsdp
    data = dp * fsdp
    if hsdp_group < 1 or data % hsdp_group:
        raise CostModelError(f"--hsdp-group {hsdp_group} does not divide the {data} data-parallel devices "
                             "(--dp x --fsdp)")
    return data // hsdp_group, hsdp_group


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
def memory(
    model: o.ModelOpt,
    recipe: o.RecipeOpt = "cs336",
    tokens: o.TokensOpt = 0,
    dp: o.DpOpt = 1,
    fsdp: o.FsdpOpt = 1,
    zero: o.ZeroOpt = 3,
    tp: o.TpOpt = 1,
    sp: o.SpOpt = False,
    pp: o.PpOpt = 1,
    cp: o.CpOpt = 1,
    shard_activations: o.ShardActOpt = 0.0,
    reshard: o.ReshardOpt = True,
    recompute: o.RecomputeOpt = "none",
    flash: o.FlashOpt = True,
    schedule: o.ScheduleOpt = "1f1b",
    microbatches: o.MicroOpt = None,
    chunks: o.ChunksOpt = 1,
    cp_kind: o.CpKindOpt = "ring",
    hsdp_group: o.HsdpOpt = None,
    hardware: o.HardwareOpt = None,
    units: o.UnitsOpt = UnitSystem.si,
    as_json: o.JsonOpt = False,
    symbolic: o.SymbolicOpt = False,
) -> None:
    """Memory per device by component: weights, master, gradients, optimizer, activations.

    Example: cost4d memory --model xxl --fsdp 38 --tokens 4096 --shard-activations 0.5 --symbolic
    """
    from costmodel import report
    from costmodel.specs.load import load_hardware, load_model, load_recipe
    from costmodel.strategies.memory import memory_breakdown

    spec = load_model(model)
    rec = load_recipe(recipe)
    dp, fsdp = _hsdp(hsdp_group, dp, fsdp)
    lay = _layout_from(tokens, dp, fsdp, zero, tp, sp, pp, cp, shard_activations, reshard, recompute=recompute,
                       flash=flash, schedule=schedule, microbatches=microbatches, chunks=chunks, cp_kind=cp_kind)
    device = load_hardware(hardware or "h100-sxm")
    breakdown = memory_breakdown(spec, rec, lay)
    report.memory(spec, rec, lay, breakdown, device, fits=hardware is not None,
                  units=units, as_json=as_json, symbolic=symbolic)


@app.command()
def flops(
    model: o.ModelOpt,
    tokens: o.TokensOpt = 1,
    seq: int = typer.Option(None, help="Sequence length for the attention term (default: the model's)."),
    tp: o.TpOpt = 1,
    pp: o.PpOpt = 1,
    cp: o.CpOpt = 1,
    recompute: o.RecomputeOpt = "none",
    as_json: o.JsonOpt = False,
    symbolic: o.SymbolicOpt = False,
) -> None:
    """Forward and backward FLOPs per token and per step (matmuls, as FlopCounterMode counts).

    Model FLOPs (MFU's numerator) count no recomputation; with --recompute the hardware FLOPs
    (HFU's numerator) add the forward work done again in backward.
    """
    from costmodel import report
    from costmodel.specs.load import load_model
    from costmodel.strategies.flops import step_flops

    spec = load_model(model)
    if seq is not None and seq <= 0:
        raise CostModelError(f"--seq {seq}: must be positive")
    lay = _layout_from(tokens, 1, 1, 3, tp, False, pp, cp, recompute=recompute)
    report.flops(spec, lay, step_flops(spec, lay, seq), as_json=as_json, symbolic=symbolic)


@app.command()
def comm(
    model: o.ModelOpt,
    hardware: Annotated[str, typer.Option(help="Device name (see `cost4d hardware`) or a spec file.")],
    recipe: o.RecipeOpt = "cs336",
    tokens: o.TokensOpt = 0,
    dp: o.DpOpt = 1,
    fsdp: o.FsdpOpt = 1,
    zero: o.ZeroOpt = 3,
    tp: o.TpOpt = 1,
    sp: o.SpOpt = False,
    pp: o.PpOpt = 1,
    cp: o.CpOpt = 1,
    reshard: o.ReshardOpt = True,
    mx: o.MxOpt = 1,
    my: o.MyOpt = 1,
    schedule: o.ScheduleOpt = "1f1b",
    microbatches: o.MicroOpt = None,
    chunks: o.ChunksOpt = 1,
    cp_kind: o.CpKindOpt = "ring",
    hsdp_group: o.HsdpOpt = None,
    grad_accum: o.AccumOpt = 1,
    units: o.UnitsOpt = UnitSystem.si,
    as_json: o.JsonOpt = False,
    symbolic: o.SymbolicOpt = False,
) -> None:
    """Bytes each device sends per step in each collective, and the bandwidth-bound time.

    Example: cost4d comm --model xxl --hardware tpu-v5p --fsdp 16 --tp 4 --mx 2 --tokens 4096
    """
    from costmodel import report
    from costmodel.specs.load import load_hardware, load_model, load_recipe
    from costmodel.strategies.comm import timed_collectives

    spec = load_model(model)
    rec = load_recipe(recipe)
    dp, fsdp = _hsdp(hsdp_group, dp, fsdp)
    lay = _layout_from(tokens, dp, fsdp, zero, tp, sp, pp, cp, reshard=reshard, mx=mx, my=my, schedule=schedule,
                       microbatches=microbatches, chunks=chunks, cp_kind=cp_kind, grad_accum=grad_accum)
    device = load_hardware(hardware)
    rows = timed_collectives(spec, rec, lay, device)
    report.comm(spec, rec, lay, device, rows, units=units, as_json=as_json, symbolic=symbolic)


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
