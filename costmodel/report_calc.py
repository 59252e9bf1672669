"""Output of `cost4d flops` and `cost4d comm`: tables naming their units, or JSON."""

from __future__ import annotations

from costmodel.report import console, emitted_json, layout_text, number, table
from costmodel.units import format_bytes


def flops(model, layout, result, *, as_json, symbolic):
    """Print forward/backward FLOPs per token and per step."""
    payload = {
        "model": model.name, "tokens": result.tokens,
        "forward_flops_per_token": number(result.forward_per_token),
        "backward_flops_per_token": number(result.backward_per_token),
        "flops_per_token": number(result.per_token),
        "forward_flops": number(result.forward), "backward_flops": number(result.backward),
        "total_flops": number(result.total), "flops_per_device": number(result.per_device),
        "six_n_t": 6 * _params(model) * result.tokens,
        "recompute_flops_per_token": number(result.recompute_per_token),
        "hardware_flops_per_token": number(result.hardware_per_token),
        "recompute": layout.recompute,
    }
    sym = _flops_symbolic(model) if symbolic else None
    if emitted_json(payload, sym, as_json):
        return
    out = console()
    if sym:
        out.print("[bold]Formula[/] (FLOPs per token; multiply by the B tokens of a step; D width, "
                  "F MLP width, L layers, a heads, k KV heads, d_h head width, V vocab, s sequence)")
        for name, expr in sym.items():
            out.print(f"  {name} = {expr}")
    t = table(f"{model.name}: FLOPs (matmuls) for {result.tokens:,} tokens", "pass", ">per token", ">per step")
    t.add_row("forward", f"{result.forward_per_token:,.0f}", f"{result.forward:.4e}")
    t.add_row("backward", f"{result.backward_per_token:,.0f}", f"{result.backward:.4e}")
    t.add_row("[bold]model total[/] (MFU counts these)", f"{result.per_token:,.0f}", f"{result.total:.4e}")
    if result.recompute_per_token:
        t.add_row(f"recomputed forward ({layout.recompute})", f"{result.recompute_per_token:,.0f}",
                  f"{result.recompute_per_token * result.tokens:.4e}")
        t.add_row("[bold]hardware total[/] (HFU counts these)", f"{result.hardware_per_token:,.0f}",
                  f"{result.hardware_per_token * result.tokens:.4e}")
    out.print(t)
    out.print(f"6 N T rule of thumb: {payload['six_n_t']:.4e}; per device (tp x pp x cp = "
              f"{result.devices_per_replica}): {result.per_device:.4e} FLOP")


def _params(model) -> int:
    from costmodel.strategies.model import total_params

    return total_params(model)


def _flops_symbolic(model) -> dict:
    from costmodel import symbolic as sy

    return {k: sy.text(v) for k, v in sy.flops_expressions(model).items()}


def comm(model, recipe, layout, hardware, rows, *, units, as_json, symbolic):
    """Print each collective of a step: buffer, bytes sent, level, time."""
    payload = {
        "model": model.name, "hardware": hardware.name, "recipe": recipe.name,
        "layout": layout.model_dump(),
        "collectives": [
            {"op": r.collective.op, "axis": r.collective.axis, "purpose": r.collective.purpose,
             "phase": r.collective.phase, "group": r.collective.group, "calls": r.collective.calls,
             "buffer_bytes_per_call": number(r.collective.buffer_bytes),
             "bytes_sent": number(r.collective.bytes_sent), "level": r.link.level,
             "bandwidth_bytes_per_s": r.link.bandwidth, "seconds": r.seconds}
            for r in rows],
        "total_bytes_sent": number(sum(r.collective.bytes_sent for r in rows)),
        "total_seconds": sum(r.seconds for r in rows),
        "convention": "time = bytes sent / egress bandwidth of the axis; no latency, no overlap",
    }
    sym = _comm_symbolic(model, recipe, layout) if symbolic else None
    if emitted_json(payload, sym, as_json):
        return
    out = console()
    if sym:
        out.print("[bold]Formula[/] (bytes one device sends per step; P = params on the device "
                  "before data sharding, N fsdp, R dp, Y tp, B tokens, D width, L layers)")
        for line in sym:
            out.print(f"  {line['op']} {line['axis']} ({line['purpose']}): {line['bytes_sent']}")
    t = table(f"{model.name} on {hardware.name}: collectives per step ({layout_text(layout)})",
              "axis", "collective", "what (pass)", ">n", ">calls", ">S per call", ">sent", "link", ">ms")
    for r in rows:
        c = r.collective
        t.add_row(c.axis, c.op, f"{c.purpose} ({c.phase})", str(c.group), str(c.calls),
                  format_bytes(c.buffer_bytes, units), format_bytes(c.bytes_sent, units),
                  r.link.level, f"{r.seconds * 1e3:,.3f}")
    out.print(t)
    if not rows:
        out.print("No collectives: every axis has degree 1.")
    out.print(f"Total sent per device: {format_bytes(payload['total_bytes_sent'], units)}; "
              f"time {payload['total_seconds'] * 1e3:,.3f} ms ({payload['convention']}).")


def _comm_symbolic(model, recipe, layout) -> list[dict]:
    from costmodel import symbolic as sy

    return [{"op": c.op, "axis": c.axis, "purpose": c.purpose,
             "bytes_sent": sy.text(sy.sp.simplify(c.bytes_sent))}
            for c in sy.collective_expressions(model, recipe, layout)]
