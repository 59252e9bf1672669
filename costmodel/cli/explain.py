"""`cost4d explain ...`: the answers of `cost4d solve` and `cost4d memory`, derived step by step."""

from __future__ import annotations

import typer

from costmodel.cli import options as o
from costmodel.cli.layout import MEMORY, with_batch_question, with_layout
from costmodel.cli.solve import FSDP_SOLVE, OptimizeSplitOpt, SliceOpt, WhatIfOpt, _fsdp_answer, _limit, _split_and_rows
from costmodel.errors import CostModelError
from costmodel.inputs.files import shown

#: gradient accumulation changes no term of the exact accounting these derive: not an option of theirs
EXPLAINED = tuple(name for name in MEMORY if name != "grad_accum")

explain_app = typer.Typer(help="Derive an answer step by step: formula, values, result, conventions.",
                          no_args_is_help=True)


@explain_app.command("batch")
@with_batch_question
def explain_batch_cmd(
    model: o.ModelOpt,
    optimize_split: OptimizeSplitOpt = False,
    slice_: SliceOpt = None,
    what_if: WhatIfOpt = False,
    fmt: o.FormatOpt = "text",
    as_json: o.JsonOpt = False,
    *,
    question,
) -> None:
    """Derive `solve batch` step by step (with --optimize-split, --slice and --what-if, those answers too).

    Example: cost4d explain batch --model xxl --hardware tpu-v5p --fsdp 16 --tp 4 --mx 2 --optimize-split --what-if
    """
    from costmodel.solve.batch import require_compute_bound
    from costmodel.solve.explain import batch_derivation

    _check_format(fmt)
    spec, device, problem = question
    answer = require_compute_bound(problem)
    split, rows = _split_and_rows(device, problem, optimize_split, slice_, what_if)
    _show(batch_derivation(answer, device.name, split, rows), fmt, as_json)


@explain_app.command("fsdp")
@with_layout(*(name for name in FSDP_SOLVE if name in EXPLAINED), fixed={"fsdp": 2})
def explain_fsdp_cmd(
    model: o.ModelOpt,
    limit: o.LimitOpt = None,
    hardware: o.HardwareOpt = None,
    recipe: o.RecipeOpt = "cs336",
    fmt: o.FormatOpt = "text",
    as_json: o.JsonOpt = False,
    *,
    layout,
) -> None:
    """Derive `solve fsdp` step by step."""
    from costmodel.solve.explain import fsdp_derivation
    from costmodel.specs.load import load_model, load_recipe

    _check_format(fmt)
    spec, rec = load_model(model), load_recipe(recipe)
    limit_bytes, source = _limit(limit, hardware)
    answer = _fsdp_answer(spec, rec, layout, limit_bytes, source)
    _show(fsdp_derivation(spec, rec, layout, answer, source), fmt, as_json)


def _show(derivation, fmt: str, as_json: bool) -> None:
    """A derivation as text, Markdown or LaTeX, or as JSON with --json."""
    if as_json:
        from costmodel.report import emit_json

        emit_json(derivation.as_dict())
    elif fmt == "text":  # prose, wrapped to the width; Markdown and LaTeX go out as written (for files)
        from costmodel.report.common import say

        say(derivation.render(fmt))
    else:
        typer.echo(derivation.render(fmt))


def _check_format(fmt: str) -> None:
    if fmt not in ("text", "markdown", "latex"):
        raise CostModelError(f"--format {shown(fmt)}: use text, markdown or latex")


@explain_app.command("memory")
@with_layout(*EXPLAINED)
def explain_memory_cmd(
    model: o.ModelOpt,
    recipe: o.RecipeOpt = "cs336",
    fmt: o.FormatOpt = "text",
    as_json: o.JsonOpt = False,
    *,
    layout,
) -> None:
    """Derive `cost4d memory` step by step."""
    from costmodel.solve.explain import memory_derivation
    from costmodel.specs.load import load_model, load_recipe

    _check_format(fmt)
    _show(memory_derivation(load_model(model), load_recipe(recipe), layout), fmt, as_json)


def register(app) -> None:
    app.add_typer(explain_app, name="explain")
