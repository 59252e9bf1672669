"""`cost4d models` and `cost4d hardware`: what is built in."""

from __future__ import annotations

from costmodel.cli import options as o


def models(as_json: o.JsonOpt = False) -> None:
    """List the built-in models with their parameter counts."""
    from costmodel.report import catalog

    catalog.models(as_json)


def hardware(as_json: o.JsonOpt = False) -> None:
    """List the shipped device specs (peak FLOP/s, HBM, network levels)."""
    from costmodel.report import catalog

    catalog.hardware(as_json)


def register(app) -> None:
    app.command()(models)
    app.command()(hardware)
