"""Output of `cost4d memory`: the heaviest stage's components, every stage with --pp, the formula."""

from __future__ import annotations

from costmodel.cost.memory import (CACHED_SEGMENTS, OVERHEADS, fsdp_gathers_in_compute_dtype, reserved_only,
                                   weight_copy_kind)
from costmodel.report.common import (console, emitted_json, in_units, layout_text, number, print_formula, table,
                                     unit_name)
from costmodel.report.tables import literal
from costmodel.specs.load import profile_name
from costmodel.units import UnitSystem, format_bytes

COMPONENT_LABELS = {
    "weights": "low-precision weights",
    "master_weights": "master weights",
    "grads": "accumulated gradients",
    "unsharded_grads": "unsharded gradients (FSDP in pipeline stages)",
    "optimizer": "optimizer state",
    "weight_copies": "weight copies saved for backward",
    "activations": "activations saved for backward",
}
OVERHEAD_LABELS = {
    "ddp_buckets": "DDP gradient buckets",
    "sp_gather_buffer": "SP all-gather buffer",
    "pending_reduce_scatters": "TP reduce-scatter inputs not yet reusable (pp 1, host ahead; reserved)",
    "loss_upcast": "logits cast to fp32 for the loss",
    "recomputed_layer": "a recomputed layer's tensors in its backward",
    "ring_attention": "torch's ring attention in a layer's backward",
    "wgrad_cache": "TE's cached weight-gradient buffers",
    "fsdp_in_flight": "FSDP gathered blocks and reduce-scatter input",
    "p2p_buffers": "pipeline receive buffers",
    "zero1_gather": "ZeRO-1 parameter all-gather buffers",
    "zero_grad_bucket": "ZeRO contiguous gradient bucket",
    "zero3_grad_bucket": "ZeRO-3 contiguous gradient bucket",
    "zero3_bucket_copy": "ZeRO-3 reduce-scatter copy of the bucket",
    "zero_output_grad": "output layer's whole gradient (ZeRO-2/3)",
    "zero2_partition_overhang": "ZeRO-2 gradient buffer: whole parameters past P/N",
    "zero1_grad_buffer": "ZeRO-1 gradient partition buffer (reduced in backward)",
    "zero1_sync_buffer": "ZeRO-1 gradient partition buffer (beside the full gradients)",
    "zero2_accumulation_buffer": "ZeRO-2 gradient accumulation: a second partition buffer",
    "zero1_freed_grads": "ZeRO-1: full gradient freed before the step (its partition kept)",
    "zero_step_grads": "ZeRO step's fp64 norm / fp32 gradient copies",
    "zero3_live_params": "ZeRO-3 gathered parameters in flight",
    "optimizer_temporaries": "foreach optimizer temporaries",
    "activation_reserve": "allocator reserve on activations (fitted)",
    "reserve": "allocator reserve (fitted)",
}


#: a verdict (verdict()) as the output words it
VERDICTS = {"fits": "fits", "tight": "may not fit", "oom": "does NOT fit"}


def reserved_reading(top, units) -> str:
    """What the reserved peak holds beyond the allocated one: the phase it peaks in, what no tensor holds there,
    and the segments the caching allocator keeps from another phase."""
    held = [OVERHEAD_LABELS[k] for k, v in top.overheads.items()
            if v and reserved_only(k) and top.reserved_phase in OVERHEADS[k][0]]
    cached = [f"the {OVERHEAD_LABELS[k]} ({in_units(top.overheads[k], units)} {unit_name(units)}) kept cached from the "
              f"{'/'.join(OVERHEADS[k][0])}" for k in CACHED_SEGMENTS
              if top.overheads.get(k) and top.reserved_phase not in OVERHEADS[k][0]]
    if not held + cached:
        return f"Peak reserved: the {top.reserved_phase}'s allocations, nothing beyond them."
    kept = " (the caching allocator keeps a freed block for reuse)" if cached else ""
    return f"Peak reserved: the {top.reserved_phase}'s allocations + " + " + ".join(held + cached) + kept + "."


def needed(cost) -> float:
    """What the heaviest stage needs of the device: reserved peak plus what lives outside the allocator."""
    outside = cost.framework.outside_allocator_bytes if cost.framework is not None else 0
    return cost.heaviest.reserved_bytes + outside


def verdict(cost, capacity) -> str:
    """fits / tight / oom: against the band the framework's fit gives (the exact accounting: no band)."""
    need = needed(cost)
    if cost.framework is None:
        return "fits" if need <= capacity else "oom"
    outside = cost.framework.outside_allocator_bytes
    low, high = cost.framework.band(cost.heaviest.reserved_bytes)
    return "fits" if high + outside <= capacity else "oom" if low + outside > capacity else "tight"


