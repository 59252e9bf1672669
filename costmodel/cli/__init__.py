"""The `cost4d` command line: one module per command group, each printing through ``costmodel.report``.

catalog.py: models, hardware | calc.py: memory, flops, comm | step.py: step | solve.py: solve, explain |
measure.py: import, validate, bench. Options are declared once in options.py and layout.py.
"""

from __future__ import annotations

import typer

from costmodel.errors import CostModelError

app = typer.Typer(
    name="cost4d",
    help="What 4D-parallel training costs in memory, FLOPs, communication and time, with the formulas.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _register() -> None:
    from costmodel.cli import calc, catalog, measure, solve, step

    for module in (catalog, calc):
        module.register(app)
    app.add_typer(solve.solve_app, name="solve")
    app.add_typer(solve.explain_app, name="explain")
    app.command("step")(step.step)
    measure.register(app)


_register()


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
