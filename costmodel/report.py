"""Results as JSON-ready dicts (raw bytes, FLOPs, seconds) and as rich tables naming their units."""

from __future__ import annotations

import math

from costmodel.units import UnitSystem, format_bytes, in_unit

COMPONENT_LABELS = {
    "weights": "low-precision weights",
    "master_weights": "master weights",
    "grads": "accumulated gradients",
    "optimizer": "optimizer state",
    "weight_copies": "weight copies saved for backward",
    "activations": "activations saved for backward",
}


def number(value):
    """An int when the value is whole (JSON stays exact), else a float."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def devices_worth(state_bytes: float, hardware) -> list[dict]:
    """How many devices' HBM the unsharded state fills, under each reading of the capacity.

    The vendor's "80GB" is read two ways in the wild: 80e9 bytes (SI), as the CS336 solution
    does, and 80 GiB, the HBM the card actually carries. Both are printed, each named.
    """
    hbm = hardware.hbm
    readings = []
    if hbm.marketed_gb:
        readings.append(("si", f"{hbm.marketed_gb:g} GB = {hbm.marketed_gb:g}e9 B", hbm.marketed_gb * 1e9))
    readings.append(("nominal", f"{hbm.capacity_bytes / 2**30:,.1f} GiB = {hbm.capacity_bytes:,} B",
                     hbm.capacity_bytes))
    if hbm.usable_bytes:
        readings.append(("usable", f"usable {hbm.usable_bytes / 2**20:,.0f} MiB", hbm.usable_bytes))
    return [{"convention": key, "capacity_bytes": number(cap), "label": label,
             "ratio": state_bytes / cap, "devices": math.ceil(state_bytes / cap)}
            for key, label, cap in readings]


def emit_json(payload: dict) -> None:
    import json
    import sys

    sys.stdout.write(json.dumps(payload, indent=2) + "\n")


def emitted_json(payload: dict, symbolic, as_json: bool) -> bool:
    """With --json, print the payload (and the formula, if asked for) and say so."""
    if as_json:
        if symbolic:
            payload["symbolic"] = symbolic
        emit_json(payload)
    return as_json


def console():
    """Rich console; when piped (no terminal to measure), 120 columns rather than rich's 80."""
    import sys

    from rich.console import Console

    return Console(highlight=False, width=None if sys.stdout.isatty() else 120)


def table(title: str, *columns: str):
    """A rich table; columns whose name starts with '>' are right-aligned numbers."""
    from rich.table import Table

    t = Table(title=title, title_justify="left", title_style="bold")
    for column in columns:
        right = column.startswith(">")
        t.add_column(column.lstrip(">"), justify="right" if right else "left")
    return t


def layout_text(layout) -> str:
    parts = [f"{axis}={getattr(layout, axis)}" for axis in ("dp", "fsdp", "tp", "pp", "cp")
             if getattr(layout, axis) > 1]
    if layout.fsdp > 1:
        parts.append(f"ZeRO-{layout.zero}")
    if layout.sp:
        parts.append("sp")
    return ", ".join(parts) or "one device"


def memory(model, recipe, layout, breakdown, hardware, *, fits, units, as_json, symbolic):
    """Print the per-device memory breakdown (and, with --symbolic, its formula first)."""
    worth = devices_worth(breakdown.state_bytes_unsharded, hardware)
    capacity = hardware.hbm.usable_bytes or hardware.hbm.capacity_bytes
    payload = {
        "model": model.name, "recipe": recipe.name, "layout": layout.model_dump(),
        "params": breakdown.params, "params_per_device": breakdown.params_per_device,
        "components": {k: number(v) for k, v in breakdown.components.items()},
        "total_bytes": number(breakdown.total_bytes),
        "state_bytes_unsharded": number(breakdown.state_bytes_unsharded),
        "activation_bytes_per_token": number(breakdown.activation_bytes_per_token),
        "weight_copies": breakdown.weight_copies_kind,
        "devices_worth": {"hardware": hardware.name,
                          "readings": [{k: v for k, v in r.items() if k != "label"} for r in worth]},
    }
    if fits:
        payload["fits"] = {"hardware": hardware.name, "capacity_bytes": capacity,
                           "fits": breakdown.total_bytes <= capacity}
    if breakdown.stages:
        payload["pipeline"] = pipeline_summary(model, recipe, layout)
        payload["stages"] = [{"stage": b.stage, "layers": b.stage_layers, "params_per_device": b.params_per_device,
                              "activation_bytes": number(b.activation_bytes), "total_bytes": number(b.total_bytes)}
                             for b in breakdown.stages]
    sym = _memory_symbolic(model, recipe, layout, breakdown) if symbolic else None
    if emitted_json(payload, sym, as_json):
        return
    out = console()
    if sym:
        _print_memory_symbolic(out, sym)
    out.print(f"[bold]{model.name}[/]: {breakdown.params:,} parameters; recipe [bold]{recipe.name}[/] "
              f"({recipe.description}); layout: {layout_text(layout)}; "
              f"{layout.tokens:,} tokens per replica")
    t = table("Memory per device", "component", ">bytes", f">{_unit(units)}")
    for name, value in breakdown.components.items():
        if name == "weight_copies" and breakdown.weight_copies_kind == "none":
            continue
        label = COMPONENT_LABELS[name]
        if name == "weight_copies":
            label += f" ({breakdown.weight_copies_kind})"
        t.add_row(label, f"{value:,.0f}", _in(value, units))
    t.add_row("[bold]total[/]", f"[bold]{breakdown.total_bytes:,.0f}[/]", f"[bold]{_in(breakdown.total_bytes, units)}[/]")
    out.print(t)
    if breakdown.stages:
        _print_stages(out, breakdown, payload["pipeline"], units)
    per_token = breakdown.activation_bytes_per_token
    out.print(f"Saved for backward per token ({recipe.activations}): {per_token:,.0f} B "
              f"= {format_bytes(per_token, units)}" + ("" if layout.tokens else "  (pass --tokens to add activations)"))
    state = breakdown.state_bytes_unsharded
    out.print(f"Unsharded training state ({recipe.state_bytes_per_param} B/param): {state:,.0f} B "
              f"= {state / 1e9:,.1f} GB = {state / 2**30:,.1f} GiB")
    for r in worth:
        out.print(f"  = {r['ratio']:.2f} -> {r['devices']} x {hardware.name} at {r['label']}")
    if fits:
        verdict = "fits" if breakdown.total_bytes <= capacity else "does NOT fit"
        out.print(f"Per-device total {format_bytes(breakdown.total_bytes, units)} {verdict} in "
                  f"{hardware.name}'s {format_bytes(capacity, units)}")
    out.print(f"Units: {_unit(units)} = {'1e9' if units == UnitSystem.si else '2^30'} bytes.")


