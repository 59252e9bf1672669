"""`cost4d homework`: problem sets that generate themselves, with answer keys from the solvers."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from costmodel.cli import options as o

homework_app = typer.Typer(help="Problems in a course's wording with other numbers, and their worked answer keys "
                           "(computed by the solvers, never typed). `cost4d homework list` names them.",
                           no_args_is_help=True)

SeedOpt = Annotated[int, typer.Option(min=0, max=2**31 - 1, metavar="N",
    help="Which variant: 0 is the original problem; the same seed always gives the same problem.")]
AnswersOpt = Annotated[bool, typer.Option("--answers", help="Print the worked answer key too.")]
DocFormatOpt = Annotated[str, typer.Option("--format", metavar="text|markdown|latex|ipynb",
    help="text, markdown, latex, or ipynb (a notebook whose cells recompute the key and assert it).")]
OutOpt = Annotated[Optional[str], typer.Option("--out", metavar="FILE", help="Write to FILE instead of printing.")]


@homework_app.command("list")
def list_cmd(as_json: o.JsonOpt = False) -> None:
    """The problem kinds, with the lecture or paper each follows."""
    from costmodel.homework import kinds
    from costmodel.report.common import console, emit_json, table

    rows = [{"kind": name, "title": module.TITLE, "source": module.SOURCE} for name, module in kinds().items()]
    if as_json:
        emit_json({"homework": rows})
        return
    t = table("Homework (cost4d homework KIND --seed N [--answers])", "kind", "problem", "follows")
    for row in rows:
        t.add_row(row["kind"], row["title"], row["source"])
    console().print(t)


def _command(kind: str):
    def command(seed: SeedOpt = 0, answers: AnswersOpt = False, fmt: DocFormatOpt = "text", out: OutOpt = None,
                 as_json: o.JsonOpt = False) -> None:
        from costmodel.homework import problem
        from costmodel.errors import CostModelError
        from costmodel.inputs.files import shown
        from costmodel.inputs.output import writable, write_text
        from costmodel.report.common import emit_json

        path = writable(out) if out else None
        if path is not None and fmt == "ipynb" and path.suffix != ".ipynb":
            raise CostModelError(f"--out {shown(out)}: a notebook (--format ipynb) goes to a .ipynb file")
        hw = problem(kind, seed)
        if as_json:
            emit_json(hw.as_dict())
            return
        text = hw.render(fmt, answers)
        if path is None and fmt == "text":  # prose, wrapped to the width
            from costmodel.report.common import say

            say(text.rstrip("\n"))
        elif path is None:
            typer.echo(text, nl=False)
        else:
            write_text(path, text)
            typer.echo(f"{kind} (seed {seed}{', with answers' if answers else ''}) -> {path}")

    return command


def register(app) -> None:
    from costmodel.homework import kinds

    for name, module in kinds().items():
        doc = (f"{module.TITLE}.\n\nFollows: {module.SOURCE}.\n\nExample: cost4d homework {name} --seed 7 --answers "
               f"--format markdown")
        homework_app.command(name, help=doc)(_command(name))
    app.add_typer(homework_app, name="homework")