def payload(cost, layout, hardware, worth: list, capacity, fits: bool) -> dict:
    """The JSON of `cost4d memory` (raw bytes)."""
    top = cost.heaviest
    out = {
        "model": cost.shape.name, "recipe": cost.recipe.name, "layout": {**layout.model_dump(), "split": cost.point.split, "cp_kind": cost.point.cp_kind},
        "params": cost.params, "active_params": cost.shape.active_params(), "params_per_device": top.stage.params,
        "expert_params_per_device": top.stage.expert_params,
        "components": {k: number(v) for k, v in top.components.items()},
        "total_bytes": number(top.total_bytes),
        "framework": profile_name(cost.framework),
        "overheads": {k: {"bytes": round(v), "phases": list(OVERHEADS[k][0]), "fitted": OVERHEADS[k][1],
                          "reserved_only": reserved_only(k)}
                      for k, v in top.overheads.items() if v},
        "peak_bytes": number(top.peak_bytes), "reserved_bytes": round(top.reserved_bytes),
        "peak_phase": top.peak_phase,
        **({"reserved_bytes_low": round(cost.framework.band(top.reserved_bytes)[0]),
            "reserved_bytes_high": round(cost.framework.band(top.reserved_bytes)[1])} if cost.framework else {}),
        "outside_allocator_bytes": number(cost.framework.outside_allocator_bytes) if cost.framework else 0,
        "state_bytes_unsharded": number(cost.state_bytes_unsharded),
        "activation_bytes_per_token": number(top.stage.activation_bytes_per_token),
        "weight_copies": weight_copy_kind(cost.recipe, cost.point),
        "devices_worth": {"hardware": hardware.name,
                          "readings": [{"convention": r.convention, "capacity_bytes": number(r.capacity_bytes),
                                        "ratio": r.ratio, "devices": r.devices} for r in worth]},
    }
    if fits:
        out["fits"] = {"hardware": hardware.name, "capacity_bytes": capacity, "needed_bytes": round(needed(cost)),
                       "fits": needed(cost) <= capacity, "verdict": verdict(cost, capacity)}
    if layout.pp > 1:
        out["pipeline"] = {"schedule": layout.schedule, "stages": layout.pp, "microbatches": layout.m,
                           "chunks": layout.chunks, "bubble_fraction": cost.bubble,
                           "p2p_bytes_per_microbatch": number(cost.p2p_bytes_per_microbatch)}
        out["stages"] = [{"stage": s.stage.role.index, "layers": s.stage.layers, "params_per_device": s.stage.params,
                          "activation_bytes": number(s.activation_bytes), "total_bytes": number(s.total_bytes),
                          "reserved_bytes": round(s.reserved_bytes)}
                         for s in cost.stages]
    return out


