"""Shell completion of option values (issue 14): fixed choices (an option whose metavar is ``a|b|c``) and
the names of the built-in models, devices, recipes and framework profiles. Set up only in a completion run
(``_COST4D_COMPLETE`` in the environment), so that no other command pays for it."""

from __future__ import annotations

import inspect
import re
import typing
from typing import get_args

import typer.models


def _models() -> list[str]:
    from costmodel.specs.catalog import BUILTIN_MODELS

    return list(BUILTIN_MODELS)


def _hardware() -> list[str]:
    from costmodel.specs.load import hardware_names

    return hardware_names()


def _recipes() -> list[str]:
    from costmodel.specs.recipe import RECIPES

    return list(RECIPES)


def _frameworks() -> list[str]:
    from costmodel.specs.framework import FRAMEWORKS

    return list(FRAMEWORKS)


def _collectives() -> list[str]:
    from costmodel.measure.results import COLLECTIVES

    return list(COLLECTIVES)


def _algorithms() -> list[str]:
    from costmodel.measure.results import ALGORITHMS

    return list(ALGORITHMS)


#: an option's parameter -> the names it takes (a NAME|FILE option: files too, which completion leaves out)
NAMES = {"model": _models, "hardware": _hardware, "recipe": _recipes, "framework": _frameworks, "op": _collectives,
         "algorithm": _algorithms}


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
            info.autocompletion = _starting_with(NAMES[name])
        if name in NAMES or not _CHOICES.fullmatch(info.metavar or ""):
            continue
        choices = [c.split(":")[0] + ":" if ":" in c else c for c in info.metavar.split("|")]  # every:K -> every:
        info.autocompletion = _starting_with(lambda choices=choices: choices)
