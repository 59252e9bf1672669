"""The `cost4d` command line: one module per command group, each printing through ``costmodel.report``.

catalog.py: models, hardware, recipes, frameworks | calc.py: memory, flops, comm | step.py: step | plan.py: plan |
solve.py: solve, explain | measure.py: import, validate | bench.py: bench | homework.py | plot.py. Options are
declared once in options.py and layout.py. A command's module is imported only when it runs (COMMANDS).
"""

from __future__ import annotations

import copy
import functools
import os
from collections.abc import MutableMapping

import typer
from typer.core import TyperCommand, TyperGroup

from costmodel.errors import CostModelError

#: command -> the module of costmodel.cli that registers it, imported only when the command runs (or for
#: help and completion, which list them all); the order is the order `cost4d --help` lists them in
COMMANDS = {
    "models": "catalog", "hardware": "catalog", "recipes": "catalog", "frameworks": "catalog",
    "memory": "calc", "flops": "calc", "comm": "calc", "step": "step", "plan": "plan", "validate": "measure",
    "solve": "solve", "explain": "explain", "import": "measure", "bench": "bench", "homework": "homework",
    "plot": "plot",
}


@functools.cache
def _holder(module: str) -> typer.Typer:
    """The commands ``costmodel.cli.<module>`` registers, on a Typer of their own, each with --plain added
    (registered, not yet built: typer builds a command's options from its signature, ~1 ms a command)."""
    import importlib

    from costmodel.cli.layout import with_plain

    holder = typer.Typer(add_completion=False)
    importlib.import_module(f"costmodel.cli.{module}").register(holder)
    completing = "_COST4D_COMPLETE" in os.environ
    if completing:
        from costmodel.cli.completion import complete_values
    apps = [holder]
    while apps:
        instance = apps.pop()
        for info in instance.registered_commands:
            if completing:
                complete_values(info.callback)
            info.callback = with_plain(info.callback)
            info.cls = Command if info.cls in (None, TyperCommand) else info.cls
        for group in instance.registered_groups:
            if group.typer_instance.registered_callback is None:  # --plain before the command's name too
                group.typer_instance.callback()(_group_options)
            if getattr(group.cls, "value", group.cls) in (None, TyperGroup):  # add_typer's default (a placeholder)
                group.cls = Group
        apps += [group.typer_instance for group in instance.registered_groups]
    return holder


def _group_options(plain: bool = typer.Option(False, "--plain", help="Plain tables (no box drawing, no colour); "
                                               "its commands take --plain too.")) -> None:
    """A command group's own options (`cost4d solve --plain fsdp`)."""
    from costmodel.report.common import ask_plain

    ask_plain(plain)


def _builders(holder: typer.Typer, instance: typer.Typer) -> dict:
    """name -> a function building that command (or sub-group, whose own commands are built as they are
    asked for too) of ``instance``; ``holder`` carries typer's settings."""
    import typer.main

    def command(info):
        return lambda: typer.main.get_command_from_info(info, pretty_exceptions_short=holder.pretty_exceptions_short,
                                                        rich_markup_mode=holder.rich_markup_mode)

    def group(info):
        def build():
            bare, shell = copy.copy(info.typer_instance), copy.copy(info)
            bare.registered_commands, bare.registered_groups = [], []
            shell.typer_instance = bare
            built = typer.main.get_group_from_info(shell, pretty_exceptions_short=holder.pretty_exceptions_short,
                                                   rich_markup_mode=holder.rich_markup_mode,
                                                   suggest_commands=holder.suggest_commands)
            built.commands = _Commands(_builders(holder, info.typer_instance))
            return built
        return build

    return {**{info.name or typer.main.get_command_name(info.callback.__name__): command(info)
               for info in instance.registered_commands},
            **{info.name: group(info) for info in instance.registered_groups}}


def _top_level(name: str):
    """The `cost4d` command ``name``, its module imported and only that command built."""
    holder = _holder(COMMANDS[name])
    return _builders(holder, holder)[name]()


