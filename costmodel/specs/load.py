"""Find specs by name or file, with one clear line for anything wrong.

Names: built-in models (``catalog.py``), hardware files (``hardware/*.toml``), named recipes.
Files: ``.toml`` or ``.json`` holding the spec's fields; errors name the file and the field.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

from costmodel.errors import CostModelError
from costmodel.inputs.bounds import NAME
from costmodel.inputs.cache import parsed
from costmodel.inputs.files import read_document, shown
from costmodel.specs import EXACT

_PACKAGE = Path(__file__).resolve().parent.parent


def hardware_dir() -> Path:
    """The shipped device files: inside the wheel, or the checkout's top-level hardware/."""
    for candidate in (_PACKAGE / "_hardware", _PACKAGE.parent / "hardware"):
        if candidate.is_dir():
            return candidate
    raise CostModelError("no hardware/ directory found next to the package")


def table_file(hardware, relative: str) -> Path:
    """A table a hardware spec names, relative to the folder the spec was read from, else to the
    shipped hardware folder (a calibrated copy of a shipped spec keeps its tables); a path that
    leaves those folders is refused."""
    roots = [Path(folder).resolve() for folder in (hardware._folder, hardware_dir()) if folder is not None]
    for root in roots:
        path = (root / relative).resolve()
        if not path.is_relative_to(root):
            raise CostModelError(f"{shown(relative)}: a spec's table must lie inside the spec's folder {root}")
        if path.exists():
            return path
    return (roots[0] / relative).resolve()


def unknown(kind: str, name: str, known: list[str]) -> CostModelError:
    """One line for an unknown name: the closest known ones, then all of them."""
    if len(name) > NAME or not name.isprintable():
        return CostModelError(f"unknown {kind} {shown(name)}: names are at most {NAME} printable characters "
                              f"(all: {', '.join(sorted(known))})")
    if _is_file(name):
        return CostModelError(f"unknown {kind} {shown(name)}: that is a file, and a spec file is named by a path "
                              f"ending in .toml or .json, or holding a / ({shown('./' + name)})")
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.0)
    return CostModelError(f"unknown {kind} {shown(name)}; closest: {', '.join(close)} "
                          f"(all: {', '.join(sorted(known))})")


def _is_file(name: str) -> bool:
    try:
        return Path(name).is_file()
    except (OSError, ValueError):  # a name no file can have (a NUL byte, too long)
        return False


def read_file(path: Path) -> dict:
    """A TOML or JSON spec file as a dict, or one line saying where it is malformed. A shipped file's fields
    are kept between runs (costmodel.inputs.cache)."""
    return parsed(Path(path), "spec", lambda: read_document(path, "spec file"), hardware_dir())


def validate(cls, data: dict, where: str):
    """Build spec ``cls`` from ``data``; a validation error becomes one line naming the field."""
    from pydantic import ValidationError

    try:
        return cls.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0]
        loc = ".".join(str(part) for part in first["loc"]) or "(top level)"
        value = "" if isinstance(first.get("input"), (dict, list)) else f" = {shown(first.get('input'), 40)}"
        more = f" (and {err.error_count() - 1} more)" if err.error_count() > 1 else ""
        raise CostModelError(f"{where}: {loc}{value}: {first['msg'].removeprefix('Value error, ')}{more}") from None


def _holds_config(name: str) -> bool:
    """Whether ``name`` is a folder holding a Hugging Face config.json."""
    try:
        return (Path(name) / "config.json").is_file()
    except (OSError, ValueError):  # a name no file can have (a NUL byte, too long)
        return False


def _is_path(name: str) -> bool:
    return name.lower().endswith((".toml", ".json")) or "/" in name  # read_document takes either case too


