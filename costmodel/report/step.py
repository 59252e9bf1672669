"""Output of `cost4d step`: the step's parts, tokens/s, MFU, HFU and the time model used."""

from __future__ import annotations

from costmodel.inputs.placement import DEFAULT_PLACEMENT
from costmodel.cost.step_range import errors, spread
from costmodel.mathops import ceil_div
from costmodel.report.common import console, emit_json, table, time_models
from costmodel.report.tables import literal


def payload(cost, hardware, convention: str = "full") -> dict:
    b = cost.step
    low_high = cost.step_range
    from costmodel.specs.load import profile_name

    return {"model": cost.shape.name, "hardware": hardware.name, "recipe": cost.recipe.name,
            "framework": profile_name(cost.framework), "devices": b.devices, "step_s": b.step_s,
            "step_s_low": low_high[0] if low_high else None, "step_s_high": low_high[1] if low_high else None,
            "range_omits_framework": cost.range_omits_framework, **_stalls(cost, hardware),
            "tokens_per_step": b.global_tokens, "tokens_per_s": b.tokens_per_s, "mfu": b.mfu_with(convention),
            "mfu_convention": f"attention {convention}{_within(cost.point.document)}, against the {b.precision} peak",
            "hfu": b.hfu_with(convention), "placement": cost.point.placement, "recompute": _recompute(cost.point),
            "checkpoint": cost.point.checkpoint,
            "precision": b.precision, "fp8_casts": b.fp8_casts if b.precision == "fp8" else None, "kernels": b.kernels,
            "bubble_fraction": b.bubble, "matmul_efficiency": b.matmul_efficiency,
            "expert_matmul_efficiency": b.expert_efficiency, "overlap": b.overlap,
            "attention_kernel": b.attention_kernel or "gemm", "document_tokens": cost.point.document,
            "attention_flops_per_s": dict(zip(("fwd", "bwd"), b.attention_rates)) if b.attention_rates else None,
            "breakdown": b.critical_parts, "totals": b.parts, "fsdp_copy_s": b.fsdp_copy_s,
            "overlaps": {"data": b.overlap, "tp": b.tp_overlap, "p2p": b.p2p_overlap, "cp": b.cp_overlap},
            "data_overlap_source": b.overlap_why,
            "step_model_source": hardware.step_model.source,
            "collective_time_model": time_models(cost.collectives),
            **_memory(cost, hardware)}


#: what each --recompute policy reruns, as `step` says it
RECOMPUTE_WORDS = {"selective": "Megatron's: the attention core", "full": "each layer from its input",
                   "every": "every K-th layer from its input", "op": "torchtitan's per-op policy: every second matmul "
                   "and all else but attention"}


def _recompute(point) -> str:
    """--recompute as given: none, selective, full, every:K or op."""
    return f"every:{point.recompute_layers}" if point.recompute == "every" else point.recompute


def _reach(point) -> str:
    """How far a rerun goes (--checkpoint), as `step` says it."""
    if point.recompute == "selective":
        return "the core only"
    return "to each layer's end" if point.checkpoint == "reentrant" else "stopping early (torch's early stop)"


def _stalls(cost, hardware) -> dict:
    """A fitted framework time's record of stalls: the range of its runs that did not stall and, of its measured
    runs nearest this layout's node count (with or without a pipeline, as this layout), how many stalled."""
    ft = cost.framework.time_on(hardware) if cost.framework is not None else None
    none = {"step_s_steady_low": None, "step_s_steady_high": None, "stall_rate": None, "layout_nodes": None}
    if ft is None or ft.stall_ratio is None or cost.shape.moe:
        return none
    nodes = ceil_div(cost.step.devices, hardware.network[0].domain_size or 1)
    rate = ft.stall_rate(cost.point.pp > 1, nodes)
    fitted = ft.max_nodes is None or nodes <= ft.max_nodes  # beyond the fitted runs' nodes, their band says nothing
    low, high = spread(cost.step.step_s, (ft.steady_low, ft.steady_high)) if fitted else (None, None)
    return {"step_s_steady_low": low, "step_s_steady_high": high, "layout_nodes": nodes,
            "stall_rate": rate.model_dump() if rate is not None else None}


def _memory(cost, hardware) -> dict:
    """Whether the layout fits the device, as `cost4d memory --hardware` judges it (the time of a layout that
    does not fit is no answer): what the busiest device needs, what it has, the verdict, the phase that peaks."""
    from costmodel.cost.capacity import capacity_bytes
    from costmodel.report.memory import needed, verdict

    capacity = capacity_bytes(hardware)
    return {"memory_bytes": round(needed(cost)), "memory_capacity_bytes": capacity,
            "memory_verdict": verdict(cost, capacity), "peak_phase": cost.heaviest.peak_phase}