class _Commands(MutableMapping):
    """A group's commands by name, each built on first use (help and completion list them all)."""

    def __init__(self, builders: dict):
        self._builders, self._built = builders, {}

    def __getitem__(self, name: str):
        if name not in self._built and name in self._builders:
            self._built[name] = self._builders[name]()
        return self._built[name]

    def __iter__(self):
        return iter(self._builders)

    def __len__(self) -> int:
        return len(self._builders)

    def __setitem__(self, name: str, command) -> None:
        self._built[name] = command

    def __delitem__(self, name: str) -> None:
        del self._built[name]


class _UntypedFlags:
    """A flag takes no value, so its help shows no type: typer >= 0.2x prints ``<bool>`` beside each flag
    (--json, --sp, --help), as if it wanted one; an argument named by its metavar (FILE, LOG) shows no
    ``<list[Path]>`` beside it either."""

    def get_params(self, ctx):
        params = super().get_params(ctx)
        for param in params:
            if getattr(param, "is_flag", False) and param.metavar is None:
                param.metavar = ""
            elif param.param_type_name == "argument" and param.metavar:
                param.display_type_rich = _no_type
        return params


def _no_type(ctx=None):
    return None


class Command(_UntypedFlags, TyperCommand):
    """Every `cost4d` command."""


class Group(_UntypedFlags, TyperGroup):
    """Every `cost4d` sub-group (solve, explain, plot, ...)."""


class LazyGroup(_UntypedFlags, TyperGroup):
    """The `cost4d` group: a command's module is imported, and its options built, only when it runs."""

    def __init__(self, **attrs):
        super().__init__(**attrs)
        self.commands = _Commands({name: functools.partial(_top_level, name) for name in COMMANDS})


app = typer.Typer(
    name="cost4d",
    cls=LazyGroup,
    help="What 4D-parallel training costs in memory, FLOPs, communication and time, with the formulas.",
    no_args_is_help=True,
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
def _app(version: bool = typer.Option(False, "--version", "-V", callback=_version, is_eager=True,
                                      help="Print the version and exit."),
         plain: bool = typer.Option(False, "--plain", help="Plain tables (no box drawing, no colour) on a terminal "
                                    "too, as when output is piped; every command that prints tables also takes "
                                    "--plain.")) -> None:
    """What 4D-parallel training costs in memory, FLOPs, communication and time, with the formulas."""
    from costmodel.report import common

    common.PLAIN = plain  # set for each invocation (a test runner may invoke many in one process)


def main(argv: list[str] | None = None) -> None:
    """Entry point (``argv``: the arguments after `cost4d`; default the process's). Bad input of any kind
    ends as one line on stderr and exit code 2; Ctrl-C and SIGTERM end quietly (130, 143) after ``--out``
    files are cleaned up; anything else is a bug, reported as one line with exit code 70
    (``COST4D_DEBUG=1`` shows the traceback)."""
    import signal

    try:  # typer >= 0.22 carries its own copy of click
        from typer._click import exceptions as click_errors
    except ImportError:
        from click import exceptions as click_errors

    signal.signal(signal.SIGTERM, _terminated)
    # pydantic's plugins (observability hooks) have nothing to observe in a one-shot command, and finding them
    # scans every installed package's entry points on the first spec validated (~25 ms of start-up); typer
    # turns them off for its own option parsing the same way (typer/_adapters.py disabled_pydantic_plugins).
    # A user who wants them sets PYDANTIC_DISABLE_PLUGINS themselves (to "", or a list of names to skip).
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    if "_COST4D_COMPLETE" in os.environ:  # shell completion: typer renders each help through rich at the
        os.environ["COLUMNS"] = "100000"  # terminal's width, and fish/zsh read a wrapped line as a new candidate
    try:
        code = app(standalone_mode=False) if argv is None else app(argv, "cost4d", standalone_mode=False)
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
