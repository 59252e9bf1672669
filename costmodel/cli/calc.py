"""`cost4d memory`, `cost4d flops`, `cost4d comm`: the aggregator's numbers for one layout."""

from __future__ import annotations

from typing import Annotated

import typer

from costmodel.cli import options as o
from costmodel.cli.layout import MEMORY, with_layout
from costmodel.errors import CostModelError
from costmodel.units import UnitSystem


@with_layout(*MEMORY)
def memory(
    model: o.ModelOpt,
    recipe: o.RecipeOpt = None,
    framework: o.FrameworkOpt = "exact",
    hardware: o.HardwareOpt = None,
    units: o.UnitsOpt = UnitSystem.si,
    as_json: o.JsonOpt = False,
    symbolic: o.SymbolicOpt = False,
    *,
    layout,
) -> None:
    """Memory per device by component: weights, master, gradients, optimizer, activations.

    With --framework, the framework's buffers and transients too, the phase that peaks (forward-backward
    or optimizer step) and the caching allocator's reserve; with --hardware, whether it fits.

    Example: cost4d memory --model xxl --fsdp 38 --tokens 4096 --shard-activations 0.5 --symbolic
    Example: cost4d memory --model nanotron-1b --framework nanotron --pp 2 --fsdp 4 --zero 1 --tokens 16384 --microbatches 16 --hardware h100-sxm
    """
    from costmodel.cost.capacity import capacity_bytes, devices_worth
    from costmodel.cost.evaluate import evaluate_layout
    from costmodel.report.memory import memory as report
    from costmodel.specs.load import load_hardware, load_run

    frame, spec, rec = load_run(model, recipe, framework)
    device = load_hardware(hardware or "h100-sxm")
    if symbolic and frame is not None:
        raise CostModelError("--symbolic prints the exact accounting; drop --framework (the overheads are numbers)")
    cost = evaluate_layout(spec, rec, layout, framework=frame)
    worth = devices_worth(cost.state_bytes_unsharded, device)
    report(cost, layout, device, worth, capacity_bytes(device), fits=hardware is not None, units=units, as_json=as_json,
           formula=_formula(spec, rec, layout) if symbolic else None)


@with_layout("tokens", "seq", "tp", "pp", "cp", "recompute", "checkpoint", tokens=1)
def flops(
    model: o.ModelOpt,
    as_json: o.JsonOpt = False,
    symbolic: o.SymbolicOpt = False,
    *,
    layout,
) -> None:
    """Forward and backward FLOPs per token and per step (matmuls, as FlopCounterMode counts).

    Model FLOPs (MFU's numerator) count no recomputation; with --recompute the hardware FLOPs
    (HFU's numerator) add the forward work done again in backward.
    """
    from costmodel.cost.evaluate import evaluate_layout
    from costmodel.report.calc import flops as report
    from costmodel.specs.load import load_model, load_recipe

    spec = load_model(model)
    rec = load_recipe("cs336")  # FLOPs do not depend on the precision recipe
    cost = evaluate_layout(spec, rec, layout)
    report(cost, layout, as_json=as_json, formula=_formula(spec, rec, layout) if symbolic else None)


@with_layout("tokens", "seq", "dp", "fsdp", "zero", "tp", "sp", "pp", "cp", "reshard", "mx", "my", "schedule",
             "microbatches", "chunks", "cp_kind", "hsdp_group", "grad_accum", "tp_ends", "split", "tp_kv", "ep", "etp", "moe_imbalance",
             "placement", "recompute", "checkpoint")  # full recomputation reruns the forward's TP, CP and EP traffic
def comm(
    model: o.ModelOpt,
    hardware: Annotated[str, typer.Option(metavar="NAME|FILE",
                                          help="Device name (see `cost4d hardware`) or a spec file.")],
    recipe: o.RecipeOpt = None,
    framework: o.FrameworkOpt = "exact",
    units: o.UnitsOpt = UnitSystem.si,
    as_json: o.JsonOpt = False,
    symbolic: o.SymbolicOpt = False,
    *,
    layout,
) -> None:
    """Bytes each device sends per step in each collective, its level and time (calibrated where the spec is).

    With --framework, the framework's own gradient reduction (nanotron: its fp32 buffers, all-reduced at ZeRO-1).

    Example: cost4d comm --model xxl --hardware tpu-v5p --fsdp 16 --tp 4 --mx 2 --tokens 4096
    """
    from costmodel.cost.evaluate import evaluate_layout
    from costmodel.report.calc import comm as report
    from costmodel.specs.load import load_hardware, load_run

    frame, spec, rec = load_run(model, recipe, framework)
    device = load_hardware(hardware)
    if symbolic and frame is not None:
        raise CostModelError("--symbolic prints the exact accounting; drop --framework")
    cost = evaluate_layout(spec, rec, layout, device, framework=frame)
    report(cost, layout, device, units=units, as_json=as_json,
           formula=_formula(spec, rec, layout) if symbolic else None)


def _formula(spec, recipe, layout, **options):
    from costmodel.cost.symbolic import formula

    return formula(spec, recipe, layout, **options)


def register(app) -> None:
    for command in (memory, flops, comm):
        app.command()(command)
