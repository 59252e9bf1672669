"""`cost4d solve ...`: inverse questions, answered (`cost4d explain ...` derives them: cli/explain.py)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from costmodel.cli import options as o
from costmodel.errors import CostModelError
from costmodel.cli.layout import MEMORY, with_batch_question, with_layout

solve_app = typer.Typer(help="Answer inverse questions: smallest N_FSDP or EP that fits, compute-bound batch.",
                        no_args_is_help=True)


def _limit(limit: Optional[str], hardware: Optional[str]):
    """The memory limit in bytes and where it came from."""
    from costmodel.specs.load import load_hardware
    from costmodel.inputs.numbers import memory_limit

    if limit is not None:
        return memory_limit(limit), f"--limit {limit}"
    if hardware is None:
        raise CostModelError("give --limit (e.g. 95GB) or --hardware")
    device = load_hardware(hardware)
    capacity = device.hbm.usable_bytes or device.hbm.capacity_bytes
    return capacity, f"{device.name} HBM ({'usable' if device.hbm.usable_bytes else 'nominal'})"


def _fsdp_answer(spec, rec, layout, limit_bytes, source, framework=None):
    from costmodel.solve.fsdp import solve_fsdp
    from costmodel.units import format_bytes

    answer = solve_fsdp(spec, rec, layout, limit_bytes, framework)
    if answer.n_fsdp is None and answer.searched:
        raise CostModelError(f"no N_FSDP fits {source} ({format_bytes(limit_bytes)}): even at N = {answer.most:,} "
                             f"(the most the device bound leaves) the framework's need is "
                             f"{format_bytes(answer.replicated_bytes)}: what N does not shard is more than the limit "
                             f"(`cost4d memory` with --fsdp {answer.most} and the same flags itemises it)")
    if answer.n_fsdp is None:
        tail = (f"; at most {answer.max_tokens:,} tokens leave room for some N" if answer.max_tokens else
                "; even the state alone does not fit (what N does not shard: replicated, or held unsharded as a "
                "pipeline's FSDP gradients are)")
        raise CostModelError(f"no N_FSDP fits {source} ({format_bytes(limit_bytes)}): what N does not shard "
                             f"already takes {format_bytes(answer.replicated_bytes)}{tail}")
    return answer


#: memory's layout options but the ones that set --fsdp (the solver's unknown): --fsdp and --hsdp-group
FSDP_SOLVE = tuple(name for name in MEMORY if name not in ("fsdp", "hsdp_group"))


@solve_app.command("fsdp")
@with_layout(*FSDP_SOLVE, fixed={"fsdp": 2})  # the solver varies fsdp; 2 puts the layout in the FSDP regime
def solve_fsdp_cmd(
    model: o.ModelOpt,
    limit: o.LimitOpt = None,
    hardware: o.HardwareOpt = None,
    recipe: o.RecipeOpt = None,
    framework: o.FrameworkOpt = "exact",
    as_json: o.JsonOpt = False,
    symbolic: o.SymbolicOpt = False,
    *,
    layout,
) -> None:
    """Smallest N_FSDP with per-device memory under the limit: M(N) = a + b/N < limit, N > b/(limit - a).

    With --framework the memory is the framework's reserved peak plus what it holds outside the
    allocator (what `memory --framework` prints as the need); N is then found by bisection.

    Example: cost4d solve fsdp --model xxl --limit 95GB
    """
    from costmodel.report.common import emitted_json, number, say
    from costmodel.specs.load import load_run, profile_name

    frame, spec, rec = load_run(model, recipe, framework)
    if symbolic and frame is not None:
        raise CostModelError("--symbolic solves the exact accounting; drop --framework")
    limit_bytes, source = _limit(limit, hardware)
    answer = _fsdp_answer(spec, rec, layout, limit_bytes, source, frame)
    sym = _fsdp_symbolic(spec, rec, layout, answer) if symbolic else None
    payload = {"model": spec.name, "recipe": rec.name, "framework": profile_name(frame), "method": (
               "bisection on the framework's peak" if answer.searched else "a + b/N"),
               "n_fsdp": answer.n_fsdp, "threshold": answer.threshold,
               "limit_bytes": number(limit_bytes), "limit_source": source,
               "replicated_bytes": number(answer.replicated_bytes), "sharded_bytes": number(answer.sharded_bytes),
               "layout": layout.model_dump(exclude={"fsdp"})}  # N_FSDP is the answer
    if emitted_json(payload, sym, as_json):
        return
    from costmodel.report.common import layout_text

    others = layout_text(layout.model_copy(update={"fsdp": 1}))  # N is the unknown
    say(f"Layout: N_FSDP shards at ZeRO-{layout.zero}" + ("" if others == "one device" else f", {others}")
        + (f"; {layout.tokens:,} tokens per micro-batch" if layout.tokens else "; no activations (--tokens 0)"))
    if sym:
        say(f"M(N) = {sym['memory']}\nM(N) < M_max  <=>  N > {sym['n_bound']}\n")
    if answer.searched:
        say(f"{spec.name}, recipe {rec.name}, framework {profile_name(frame)}: the heaviest stage's reserved peak "
                   f"+ {frame.outside_allocator_bytes:,.0f} B outside the allocator is "
                   f"{answer.replicated_bytes + answer.sharded_bytes:,.0f} B at N = {answer.n_fsdp} "
                   f"(limit {limit_bytes:,.0f} B, {source}); "
                   + (f"N = {answer.threshold:.0f} does not fit " if answer.threshold > 1 else
                      f"{answer.n_fsdp} is the fewest shards ")
                   + ("(N as the expert axis admits) " if layout.ep > 1 else "")
                   + (f"(each device holds 1/(N x {layout.cp}) of the sharded state: {profile_name(frame)} shards over "
                      f"the CP ranks too) " if frame.cp_in_data and layout.cp > 1 else "")
                   + f"(searched: a maximum over phases is not a + b/N)  ->  N_FSDP = {answer.n_fsdp}")
        return
    say(f"{spec.name}, recipe {rec.name}: M(N) = {answer.replicated_bytes:,.0f} + "
        f"{answer.sharded_bytes:,.0f} / N bytes; limit {limit_bytes:,.0f} B ({source})")
    say(f"N > {answer.sharded_bytes:,.0f} / ({limit_bytes:,.0f} - {answer.replicated_bytes:,.0f}) "
               f"= {answer.threshold:.2f}  ->  N_FSDP = {answer.n_fsdp}"
               + (f" (a multiple of --ep {layout.ep}, which shards the experts over N / {layout.ep})"
                  if layout.ep > 1 and answer.n_fsdp else ""))


def _fsdp_symbolic(spec, rec, layout, answer) -> dict:
    import sympy as sp

    from costmodel.cost import symbolic as sy

    from costmodel.solve.fsdp import regime_layout

    comps, _ = sy.memory_in_p_and_a(spec, rec, regime_layout(layout))
    total = sy.collect_total(comps)
    limit = sp.Symbol("M_max", positive=True)
    from costmodel.solve.explain import tidy_fraction

    (bound,) = [tidy_fraction(root) for root in sp.solve(sp.Eq(total, limit), sy.symbol("N"))]
    return {"memory": sy.text(total), "n_bound": sy.text(bound),
            "latex": sy.latex(sp.StrictGreaterThan(sy.symbol("N"), bound))}


EP_SOLVE = tuple(name for name in MEMORY if name != "ep")


@solve_app.command("ep")
@with_layout(*EP_SOLVE)
def solve_ep_cmd(
    model: o.ModelOpt,
    limit: o.LimitOpt = None,
    hardware: o.HardwareOpt = None,
    recipe: o.RecipeOpt = None,
    framework: o.FrameworkOpt = "exact",
    as_json: o.JsonOpt = False,
    *,
    layout,
) -> None:
    """Smallest expert-parallel degree with per-device memory under the limit (MoE models).

    EP spreads each MoE layer's experts over devices of the data axis (--dp x --fsdp), so the
    candidates are the degrees that divide both the experts and the data axis; each is evaluated
    with the same accounting as `cost4d memory`, smallest first.

    Example: cost4d solve ep --model mixtral-8x7b --fsdp 8 --zero 1 --tokens 4096 --recompute full --hardware h100-sxm
    """
    from costmodel.report.common import emitted_json, number, say
    from costmodel.solve.ep import solve_ep
    from costmodel.specs.load import load_run, profile_name
    from costmodel.units import format_bytes

    frame, spec, rec = load_run(model, recipe, framework)
    limit_bytes, source = _limit(limit, hardware)
    answer = solve_ep(spec, rec, layout, limit_bytes, frame)
    if answer.ep is None:
        top = max(answer.tried)
        raise CostModelError(f"no expert-parallel degree fits {source} ({format_bytes(limit_bytes)}): the largest "
                             f"this layout admits, --ep {top}, still needs {format_bytes(answer.need_bytes)}")
    payload = {"model": spec.name, "recipe": rec.name, "framework": profile_name(frame), "ep": answer.ep,
               "need_bytes": number(answer.need_bytes), "limit_bytes": number(limit_bytes), "limit_source": source,
               "tried": {str(e): number(b) for e, b in answer.tried.items()}}
    if emitted_json(payload, None, as_json):
        return
    for e, need in answer.tried.items():
        typer.echo(f"--ep {e}: {format_bytes(need)}" + ("  fits" if e == answer.ep else ""))
    say(f"{spec.name}, recipe {rec.name}, framework {profile_name(frame)}: limit {format_bytes(limit_bytes)} ({source})"
        f"  ->  EP = {answer.ep}")


OptimizeSplitOpt = Annotated[bool, typer.Option("--optimize-split", help="Also find the best X x Y split.")]
SliceOpt = Annotated[Optional[str], typer.Option("--slice", metavar="AxBxC",
                                                 help="Torus shape to map the split onto, e.g. 4x4x4.")]
WhatIfOpt = Annotated[bool, typer.Option("--what-if", help="Ways to stay compute-bound at a smaller batch.")]


def _split_and_rows(device, problem, optimize_split: bool, slice_: str | None, what_if: bool):
    """The best split (--optimize-split, --slice) and the what-if rows (--what-if) of ``problem``."""
    from costmodel.solve.split import check_slice, optimize_split as best_split, parse_slice
    from costmodel.solve.whatif import what_if as what_if_rows

    ici = device.level("ici") if device.kind == "tpu" else None
    if slice_ is not None and ici is None:
        raise CostModelError(f"--slice maps the split onto a TPU torus; {device.name} is a {device.kind_name}")
    torus = parse_slice(slice_, ici.torus_axes if ici else None) if slice_ is not None else None
    if torus is not None:
        check_slice(problem, torus)  # the layout as given is priced on the slice: it must map onto it
    split = best_split(problem, torus) if optimize_split or torus else None
    rows = None
    if what_if:
        dcn = next((lvl.bandwidth_bytes_per_s for lvl in device.network if lvl.kind == "dcn"), None)
        rows = what_if_rows(problem, torus=torus, torus_axes=ici.torus_axes if ici else None, dcn_bandwidth=dcn)
    return split, rows


@solve_app.command("batch")
@with_batch_question
def solve_batch_cmd(
    model: o.ModelOpt,
    optimize_split: OptimizeSplitOpt = False,
    slice_: SliceOpt = None,
    what_if: WhatIfOpt = False,
    as_json: o.JsonOpt = False,
    *,
    question,
) -> None:
    """Smallest batch with T_math >= T_comms for an FSDP (X) x TP (Y) layout, and which term binds.

    Example: cost4d solve batch --model xxl --hardware tpu-v5p --fsdp 16 --tp 4 --mx 2 --my 1
    """
    from costmodel.report import solve as report_solve
    from costmodel.solve.batch import require_compute_bound
    from costmodel.solve.thresholds import single_strategy_thresholds

    spec, device, problem = question
    answer = require_compute_bound(problem)
    split, rows = _split_and_rows(device, problem, optimize_split, slice_, what_if)
    thresholds = single_strategy_thresholds(device, d_ff=problem.d_ff, peak_flops=problem.peak_flops,
                                            bandwidth=problem.bandwidth)
    report_solve.batch(spec, device, answer, split, thresholds, rows, as_json)


def register(app) -> None:
    app.add_typer(solve_app, name="solve")
