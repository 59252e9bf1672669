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
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            typer.echo(f"cost4d {version('cost4d')}")
        except PackageNotFoundError:
            typer.echo("cost4d (not installed: run from a checkout)")
        raise typer.Exit()


@app.callback()
def _app(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                      help="Print the version and exit.")) -> None:
    """What 4D-parallel training costs in memory, FLOPs, communication and time, with the formulas."""


def _register() -> None:
    from costmodel.cli import calc, catalog, homework, measure, plan, plot, solve, step

    for module in (catalog, calc):
        module.register(app)
    app.add_typer(solve.solve_app, name="solve")
    app.add_typer(solve.explain_app, name="explain")
    app.command("step")(step.step)
    app.command("plan")(plan.plan)
    measure.register(app)
    homework.register(app)
    plot.register(app)


_register()


def main() -> None:
    """Entry point. Bad input of any kind ends as one line on stderr and exit code 2; Ctrl-C and SIGTERM
    end quietly (130, 143) after ``--out`` files are cleaned up; anything else is a bug, reported as
    one line with exit code 70 (``COST4D_DEBUG=1`` shows the traceback)."""
    import os
    import signal

    try:  # typer >= 0.22 carries its own copy of click
        from typer._click import exceptions as click_errors
    except ImportError:
        from click import exceptions as click_errors

    signal.signal(signal.SIGTERM, _terminated)
    try:
        code = app(standalone_mode=False)
    except CostModelError as err:
        _fail(str(err), 2)
    except click_errors.NoArgsIsHelpError as err:  # help was printed (rich prints it itself)
        message = err.format_message()
        _fail(message, err.exit_code, prefix="") if message.strip() else _fail(None, err.exit_code)
    except click_errors.ClickException as err:
        _fail(err.format_message().replace("Value error, ", ""), err.exit_code)
    except (KeyboardInterrupt, getattr(click_errors, "Abort", KeyboardInterrupt)):
        _fail("interrupted", 130)
    except RecursionError:
        _fail("input nested too deeply to handle", 2)
    except Exception as err:  # noqa: BLE001 - the last line of defence, never the way errors are reported
        if os.environ.get("COST4D_DEBUG"):
            raise
        _fail(f"internal error ({type(err).__name__}: {str(err)[:200]}); this is a bug in cost4d, please "
              "report it with the command line (COST4D_DEBUG=1 shows the traceback)", 70)
    raise SystemExit(code if isinstance(code, int) else 0)


def _terminated(signum, frame):
    raise SystemExit(128 + signum)


def _fail(message: str | None, code: int, prefix: str = "error: ") -> None:
    """One line (help text excepted), at most ~1,000 characters whatever the input echoed in it."""
    if message is not None:
        line = " ".join(message.split()) if prefix else message
        if prefix and len(line) > 1000:
            line = f"{line[:700]} ... {line[-200:]}"
        typer.echo(f"{prefix}{line}", err=True)
    raise SystemExit(code) from None


if __name__ == "__main__":
    main()
