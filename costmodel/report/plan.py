"""Output of `cost4d plan`: the best layouts, why the first beats the second, what the search did."""

from __future__ import annotations

from costmodel.report.common import console, emit_json, layout_text, output_width, table
from costmodel.report.memory import VERDICTS
from costmodel.report.tables import command_lines, literal
from costmodel.units import UnitSystem, in_unit


def _layout_text(layout: dict, cp_in_data: bool = False) -> str:
    """The axes as every report names them (common.layout_text), then what the search varies beyond them."""
    from costmodel.specs.layout import Layout

    parts = [layout_text(Layout(**layout), cp_in_data)]
    if layout["pp"] > 1:
        parts.append(f"{layout['schedule']}" + (f" v={layout['chunks']}" if layout["chunks"] > 1 else "")
                     + f" m={layout['microbatches']}" + (f", split {layout['split']}" if "split" in layout else ""))
    if layout["cp"] > 1:
        parts.append(f"cp {layout['cp_kind']}")
    if layout["recompute"] != "none":
        parts.append(f"recompute {layout['recompute']}")
    parts.append(f"mbs {layout['tokens']:,} tok")
    return ", ".join(parts)


def _range(row: dict) -> str:
    """The step's error range (step_s_low-step_s_high), or - where the step model has none."""
    if row.get("step_s_low") is None:
        return "-"
    return f"{row['step_s_low']:.3f}-{row['step_s_high']:.3f}"


def payload(result, commands: list[str], header: dict, details=None) -> dict:
    return {**header, "considered": result.considered, "rejected": result.rejected, "feasible": result.feasible,
            "seconds": result.seconds, "capacity_bytes": result.capacity_bytes,
            "layouts": [{"rank": i + 1, "layout": p.layout, "step_s": p.step_s, "tokens_per_s": p.tokens_per_s,
                         "mfu": p.mfu, "memory_bytes": p.memory_bytes, "bubble_fraction": p.bubble,
                         "exposed_comm_s": p.exposed_comm_s, "breakdown": p.breakdown, "totals": p.parts,
                         "command": cmd,
                         **(details[i] if details else {})}
                        for i, (p, cmd) in enumerate(zip(result.best, commands))]}


def _in_units(rule: str, capacity_bytes: float, units: UnitSystem) -> str:
    """A rejection's rule with the memory limit in ``units`` (the search names it in GiB, as --json keeps it)."""
    from costmodel.solve.plan import memory_rule

    for band in (False, True):
        if rule == memory_rule(capacity_bytes, band=band):
            return memory_rule(capacity_bytes, band=band, units=units)
    return rule


def _phase_mark(phase: str) -> str:
    """A verdict's note where the peak is not in forward-backward: ' (step)', ' (sync)'."""
    return {"optimizer step": " (step)", "gradient sync": " (sync)"}.get(phase, "")


def plan(result, commands: list[str], header: dict, *, reason: str | None, as_json: bool, details=None,
         cp_in_data: bool = False, units: UnitSystem = UnitSystem.si) -> None:
    """The best layouts as a table (or JSON: bytes); ``cp_in_data``: the framework shards over the CP ranks too;
    ``units``: memory in GB or GiB (--units)."""
    data = payload(result, commands, header, details)
    if as_json:
        emit_json({**data, "why": reason})
        return
    out = console()
    out.print(f"[bold]{literal(header['model'])}[/] on {header['devices']:,} x {literal(header['hardware'])}, "
              f"{header['global_tokens']:,} tokens per step (seq {header['seq']:,}); recipe {header['recipe']}, "
              f"framework {header['framework']}, {header['precision']}, {header['kernels']} kernels"
              + (" (Transformer Engine's casts)" if header["precision"] == "fp8" else ""))
    t = table("Best layouts (predicted)", ">#", ">tokens/s", ">MFU", f">memory ({in_unit(0, units)[1]})", "verdict",
              ">step s", ">range s", ">bubble", ">exposed s", "layout")
    for row in data["layouts"]:
        memory = (VERDICTS[row["memory_verdict"]]
                  + _phase_mark(row["peak_phase"])) if "memory_verdict" in row else ""
        t.add_row(str(row["rank"]), f"{row['tokens_per_s']:,.0f}", f"{row['mfu']:.1%}",
                  f"{in_unit(row['memory_bytes'], units)[0]:,.1f}", memory, f"{row['step_s']:.3f}", _range(row),
                  f"{row['bubble_fraction']:.1%}", f"{row['exposed_comm_s']:.3f}", _layout_text(row["layout"], cp_in_data))
    out.print(t)
    if any(row.get("memory_verdict") == "tight" for row in data["layouts"]):
        out.print("may not fit: the predicted peak fits, but the framework's fitted band reaches past the HBM; "
                  "--memory sure keeps only the layouts that fit at its high end")
    if reason:
        out.print(reason)
    rejected = "; ".join(f"{count:,} by {_in_units(why, result.capacity_bytes, units)}"
                         for why, count in result.rejected.items())
    out.print(f"Considered {result.considered:,} layouts: rejected {rejected}; {result.feasible:,} feasible; "
              f"{result.seconds:.2f} s ({result.considered / max(result.seconds, 1e-9):,.0f} layouts/s).")
    out.print(f"DP/FSDP traffic hidden behind backward or not: {header['data_overlap_source']}")
    if any("step_s_low" in row for row in data["layouts"]):
        out.print("range s: the step time's error range, from the step model's residuals on its training runs "
                  "(widened for a borrowed step fraction, and for a framework no run in them times as far as the "
                  "slowest framework that has runs; `cost4d step` prints its source)")
    out.print("Reproduce a row:" + ("" if commands else " -"))
    for i, cmd in enumerate(commands, start=1):
        out.print(f"# {i}\n" + literal("\n".join(command_lines(cmd, output_width()))))