def hf_model_name(path: Path, data: dict) -> str:
    """A Hugging Face config's model name: the repository it was saved from (``_name_or_path``, transformers'
    save_pretrained), else, for the hub's cache (models--ORG--NAME/snapshots/HASH/config.json), ORG/NAME, else
    the path as given (a folder's name alone can be anything: `path/to/config.json` is not a model called "to")."""
    saved = data.get("_name_or_path")
    if isinstance(saved, str) and saved.strip("./") and saved.isprintable() and not Path(saved).is_absolute() \
            and len(saved) <= NAME:
        return saved
    parts = path.resolve().parts if path.name == "config.json" else ()
    if len(parts) >= 4 and parts[-3] == "snapshots" and parts[-4].startswith("models--"):
        return parts[-4].removeprefix("models--").replace("--", "/")[:NAME]
    given = str(path)
    return given if len(given) <= NAME else "..." + given[len(given) - NAME + 3:]


def load_model(name: str):
    """A built-in model by name, a spec file (TOML/JSON with ``kind`` = ffn | transformer), or a Hugging Face
    config.json, named or found in the folder named (a downloaded model's folder)."""
    from costmodel.specs.catalog import BUILTIN_MODELS

    if name not in BUILTIN_MODELS and _holds_config(name):
        name = str(Path(name) / "config.json")
    if _is_path(name):
        from costmodel.specs.hf import from_hf_config, is_hf_config  # files only: built-ins skip the import

        path = Path(name)
        data = read_file(path)
        if is_hf_config(data):
            return _model_from(from_hf_config(data, hf_model_name(path, data), str(path)), str(path))
        data.setdefault("name", path.stem)
        return _model_from(data, str(path))
    if name not in BUILTIN_MODELS:
        raise unknown("model", name, list(BUILTIN_MODELS))
    return builtin_model(name)


def builtin_model(name: str):
    """A built-in model without re-validation: the catalog is ours, and tests/test_specs.py validates
    every entry; skipping it keeps the schema build off the CLI's cold start."""
    from costmodel.specs.catalog import BUILTIN_MODELS
    from costmodel.specs.model import FFNStack, Transformer

    data = BUILTIN_MODELS[name]
    return {"ffn": FFNStack, "transformer": Transformer}[data["kind"]].builtin(**data)


def _model_from(data: dict, where: str):
    """Validate with the spec class that ``kind`` names (only that class's schema is built)."""
    from costmodel.specs.model import FFNStack, Transformer

    classes = {"ffn": FFNStack, "transformer": Transformer}
    kind = data.get("kind")
    if not isinstance(kind, str) or kind not in classes:
        raise CostModelError(f"{where}: 'kind' must be one of {', '.join(classes)} (got {shown(kind, 40)})")
    return validate(classes[kind], data, where)


def hardware_names() -> list[str]:
    return sorted(name.removesuffix(".toml") for name in os.listdir(hardware_dir()) if name.endswith(".toml"))


def _hardware_path(name: str, folder: Path | None = None) -> Path:
    """A shipped device's file, or a spec file (relative to ``folder`` when one extends another)."""
    if not _is_path(name):
        if name not in hardware_names():
            raise unknown("hardware", name, hardware_names())
        return hardware_dir() / f"{name}.toml"
    return (folder / name) if folder is not None and not Path(name).is_absolute() else Path(name)


#: how many specs one may stack with ``extends`` (a loop is an error, not a hang)
EXTENDS_DEPTH = 4


def hardware_fields(path: Path, depth: int = 0) -> dict:
    """A hardware file's fields; with ``extends = "NAME or FILE"`` the base's fields with this file's
    laid over them (see :func:`overlay`)."""
    data = read_file(path)
    base = data.pop("extends", None)
    if base is None:
        return data
    if not isinstance(base, str):
        raise CostModelError(f"{path}: extends must name a device or a spec file, found {shown(base, 40)}")
    if depth >= EXTENDS_DEPTH:
        raise CostModelError(f"{path}: extends goes more than {EXTENDS_DEPTH} deep (a loop?)")
    merged = overlay(hardware_fields(_hardware_path(base, path.parent), depth + 1), data)
    hbm = data.get("hbm")
    if isinstance(hbm, dict) and "capacity_bytes" in hbm:  # a new capacity: the base's sizes derived from its own are stale
        merged["hbm"] = {k: v for k, v in merged["hbm"].items() if k in hbm or k not in STALE_WITH_CAPACITY}
    return merged