def step(cost, hardware, *, as_json: bool, convention: str = "full") -> None:
    data = payload(cost, hardware, convention)
    if as_json:
        emit_json(data)
        return
    b = cost.step
    out = console()
    t = table(f"{literal(cost.shape.name)} on {b.devices} x {literal(hardware.name)}: one step", "part", ">seconds", "")
    def of(total, overlap: str, behind: str) -> str:  # an exposed part's note: the whole traffic, and where it hides
        return f"of {_s(total)} s, " + ("all on the critical path" if overlap == "none" else f"overlapped with {behind}")

    tp_note = "TP traffic " + of(b.tp_s, b.tp_overlap, "the matmuls")
    p2p_note = "pipeline sends " + of(b.p2p_s, b.p2p_overlap, "compute")
    cp_note = "CP traffic " + of(b.cp_s, b.cp_overlap, "attention (K, V passes)")
    timed = cost.framework is not None and cost.framework.time_on(hardware) is not None
    exposed_note = f"DDP/FSDP traffic of {_s(b.data_comm_s)} s, exposed ({b.overlap})"
    if timed:
        exposed_note = (f"DDP/FSDP traffic: {literal(cost.framework.name)}'s, unoverlapped, "
                        f"x{cost.framework.time.data_factor:g} (fitted)")
    experts = f"; routed experts at {b.expert_efficiency:.1%}" if b.expert_efficiency is not None else ""
    document = cost.point.document
    documents = f", in documents of {document:,} tokens" if document else ""
    gemms = "the GEMMs" if b.attention_kernel else f"with attention's ({'within documents' if document else 'full s x s'})"
    notes = {"matmul_s": f"{gemms} at {b.matmul_efficiency:.1%} of dense peak{experts}",
             "attention_s": f"flash attention ({literal(b.attention_kernel or '')}, causal{documents}) at "
                            + " / ".join(f"{r / 1e12:,.0f}" for r in b.attention_rates or ()) + " TFLOP/s fwd / bwd",
             "elementwise_s": "norms, RoPE, SwiGLU, residual adds, cross-entropy, ... (HBM, op by op"
                              + ("; eager PyTorch's kernels" if b.kernels == "eager" else "") + ")" + (
                 {"te": "; Transformer Engine's fp8 casts", "fused": "; fp8 casts fused (--fp8-casts fused)"}[b.fp8_casts]
                 if b.precision == "fp8" else "") + (
                 f"; of it FSDP2's copies around its collectives {_s(b.fsdp_copy_s)} s" if b.fsdp_copy_s else ""),
             "tp_exposed_s": tp_note, "cp_exposed_s": cp_note, "ep_s": "MoE all-to-alls, on the critical path",
             "p2p_exposed_s": p2p_note,
             "framework_s": (f"{literal(cost.framework.name)}'s kernels (x{cost.framework.time.kernel_factor:g}) or host-bound "
                             f"floor ({_s(b.host_floor_s)} s), fitted" if timed else ""),
             "bubble_s": f"pipeline bubble: {b.bubble:.1%} of the schedule's time idle",
             "data_exposed_s": exposed_note,
             "optimizer_s": "the optimizer step: state read and written once (HBM)"}
    totals = {"tp_exposed_s": b.tp_s, "cp_exposed_s": b.cp_s, "p2p_exposed_s": b.p2p_s, "data_exposed_s": b.data_comm_s}
    for key, value in b.critical_parts.items():  # the parts that add up to the step; hidden traffic shows as 0
        if value or totals.get(key):
            t.add_row(key.removesuffix("_s").replace("_", " "), _s(value), notes[key])
    low_high = cost.step_range
    no_range = "no fitted range for MoE models (no fitted run had experts)" if cost.shape.moe else \
        "no fitted range for this device"
    t.add_row("[bold]step[/]", f"[bold]{_s(b.step_s)}[/]",
              f"range {_s(low_high[0])} - {_s(low_high[1])}" if low_high else no_range)
    out.print(t)
    out.print(f"{b.global_tokens:,} tokens per step -> {b.tokens_per_s:,.0f} tokens/s; MFU {data['mfu']:.1%} "
              f"(attention counted {convention}{' s x s' if convention == 'full' else ': half of s x s'}"
              f"{_within(cost.point.document)}), "
              f"HFU {data['hfu']:.1%} (peak {b.peak_flops / 1e12:,.1f} TFLOP/s {data['precision']} dense)")
    if cost.point.placement != DEFAULT_PLACEMENT:
        out.print(f"Placement, innermost (fastest level) first: {cost.point.placement}")
    if data["recompute"] != "none":
        f = cost.flops
        out.print(f"Recomputation {data['recompute']} ({RECOMPUTE_WORDS[cost.point.recompute]}; "
                  f"{_reach(cost.point)}): {f.recompute_per_token / f.per_token:.1%} of the model's FLOPs run again")
    if b.data_comm_s:
        out.print(f"DP/FSDP traffic: {'hidden behind backward where it can' if b.overlap == 'overlap' else 'not overlapped'}"
                  f" ({b.overlap}: {b.overlap_why})")
    out.print(f"Step-model parameters: {literal(hardware.step_model.source)}")
    if cost.framework is not None and cost.framework.recompute_note and cost.point.recompute == "none":
        out.print(f"Recomputation ({literal(cost.framework.name)}): {literal(cost.framework.recompute_note)}")
    if cost.framework is not None and cost.framework.time is not None and not timed:
        out.print(f"{literal(cost.framework.name)}'s fitted time is for {cost.framework.time.hardware} (its runs'); "
                  f"not applied on {literal(hardware.name)}")
    if low_high and timed:
        low, high = errors(hardware, b.precision, cost.shape.moe, cost.framework)
        out.print(f"{literal(cost.framework.name)}'s time: {literal(cost.framework.time.fitted_on)}. Range: 90% of those runs "
                  f"measured {_times(high)} to {_times(low)} the prediction (the slowest stalled)")
        if data["stall_rate"]:
            ft, rate = cost.framework.time, data["stall_rate"]
            count = "node" if rate["nodes"] == 1 else "nodes"
            out.print(f"Stalls: this layout spans {data['layout_nodes']} node{'s' if data['layout_nodes'] > 1 else ''}; of "
                      f"the measured runs {'with' if rate['pipelined'] else 'without'} a pipeline at the nearest count at "
                      f"or below ({rate['nodes']} {count}), {rate['stalled']} of {rate['runs']} "
                      f"({rate['stalled'] / rate['runs']:.0%}) took over {ft.stall_ratio:g}x the prediction. " + (
                          f"90% of the fitted runs that did not stall measured {_times(ft.steady_high)} to "
                          f"{_times(ft.steady_low)} the prediction: {_s(data['step_s_steady_low'])} - "
                          f"{_s(data['step_s_steady_high'])} s" if data["step_s_steady_low"] is not None else
                          f"The fit's runs span at most {ft.max_nodes} nodes: no range of runs that did not stall"))
    elif low_high and b.slowest_measured_s is not None:  # on the device the slowest measured framework ran on
        from costmodel.specs.framework_catalog import SLOWEST_MEASURED

        low, high = errors(hardware, b.precision, cost.shape.moe)
        out.print(f"Range: no run of {literal(cost.framework.name)} is in the training data. Its fast end is the band of "
                  f"the runs {literal(hardware.name)}'s step model was fitted on (measured {_times(high)} to "
                  f"{_times(low)} the prediction); its slow end at least this layout, under "
                  f"{literal(cost.framework.name)}'s recipe and overlap, at {SLOWEST_MEASURED}'s fitted time "
                  f"({_s(b.slowest_measured_s)} s), the slowest framework that has runs")
    elif low_high and hardware.step_model.fraction_range is not None:
        low, high = errors(hardware, b.precision, cost.shape.moe)
        f_low, f_high = hardware.step_model.fraction_range
        out.print(f"Range: no run on {literal(hardware.name)} is in the training data. The step fraction "
                  f"({hardware.step_model.sustained_fraction:g}) is borrowed, so the matmuls and attention are timed "
                  f"at any fraction from {f_low:g} to {f_high:g} (the spec says why), and the band of the runs it was "
                  f"fitted on (measured {_times(high)} to {_times(low)} the prediction) is added" + _unmeasured(cost))
    elif low_high:
        low, high = errors(hardware, b.precision, cost.shape.moe)
        out.print(f"Range: the fit's rows (held out and fitted) measured {_times(high)} to {_times(low)} their "
                  f"predictions; other frameworks can fall outside it" + _unmeasured(cost))
    out.print("Collective times: " + "; ".join(data["collective_time_model"]))
    _memory_line(out, cost, hardware)


