"""`cost4d models`, `hardware`, `recipes` and `frameworks`: what is built in."""

from __future__ import annotations

from typing import Annotated

import typer

from costmodel.cli import options as o

TemplateOpt = Annotated[bool, typer.Option("--template", help="Print a commented spec file to copy and edit instead.")]


def models(as_json: o.JsonOpt = False, template: TemplateOpt = False) -> None:
    """List the built-in models with their parameter counts."""
    from costmodel.report import catalog

    if template:
        catalog.print_template("model")
        return
    catalog.models(as_json)


def hardware(as_json: o.JsonOpt = False, template: TemplateOpt = False) -> None:
    """List the shipped device specs (peak FLOP/s, HBM, network levels)."""
    from costmodel.report import catalog

    if template:
        catalog.print_template("hardware")
        return
    catalog.hardware(as_json)


def recipes(as_json: o.JsonOpt = False, template: TemplateOpt = False) -> None:
    """List the precision recipes (--recipe): the dtype of every piece of training state."""
    from costmodel.report import catalog

    if template:
        catalog.print_template("recipe")
        return
    catalog.recipes(as_json)


def frameworks(as_json: o.JsonOpt = False, template: TemplateOpt = False) -> None:
    """List the framework profiles (--framework): overhead terms, defaults and fitted constants."""
    from costmodel.report import catalog

    if template:
        catalog.print_template("framework")
        return
    catalog.frameworks(as_json)


def register(app) -> None:
    app.command()(models)
    app.command()(hardware)
    app.command()(recipes)
    app.command()(frameworks)
