"""Output of `cost4d bench`: a progress bar while it runs, the sweep's summary, measured next to predicted."""

from __future__ import annotations

from contextlib import contextmanager

from costmodel.report.common import console, emit_json, table
from costmodel.report.tables import literal
from costmodel.units import UnitSystem, format_bytes


@contextmanager
def progress(total: int, description: str):
    """A progress bar on stderr while a benchmark runs, on a terminal only (rich.progress); yields
    ``advance(label)``, called as each of the ``total`` steps ends."""
    import sys

    if not sys.stderr.isatty():
        yield lambda label: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(description, total=total)
        yield lambda label: bar.update(task, advance=1, description=label)


def collectives(doc: dict, out, as_json: bool) -> None:
    """`bench collectives`: the results document with --json; else each collective's sweep in one row."""
    if as_json:
        emit_json(doc)
        return
    env = doc.get("environment") or {}
    c = console()
    if doc["runs"]:
        t = table(f"Collectives on {env.get('world_size', '?')} ranks ({env.get('backend', '?')}, "
                  f"{env.get('nodes', '?')} node(s)): status {doc['status']}", "collective", ">sizes",
                  ">smallest S", ">largest S", ">time at largest", ">busbw at largest")
        for run in doc["runs"]:
            first, last = run["rows"][0], run["rows"][-1]
            t.add_row(run["collective"], str(len(run["rows"])), format_bytes(first["bytes"], UnitSystem.iec),
                      format_bytes(last["bytes"], UnitSystem.iec), f"{last['time_s'] * 1e6:,.1f} us",
                      f"{last['busbw_bytes_per_s'] / 1e9:,.2f} GB/s")
        c.print(t)
    hint = f"; against a spec: cost4d validate {out} --hardware NAME" if doc["runs"] else ""
    c.print(f"{out}: status {doc['status']}, {len(doc['runs'])} collectives{hint}")


def gpu(doc: dict, spec, out, as_json: bool) -> None:
    """`bench gpu`: the results document with --json; else each measurement next to cost4d's figure
    for it (the spec's peaks; the FFN step's predicted time, MFU and memory)."""
    if as_json:
        emit_json(doc)
        return
    step, best = doc["ffn_step"], max(doc["matmul_bf16"], key=lambda r: r["flops_per_s"])
    c = console()
    t = table(f"bench gpu on {doc['environment']['device']}: measured vs cost4d"
              + (f" ({literal(spec.name)})" if spec else " (--hardware NAME adds the time, MFU and peaks)"),
              "quantity", ">measured", ">cost4d", ">cost4d vs measured")
    peak = spec.flops("bf16") if spec else None
    rows = [
        (f"bf16 matmul, best ({best['m']} x {best['n']} x {best['k']}) vs peak", best["flops_per_s"], peak,
         lambda v: f"{v / 1e12:,.3g} TFLOP/s"),
        ("copy (read + write) vs HBM", doc["copy"]["bytes_per_s"], spec.hbm.bandwidth_bytes_per_s if spec else None,
         lambda v: f"{v / 1e9:,.1f} GB/s"),
        ("FFN step time", step["seconds"], step.get("predicted_seconds"), lambda v: f"{v:.4g} s"),
        ("FFN step MFU", step.get("measured_mfu"), step.get("predicted_mfu"), lambda v: f"{v:.1%}"),
        ("FFN step peak memory", step["peak_memory_bytes"], step["predicted_memory_bytes"],
         lambda v: format_bytes(v, UnitSystem.iec)),
    ]
    for name, measured, predicted, shown in rows:
        t.add_row(name, "-" if measured is None else shown(measured), "-" if predicted is None else shown(predicted),
                  f"{100 * (predicted - measured) / measured:+.1f}%" if measured and predicted is not None else "-")
    c.print(t)
    c.print(f"FFN step: D = {step['d_model']}, F = {step['d_ff']}, L = {step['layers']}, {step['tokens']:,} tokens, "
            f"{step['flops']:,} FLOP; peak memory is measured on CUDA only. Results in {out}")
