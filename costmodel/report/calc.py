"""Output of `cost4d flops` and `cost4d comm`: tables naming their units, or JSON."""

from __future__ import annotations

from costmodel.cost.evaluate import comm_recipe
from costmodel.report.common import console, emitted_json, layout_text, number, print_formula, table, time_models
from costmodel.report.tables import literal
from costmodel.units import format_bytes


def flops(cost, layout, *, as_json, formula=None):
    """Print forward/backward FLOPs per token and per micro-batch of the replica."""
    result = cost.flops
    payload = {
        "model": cost.shape.name, "tokens": result.tokens, "seq": cost.shape.seq_len or None,
        "forward_flops_per_token": number(result.forward_per_token),
        "backward_flops_per_token": number(result.backward_per_token),
        "flops_per_token": number(result.per_token),
        "forward_flops": number(result.forward), "backward_flops": number(result.backward),
        "total_flops": number(result.total), "flops_per_device": number(result.per_device),
        "stage_imbalance": result.stage_imbalance,
        "six_n_t": cost.six_n_t,
        "recompute_flops_per_token": number(result.recompute_per_token),
        "hardware_flops_per_token": number(result.hardware_per_token),
        "recompute": layout.recompute,
        "padding_flops_per_token": number(result.padding_per_token),
    }
    sym = flops_symbolic(formula) if formula is not None else None
    if emitted_json(payload, sym, as_json):
        return
    out = console()
    if sym:
        f = formula.cost.flops
        print_formula(out, "FLOPs per token; a step multiplies by its tokens", sym["expressions"],
                      formula.legend(f.forward_per_token, f.backward_per_token, f.recompute_per_token))
    span = f" (sequences of {cost.shape.seq_len:,})" if cost.shape.seq_len else ""
    t = table(f"{literal(cost.shape.name)}: FLOPs (matmuls) for {result.tokens:,} tokens{span}", "pass", ">per token", ">per step")
    t.add_row("forward", f"{result.forward_per_token:,.0f}", f"{result.forward:.4e}")
    t.add_row("backward", f"{result.backward_per_token:,.0f}", f"{result.backward:.4e}")
    t.add_row("[bold]model total[/] (MFU counts these)", f"{result.per_token:,.0f}", f"{result.total:.4e}")
    if result.recompute_per_token:
        flavour = f", {layout.checkpoint}" if layout.recompute in ("full", "every") else ""
        t.add_row(f"recomputed forward ({layout.recompute}{flavour})", f"{result.recompute_per_token:,.0f}",
                  f"{result.recompute_per_token * result.tokens:.4e}")
    if result.padding_per_token:
        t.add_row(f"MoE capacity padding (factor {cost.shape.capacity_factor:g})", f"{result.padding_per_token:,.0f}",
                  f"{result.padding_per_token * result.tokens:.4e}")
    if result.recompute_per_token or result.padding_per_token:
        t.add_row("[bold]hardware total[/] (HFU counts these)", f"{result.hardware_per_token:,.0f}",
                  f"{result.hardware_per_token * result.tokens:.4e}")
    out.print(t)
    active = " (N: active parameters)" if cost.shape.moe else ""
    busiest = (f"; the busiest pipeline stage's, {result.stage_imbalance:.4f} x an even share"
               if layout.pp > 1 else "")
    out.print(f"6 N T rule of thumb{active}: {payload['six_n_t']:.4e}; per device (tp x pp x cp = "
              f"{result.devices_per_replica}{busiest}): {result.per_device:.4e} FLOP")


def flops_symbolic(formula) -> dict:
    from costmodel.cost import symbolic as sy

    f = formula.cost.flops
    exprs = {"forward_per_token": f.forward_per_token, "backward_per_token": f.backward_per_token}
    if f.recompute_per_token != 0:
        exprs["recompute_per_token"] = f.recompute_per_token
    return {"expressions": {k: sy.text(sy.sp.expand(v)) for k, v in exprs.items()},
            "evaluated": {k: number(formula.at(v)) for k, v in exprs.items()}}