def pipeline_summary(model, recipe, layout) -> dict:
    """Schedule, bubble and point-to-point bytes of a pipelined layout."""
    from costmodel.formulas import pipeline as pl

    width = model.d_model if model.kind == "ffn" else model.hidden
    return {"schedule": layout.schedule, "stages": layout.pp, "microbatches": layout.m, "chunks": layout.chunks,
            "bubble_fraction": pl.bubble_fraction(stages=layout.pp, microbatches=layout.m, chunks=layout.chunks,
                                                  schedule=layout.schedule),
            "p2p_bytes_per_microbatch": number(pl.p2p_bytes_per_microbatch(
                tokens=layout.tokens // layout.cp, hidden=width, act_bytes=recipe.activation_bytes,
                tp=layout.tp, sp=layout.sp))}


def _print_stages(out, breakdown, pipe: dict, units) -> None:
    t = table(f"Pipeline stages ({pipe['schedule']}, m = {pipe['microbatches']}, bubble "
              f"{pipe['bubble_fraction']:.1%} of the step; {format_bytes(pipe['p2p_bytes_per_microbatch'], units)} "
              "sent to the next stage per micro-batch, each way)", ">stage", ">layers", ">params/device",
              f">activations {_unit(units)}", f">total {_unit(units)}", "")
    heaviest = max(breakdown.stages, key=lambda b: b.total_bytes).stage
    last = len(breakdown.stages) - 1
    for b in breakdown.stages:
        role = ", ".join(r for r, on in (("first", b.stage == 0), ("last", b.stage == last),
                                         ("heaviest", b.stage == heaviest)) if on)
        t.add_row(str(b.stage), str(b.stage_layers), f"{b.params_per_device:,}", _in(b.activation_bytes, units),
                  _in(b.total_bytes, units), role)
    out.print(t)
    out.print(f"The table above is stage {heaviest}, the heaviest.")


def _unit(units) -> str:
    return in_unit(0, units)[1]


def _in(value, units) -> str:
    return f"{in_unit(value, units)[0]:,.2f}"


def _memory_symbolic(model, recipe, layout, breakdown) -> dict:
    from costmodel import symbolic as sy

    comps = sy.memory_expressions(recipe, layout, breakdown.weight_copies_kind)
    total = sy.memory_total(comps)
    values = sy.substitutions(model, layout, breakdown)
    return {
        "components": {k: sy.text(v) for k, v in comps.items()},
        "total": sy.text(total), "latex": sy.latex(total),
        "letters": {"P": "parameters on this device before data-axis sharding",
                    "A": "activation bytes on this device before data-axis sharding",
                    "N": "FSDP shards (N_FSDP)"},
        "values": {str(k): number(v) for k, v in values.items() if k in total.free_symbols},
        "total_evaluated": number(float(total.subs(values))),
    }


def _print_memory_symbolic(out, sym: dict) -> None:
    out.print("[bold]Formula[/] (bytes per device)")
    for name, expr in sym["components"].items():
        if expr == "0":
            continue
        out.print(f"  {name:15s} = {expr}")
    out.print(f"  [bold]total[/]           = {sym['total']}")
    for letter, meaning in sym["letters"].items():
        if letter in sym["values"]:
            out.print(f"  {letter} = {sym['values'][letter]:,}  ({meaning})")
    out.print(f"  total evaluated = {sym['total_evaluated']:,} B\n")
