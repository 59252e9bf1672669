"""`cost4d models`, `hardware`, `recipes` and `frameworks`: what is built in."""

from __future__ import annotations

from typing import Annotated

import typer

from costmodel.cli import options as o

TemplateOpt = Annotated[bool, typer.Option("--template", help="Print a commented spec file to copy and edit instead.")]

#: command -> (the kind its --template prints, what it lists)
CATALOGS = {
    "models": ("model", "List the built-in models with their parameter counts."),
    "hardware": ("hardware", "List the shipped device specs (peak FLOP/s, HBM, network levels)."),
    "recipes": ("recipe", "List the precision recipes (--recipe): the dtype of every piece of training state."),
    "frameworks": ("framework", "List the framework profiles (--framework): overhead terms, defaults and fitted "
                   "constants."),
}


def _catalog(name: str, kind: str, doc: str):
    """The command listing one catalog (a table, or JSON), or printing its template."""

    def command(as_json: o.JsonOpt = False, template: TemplateOpt = False) -> None:
        from costmodel.report import catalog

        if template:
            catalog.print_template(kind)
            return
        getattr(catalog, name)(as_json)

    command.__doc__, command.__name__ = doc, name
    return command


def register(app) -> None:
    for name, (kind, doc) in CATALOGS.items():
        app.command(name)(_catalog(name, kind, doc))