def _unmeasured(cost) -> str:
    """What a range leaves out for a framework with no runs where no measured framework's time applies (the slowest
    one's was fitted on another device): its own overheads."""
    if not cost.range_omits_framework:
        return ""
    from costmodel.specs.framework_catalog import FRAMEWORKS, SLOWEST_MEASURED

    return (f". No run of {literal(cost.framework.name)} is in the training data, and {SLOWEST_MEASURED}'s fitted "
            f"time, which bounds its slow end on {literal(FRAMEWORKS[SLOWEST_MEASURED].time.hardware)}, does not apply "
            f"here: the range leaves its framework overheads out")


def _times(error) -> str:
    """A band end, prediction / measured - 1, as measured / predicted ("0.97x")."""
    return f"{1 / (1 + error):.2f}x"


def _within(document) -> str:
    return f", within documents of {document:,} tokens" if document else ""


def _s(seconds: float) -> str:
    """Seconds to 0.1 ms, or three significant digits below a millisecond (a tiny step is not 0.0000)."""
    return f"{seconds:.4f}" if seconds >= 1e-3 or seconds == 0 else f"{seconds:.3g}"


def _memory_line(out, cost, hardware) -> None:
    """The memory verdict (:func:`_memory`) as one line."""
    from costmodel.report.memory import VERDICTS

    memory = _memory(cost, hardware)
    need, capacity, judged = memory["memory_bytes"], memory["memory_capacity_bytes"], VERDICTS[memory["memory_verdict"]]
    out.print(f"Memory: {need / 1e9:,.2f} GB per device of {literal(hardware.name)}'s {capacity / 1e9:,.2f} GB: "
              f"{judged} (`cost4d memory` with the same layout flags itemises it; it takes no time options)")
