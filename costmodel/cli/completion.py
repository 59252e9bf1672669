"""Shell completion of option values (issue 14): fixed choices (an option whose metavar is ``a|b|c``) and
the names of the built-in models, devices, recipes and framework profiles. Set up only in a completion run
(``_COST4D_COMPLETE`` in the environment), so that no other command pays for it."""

from __future__ import annotations

import importlib
import inspect
import re
import typing
from typing import get_args

import typer.models


#: an option's parameter -> (module, name) of the names it takes: a collection, or a function giving them
#: (a NAME|FILE option takes files too, which completion leaves out); imported only when completing
NAMES = {"model": ("costmodel.specs.catalog", "BUILTIN_MODELS"), "hardware": ("costmodel.specs.load", "hardware_names"),
         "recipe": ("costmodel.specs.recipe", "RECIPES"), "framework": ("costmodel.specs.framework_catalog", "FRAMEWORKS"),
         "op": ("costmodel.measure.results", "COLLECTIVES"), "algorithm": ("costmodel.measure.results", "ALGORITHMS")}


def _named(module: str, name: str):
    def names() -> list[str]:
        found = getattr(importlib.import_module(module), name)
        return list(found() if callable(found) else found)
    return names


#: a metavar that lists the values: lower-case words (one may end in ':K', a number to type: every:K, cuda:N)
_CHOICES = re.compile(r"[a-z0-9][a-z0-9.+-]*(:[A-Z]+)?(\|[a-z0-9][a-z0-9.+-]*(:[A-Z]+)?)+")


def _starting_with(values):
    def complete(incomplete: str) -> list[str]:
        return [v for v in values() if v.startswith(incomplete)]
    return complete


def complete_values(callback) -> None:
    """Give each option of ``callback`` (a command's function) that has a known set of values a completion."""
    try:  # a module with postponed annotations holds them as text, which typer would evaluate afresh (new
        # OptionInfo objects): the function keeps the evaluated ones, that typer reads the completions from
        hints = typing.get_type_hints(callback, include_extras=True)
        callback.__annotations__ = {**callback.__annotations__, **hints}
    except Exception:  # noqa: BLE001 - a name it cannot resolve: the annotations as they are
        hints = {}
    for name, parameter in inspect.signature(callback).parameters.items():
        annotation = hints.get(name, parameter.annotation)
        info = next((m for m in get_args(annotation)[1:] if isinstance(m, typer.models.OptionInfo)), None)
        if info is None or info.autocompletion is not None:
            continue
        listed = getattr(info, "cost4d_choices", None)  # options.choices(...)
        if listed is not None:
            info.autocompletion = _starting_with(lambda listed=listed: listed)
            continue
        if name in NAMES:
            info.autocompletion = _starting_with(_named(*NAMES[name]))
        if name in NAMES or not _CHOICES.fullmatch(info.metavar or ""):
            continue
        choices = [c.split(":")[0] + ":" if ":" in c else c for c in info.metavar.split("|")]  # every:K -> every:
        info.autocompletion = _starting_with(lambda choices=choices: choices)