CONVENTION = ("time = the spec's calibration where it has one; else NCCL's tuner where the spec names its topology "
              "(the fastest algorithm and protocol at each size); else latency + ring (two levels across nodes) over "
              "the level's bandwidth x efficiency; collectives summed, no overlap")


def comm(cost, layout, hardware, *, units, as_json, formula=None):
    """Print each collective of a step: buffer, bytes sent, level, time, and which calibration."""
    rows = cost.collectives
    payload = {
        "model": cost.shape.name, "hardware": hardware.name, "recipe": cost.recipe.name,
        "framework": cost.framework.name if cost.framework is not None else "exact",
        "gradient_dtype": comm_recipe(cost.recipe, cost.framework).grad_comm,  # what the data axis reduces
        "layout": {**layout.model_dump(), "cp_kind": cost.point.cp_kind},  # the kind priced (a framework's own)
        "collectives": [
            {"op": r.collective.op, "axis": r.collective.axis, "purpose": r.collective.purpose,
             "phase": r.collective.phase, "group": r.collective.group, "calls": r.collective.calls,
             "buffer_bytes_per_call": number(r.collective.buffer_bytes),
             "bytes_sent": number(r.collective.bytes_sent), "level": r.level, "calibration": r.calibration,
             "seconds_per_call": r.seconds_per_call, "seconds": r.seconds}
            for r in rows],
        "total_bytes_sent": number(cost.bytes_sent),
        "total_seconds": cost.comm_seconds,
        "convention": CONVENTION,
        "time_model": time_models(rows),
    }
    sym = comm_symbolic(formula) if formula is not None else None
    if emitted_json(payload, sym, as_json):
        return
    out = console()
    if sym:
        out.print("[bold]Formula[/] (bytes one device sends per step, every collective the table lists)")
        for line in sym["collectives"]:
            out.print(f"  {line['op']} {line['axis']} ({line['purpose']}, {line['phase']}): {line['bytes_sent']}")
        for letter, (meaning, value) in formula.legend(*(getattr(c, 'collective', c).bytes_sent
                                                          for c in formula.cost.collectives)).items():
            out.print(f"  {letter} = {number(value):,}" + (f"  ({meaning})" if meaning else ""))
    by = (f", framework {literal(cost.framework.name)}: gradients in {payload['gradient_dtype']}"
          if cost.framework is not None else "")
    t = table(f"{literal(cost.shape.name)} on {literal(hardware.name)}: collectives per step "
              f"({layout_text(layout, cost.point.cp_in_data)}{by})",
              "axis", "collective", "what (pass)", ">n", ">calls", ">S per call", ">sent", "level", ">ms")
    for r in rows:
        c = r.collective
        t.add_row(c.axis, c.op, f"{c.purpose} ({c.phase})", str(c.group), str(c.calls),
                  format_bytes(c.buffer_bytes, units), format_bytes(c.bytes_sent, units),
                  r.level, f"{r.seconds * 1e3:,.3f}")
    out.print(t)
    idle = [name for name in ("tp", "cp", "pp", "ep") if getattr(layout, name) > 1] if not layout.tokens else []
    if idle:
        out.print(f"No tokens (--tokens 0, the default): the activations' collectives ({', '.join(idle).upper()}) move "
                  "nothing and are left out; give --tokens to price them.")
    elif not rows:
        out.print("No collectives: every axis has degree 1.")
    out.print(f"Total sent per device: {format_bytes(payload['total_bytes_sent'], units)}; "
              f"time {payload['total_seconds'] * 1e3:,.3f} ms ({CONVENTION}).")
    out.print("Time model: " + "; ".join(payload["time_model"]))


def comm_symbolic(formula) -> dict:
    from costmodel.cost import symbolic as sy

    rows = [getattr(r, "collective", r) for r in formula.cost.collectives]
    # the rows the table lists: a formula that is 0 at this layout (expert-data traffic where E_p = R) is no call
    evaluated = [(c, formula.at(c.bytes_sent)) for c in rows]
    return {"collectives": [
        {"op": c.op, "axis": c.axis, "purpose": c.purpose, "phase": c.phase,
         "bytes_sent": sy.text(sy.sp.factor(c.bytes_sent)), "bytes_sent_evaluated": number(value)}
        for c, value in evaluated if value]}
