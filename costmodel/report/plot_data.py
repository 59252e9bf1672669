"""What each `cost4d plot` figure draws, as JSON (`plot ... --json`): the numbers behind the picture, for
scripts that redraw it their own way. Keys are listed in the README's "JSON output" section."""

from __future__ import annotations

from dataclasses import asdict

from costmodel.report.common import emit_json, number
from costmodel.specs.load import profile_name


def emit(out: str, kind: str, summary: str, data: dict) -> None:
    """{"figure": the file written, "kind", "summary": the line the text output prints, "data": what it draws}."""
    emit_json({"figure": out, "kind": kind, "summary": summary, "data": data})


def pipeline(ops, stages: int, schedule: str, microbatches: int, chunks: int, bubble: float) -> dict:
    """Every pass of the timeline (stage, F/B/W, micro-batch, chunk, start and end in forward-pass units)."""
    return {"schedule": schedule, "stages": stages, "microbatches": microbatches, "chunks": chunks,
            "bubble_fraction": bubble, "ops": [asdict(op) for op in ops]}


def stage_memory(cost) -> dict:
    """Each stage's components and framework terms (bytes), as the stacked bars show them."""
    return {"model": cost.shape.name, "recipe": cost.recipe.name,
            "framework": profile_name(cost.framework),
            "stages": [{"stage": s.stage.role.index, "layers": s.stage.layers,
                        "components": {k: number(v) for k, v in s.components.items()},
                        "overheads": {k: number(v) for k, v in s.overheads.items() if v},
                        "total_bytes": number(s.total_bytes)} for s in cost.stages]}


def fsdp_memory(shards, need, limit_bytes, answer: int, limit_source: str) -> dict:
    """Memory per device at each N_FSDP drawn, the limit and the smallest N under it."""
    return {"limit_bytes": number(limit_bytes), "limit": limit_source, "n_fsdp": answer,
            "points": [{"n_fsdp": n, "bytes": number(b)} for n, b in zip(shards, need)]}


def batch_crossover(curves) -> dict:
    """T_math, T_FSDP, T_TP and T_comms (each overlap convention) per MLP layer at each global batch drawn."""
    return {"crossovers": [{"overlap": a.problem.overlap, "global_batch": _finite(a.global_batch),
                            "per_device_batch": _finite(a.per_device_batch)} for a in curves.answers],
            "global_batch": [float(b) for b in curves.batches], "math_s": [float(t) for t in curves.math_s],
            "fsdp_s": [float(t) for t in curves.fsdp_s], "tp_s": [float(t) for t in curves.tp_s],
            "comms_s": {k: [float(t) for t in v] for k, v in curves.comms_s.items()}}


def roofline(placed) -> dict:
    """The roofs (peak FLOP/s, each bandwidth) and each part's FLOPs, bytes, intensity and time."""
    return {"peak_flops": placed.peak_flops, "precision": placed.precision, "roofs_bytes_per_s": placed.roofs,
            "step_flops_per_s": placed.step_flops_per_s,
            "marks": [{**asdict(m), "flops_per_byte": m.intensity if m.bytes else None,
                       "flops_per_s": m.flops_per_s if m.seconds else None} for m in placed.marks]}


def validation(rows, hardware: str, placement: str) -> dict:
    """validate's rows (predicted and measured per size) and its medians."""
    from costmodel.measure.validate import summary
    from costmodel.report.measure import rows_json

    return {"hardware": hardware, "placement": placement, **summary(rows), "rows": rows_json(rows)}


def plan_cloud(result) -> dict:
    """Every feasible layout's peak memory and tokens/s, and the Pareto front's indices among them."""
    from costmodel.solve.plan import pareto

    memory, rates = result.cloud
    return {"feasible": result.feasible, "best_tokens_per_s": result.best[0].tokens_per_s,
            "memory_bytes": [number(m) for m in memory], "tokens_per_s": [float(r) for r in rates],
            "pareto": [int(i) for i in pareto(memory, rates)]}


def _finite(value):
    """JSON has no infinity: a batch that is never compute-bound is null."""
    return value if value != float("inf") else None
