"""What every printer shares: JSON-ready numbers, the console, tables, the layout in words."""

from __future__ import annotations

from costmodel.inputs.placement import DEFAULT_PLACEMENT


def number(value):
    """An int when the value is whole (JSON stays exact), else a float."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if hasattr(value, "item"):  # numpy scalars
        return number(value.item())
    return value


def time_models(rows) -> list[str]:
    """What priced each op's collectives, one entry per distinct calibration text, led by the ops it priced
    ("all-gather, reduce-scatter: NCCL 2.26.2 tuner (hgx-h100)"): `comm`'s time_model, `step`'s
    collective_time_model."""
    ops: dict[str, set] = {}
    for r in rows:
        ops.setdefault(r.calibration, set()).add(r.collective.op)
    return [f"{', '.join(sorted(names))}: {text}" for text, names in sorted(ops.items())] or ["datasheet"]


def emit_json(payload: dict) -> None:
    import json
    import sys

    sys.stdout.write(json.dumps(payload, indent=2, allow_nan=False) + "\n")  # JSON has no inf or NaN


def emitted_json(payload: dict, symbolic, as_json: bool) -> bool:
    """With --json, print the payload (and the formula, if asked for) and say so."""
    if as_json:
        if symbolic:
            payload["symbolic"] = symbolic
        emit_json(payload)
    return as_json


#: --plain given: plain tables even on a terminal (set by the command line for one invocation)
PLAIN = False


def ask_plain(plain: bool) -> None:
    """--plain given anywhere on the command line (before the command, on a group, on the command) turns it on."""
    global PLAIN
    PLAIN = PLAIN or plain


def terminal() -> bool:
    """Whether output goes to a terminal that gets rich's boxes and colours (not with --plain)."""
    import sys

    return not PLAIN and sys.stdout.isatty()


def output_width() -> int:
    """Columns to fit: the terminal's; when piped, COLUMNS if the environment sets it (40-1000), else 120."""
    import os
    import shutil
    import sys

    if sys.stdout.isatty():
        return shutil.get_terminal_size().columns
    columns = os.environ.get("COLUMNS", "")
    return int(columns) if columns.isdigit() and 40 <= int(columns) <= 1000 else 120


def console():
    """A rich console on a terminal; elsewhere (or with --plain) plain text, and rich is not imported."""
    if not terminal():
        from costmodel.report.tables import PlainConsole

        return PlainConsole(output_width())
    from rich.console import Console

    return Console(highlight=False)


def say(text: str) -> None:
    """Prose, wrapped at spaces to the terminal's width (or COLUMNS), each line's indent kept; brackets printed as
    written."""
    from costmodel.report.tables import hanging, literal

    width = output_width()  # wrapped here, list items with a hanging indent: rich would start them at column 0
    console().print(literal("\n".join(line for paragraph in text.split("\n") for line in hanging(paragraph, width))))


def table(title: str, *columns: str):
    """A table that fits the width (costmodel.report.tables); columns whose name starts with '>' are
    right-aligned numbers, never wrapped."""
    from costmodel.report.tables import Table

    return Table(title, *columns)


def layout_text(layout, cp_in_data: bool = False) -> str:
    """The layout in a few words; ``cp_in_data``: the framework shards the data axis over its CP ranks too."""
    parts = [f"{axis}={getattr(layout, axis)}" for axis in ("dp", "fsdp", "tp", "pp", "cp", "ep")
             if getattr(layout, axis) > 1]
    if cp_in_data and layout.cp > 1 and layout.zero:
        parts.append(f"ZeRO-{layout.zero} over fsdp x cp = {layout.fsdp * layout.cp} shards")
    elif layout.fsdp > 1:
        parts.append(f"ZeRO-{layout.zero}")
    if layout.mx > 1 or layout.my > 1:  # TPU: torus axes of the data and TP axes
        parts.append(f"M_X={layout.mx} M_Y={layout.my}")
    if layout.sp:
        parts.append("sp")
    if layout.etp is not None and layout.etp != layout.tp:
        parts.append(f"etp={layout.etp}")
    if layout.moe_imbalance != 1:
        parts.append(f"MoE imbalance {layout.moe_imbalance:g}")
    if layout.placement != DEFAULT_PLACEMENT:
        parts.append(f"placed {layout.placement}")  # innermost first
    if layout.grad_accum > 1:
        parts.append(f"{layout.grad_accum} accumulation steps")
    return ", ".join(parts) or "one device"


def unit_name(units) -> str:
    from costmodel.units import in_unit

    return in_unit(0, units)[1]


def in_units(value, units) -> str:
    from costmodel.units import in_unit

    return f"{in_unit(value, units)[0]:,.2f}"


def print_formula(out, title: str, lines: dict, legend: dict) -> None:
    """A formula block: name = expression lines, then each letter's meaning and value."""
    out.print(f"[bold]Formula[/] ({title})")
    width = max((len(k) for k in lines), default=0)
    for name, expr in lines.items():
        out.print(f"  {name:<{width}} = {expr}")
    for letter, (meaning, value) in legend.items():
        out.print(f"  {letter} = {number(value):,}" + (f"  ({meaning})" if meaning else ""))