def memory(cost, layout, hardware, worth: list, capacity, *, fits: bool, units, as_json: bool,
           formula=None) -> None:
    """Print the per-device memory breakdown (and, with a formula, the formula first); ``worth`` is
    :func:`costmodel.cost.capacity.devices_worth` of the unsharded state, ``capacity`` the HBM a process can use."""
    data = payload(cost, layout, hardware, worth, capacity, fits)
    sym = symbolic_payload(cost, formula) if formula is not None else None
    if emitted_json(data, sym, as_json):
        return
    out = console()
    if sym:
        print_formula(out, "bytes per device, heaviest stage", {**sym["components"], "total": sym["total"]},
                      formula.legend(*formula_exprs(cost, formula).values()))
        out.print(f"  total evaluated = {sym['total_evaluated']:,} B\n")
    top = cost.heaviest
    active = f" ({cost.shape.active_params():,} active per token)" if cost.shape.moe else ""
    out.print(f"[bold]{literal(cost.shape.name)}[/]: {cost.params:,} parameters{active}; recipe [bold]{literal(cost.recipe.name)}[/] "
              f"({literal(cost.recipe.description)}); layout: {layout_text(layout, cost.point.cp_in_data)}; {layout.tokens:,} tokens per micro-batch (--tokens)")
    kind = data["weight_copies"]
    t = table("Memory per device", "component", ">bytes", f">{unit_name(units)}")
    for name, value in top.components.items():
        if (name == "weight_copies" and kind == "none") or (name == "unsharded_grads" and not value):
            continue  # what the layout does not use (no copies; no FSDP inside its pipeline stages)
        label = COMPONENT_LABELS[name] + (f" ({kind})" if name == "weight_copies" else "")
        t.add_row(label, f"{value:,.0f}", in_units(value, units))
    label = "total" if not top.overheads else "total, exact accounting"
    t.add_row(f"[bold]{label}[/]", f"[bold]{top.total_bytes:,.0f}[/]", f"[bold]{in_units(top.total_bytes, units)}[/]")
    if top.overheads:
        for name, value in top.overheads.items():
            if not value:
                continue
            t.add_row(f"+ {OVERHEAD_LABELS[name]} [{'/'.join(OVERHEADS[name][0])}]", f"{value:,.0f}", in_units(value, units))
        t.add_row(f"peak allocated ({top.peak_phase})", f"{top.peak_bytes:,.0f}", in_units(top.peak_bytes, units))
        t.add_row("[bold]peak reserved[/]", f"[bold]{top.reserved_bytes:,.0f}[/]",
                  f"[bold]{in_units(top.reserved_bytes, units)}[/]")
    out.print(t)
    if top.overheads:
        out.print(reserved_reading(top, units))
    if fsdp_gathers_in_compute_dtype(cost.recipe, cost.point):
        r = cost.recipe
        out.print(f"FSDP gathers the weights in {r.compute} (FSDP2's MixedPrecisionPolicy(param_dtype={r.compute})); "
                  f"gathered in {r.master} without it, autocast would also keep a {r.compute} copy of each weight for "
                  "backward, as without FSDP.")
    if cost.framework is not None:
        out.print(f"Framework [bold]{literal(cost.framework.name)}[/]: peak is the largest phase (forward-backward, gradient sync, optimizer step), not the sum of every term; "
                  f"fitted on {cost.framework.fitted_on or 'nothing'}.")
        if cost.framework.recompute_note and cost.point.recompute == "none":
            out.print(f"Recomputation ({literal(cost.framework.name)}): {literal(cost.framework.recompute_note)}")
    if layout.pp > 1:
        _print_stages(out, cost, data["pipeline"], units)
    per_token = top.stage.activation_bytes_per_token
    dtypes = cost.recipe.activations + (f"; residual stream {cost.recipe.master} under autocast"
                                        if top.stage.autocast is True and cost.shape.attention else "")
    out.print(f"Saved for backward per token ({dtypes}): {per_token:,.0f} B "
              f"= {format_bytes(per_token, units)}" + ("" if layout.tokens else "  (pass --tokens to add activations)"))
    state = cost.state_bytes_unsharded
    out.print(f"Unsharded training state ({cost.recipe.state_bytes_per_param} B/param): {state:,.0f} B "
              f"= {state / 1e9:,.1f} GB = {state / 2**30:,.1f} GiB")
    for r in worth:
        out.print(f"  = {r.ratio:.2f} -> {r.devices} x {literal(hardware.name)} at {r.label}")
    if fits:
        verdict = VERDICTS[data["fits"]["verdict"]]
        outside = data["outside_allocator_bytes"]
        extra = f" (reserved + {format_bytes(outside, units)} outside the allocator)" if outside else ""
        band = ""
        if cost.framework is not None:
            low, high = data["reserved_bytes_low"] + outside, data["reserved_bytes_high"] + outside
            band = (f"; 90% of the fitted runs measured within {format_bytes(low, units)} to "
                    f"{format_bytes(high, units)}")
        out.print(f"Per-device need {format_bytes(needed(cost), units)}{extra} {verdict} in "
                  f"{literal(hardware.name)}'s {format_bytes(capacity, units)}{band}")
    out.print(f"Units: {unit_name(units)} = {'1e9' if units == UnitSystem.si else '2^30'} bytes.")


def _print_stages(out, cost, pipe: dict, units) -> None:
    t = table(f"Pipeline stages ({pipe['schedule']}, m = {pipe['microbatches']}, bubble "
              f"{pipe['bubble_fraction']:.1%} of the step; {format_bytes(pipe['p2p_bytes_per_microbatch'], units)} "
              "sent to the next stage per micro-batch, each way)", ">stage", ">layers", ">params/device",
              f">activations {unit_name(units)}", f">total {unit_name(units)}", "")
    heaviest = cost.heaviest.stage.role.index
    last = len(cost.stages) - 1
    for s in cost.stages:
        i = s.stage.role.index
        role = ", ".join(r for r, on in (("first", i == 0), ("last", i == last), ("heaviest", i == heaviest)) if on)
        t.add_row(str(i), str(s.stage.layers), f"{s.stage.params:,}", in_units(s.activation_bytes, units),
                  in_units(s.reserved_bytes, units), role)
    out.print(t)
    out.print(f"The table above is stage {heaviest}, the heaviest.")


def formula_exprs(cost, formula) -> dict:
    """The heaviest stage's components in letters (the symbolic stage with the same role)."""
    index = cost.heaviest.stage.role.index
    last = len(cost.stages) - 1
    roles = [s.stage.role.index for s in formula.cost.stages]
    wanted = None if (index == last and index > 0) else index
    if wanted not in roles:  # one stage: the symbolic view has it as stage 0
        wanted = roles[0]
    return formula.cost.stages[roles.index(wanted)].components


def symbolic_payload(cost, formula) -> dict:
    """Components and total in letters, the letters' values, and the total evaluated at them."""
    from costmodel.cost import symbolic as sy

    comps = formula_exprs(cost, formula)
    total = sy.collect_total(comps)
    return {"components": {k: sy.text(v) for k, v in comps.items() if v != 0},
            "total": sy.text(total), "latex": sy.latex(total),
            "heaviest_of_stages": sy.text(formula.cost.memory_bytes) if len(formula.cost.stages) > 1 else None,
            "letters": {k: {"meaning": m, "value": number(v)} for k, (m, v) in formula.legend(total).items()},
            "total_evaluated": number(formula.at(total))}