#: what a base device's HBM states about its own capacity: an extension that sets another capacity drops them
#: unless it gives them too (a 100 GB variant of an 80 GB device keeps neither its usable 79.6 GiB nor its '80 GB')
STALE_WITH_CAPACITY = ("usable_bytes", "marketed_gb")


def overlay(base: dict, over: dict) -> dict:
    """``over`` laid over ``base``: tables merge key by key; a list of tables with names (network
    levels) merges level by level, new names appended, and a level with ``replaces = "NAME"`` takes
    that level's place whole; anything else is replaced."""
    merged = dict(base)
    for key, value in over.items():
        old = merged.get(key)
        if isinstance(old, dict) and isinstance(value, dict):
            merged[key] = overlay(old, value)
        elif _named_tables(old) and _named_tables(value):
            merged[key] = _overlay_levels(old, value)
        else:
            merged[key] = value
    return merged


def _overlay_levels(old: list[dict], new: list[dict]) -> list[dict]:
    levels = {item["name"]: item for item in old}
    for item in new:
        replaced = item.get("replaces")
        if replaced is not None:
            if replaced not in levels:
                raise CostModelError(f"replaces = {shown(replaced, 40)}: the base has no such level "
                                     f"(levels: {', '.join(levels)})")
            item = {k: v for k, v in item.items() if k != "replaces"}
            levels = {(item["name"] if name == replaced else name): (item if name == replaced else level)
                      for name, level in levels.items()}
        else:
            levels[item["name"]] = overlay(levels[item["name"]], item) if item["name"] in levels else item
    return list(levels.values())


def _named_tables(value) -> bool:
    return isinstance(value, list) and all(isinstance(v, dict) and isinstance(v.get("name"), str) for v in value)


def load_hardware(name: str):
    """A shipped device by name, or a hardware spec file (which may extend another)."""
    from costmodel.specs.hardware import Hardware

    path = _hardware_path(name)
    fields = hardware_fields(path)
    # a shipped device is trusted (tests/test_specs.py validates each): no schema built on the numeric path
    spec = validate(Hardware, fields, str(path)) if _is_path(name) else Hardware.builtin(**fields)
    return spec.model_copy(update={"_folder": path.parent})


def _named_or_file(kind: str, name: str, cls, named: dict):
    """A spec from ``named`` by name, or a ``cls`` file (named after its stem unless it says otherwise)."""
    if _is_path(name):
        path = Path(name)
        data = read_file(path)
        data.setdefault("name", path.stem)
        return validate(cls, data, str(path))
    if name not in named:
        raise unknown(kind, name, list(named))
    return named[name]


def load_recipe(name: str):
    """A named recipe, or a recipe file."""
    from costmodel.specs.recipe import RECIPES, Recipe

    return _named_or_file("recipe", name, Recipe, RECIPES)


def load_framework(name: str):
    """A named framework profile, or a profile file (TOML/JSON with the Framework fields)."""
    from costmodel.specs.framework import Framework
    from costmodel.specs.framework_catalog import FRAMEWORKS

    frame = _named_or_file("framework", name, Framework, FRAMEWORKS)
    if _is_path(name) and frame.exact:  # the name says "no terms": a file's terms would be dropped unseen
        raise CostModelError(f"{name}: a profile file may not be named {EXACT!r} (the exact accounting, which adds "
                             "nothing); name it otherwise (its name field, or the file's stem)")
    return frame


def framework_profile(framework):
    """The profile a name, file or Framework gives, or None for the exact accounting (which adds no terms;
    its profile is not even loaded: start-up)."""
    if framework is None or framework == EXACT:
        return None
    frame = load_framework(framework) if isinstance(framework, str) else framework
    return None if frame.exact else frame


def profile_name(frame) -> str:
    """The name of a profile :func:`framework_profile` gave (``exact`` for None)."""
    return EXACT if frame is None else frame.name


def load_run(model: str, recipe: str | None, framework: str):
    """(framework profile, None for the exact accounting; model; recipe) of a command: the recipe given,
    else the framework's, else cs336."""
    frame = framework_profile(framework)
    return frame, load_model(model), load_recipe(recipe or (frame.recipe if frame is not None else None) or "cs336")
