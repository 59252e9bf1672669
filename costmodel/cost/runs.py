"""Whether a framework runs a layout: its pipeline schedules, its ZeRO stages and where they shard, its
recomputation modes (each declared in its profile, specs/framework.py, with the code it is read from)."""

from __future__ import annotations

from costmodel.errors import CostModelError

#: --recompute's words for its modes, as an error names them
RECOMPUTE_NAMES = {"every": "every:K", "selective": "selective (Megatron's: the attention core)",
                   "op": "op (torchtitan's per-op policy)"}


def recompute_flags(modes) -> str:
    """Recompute modes as --recompute takes them: none|full|every:K|op."""
    return "|".join("every:K" if m == "every" else m for m in modes)


def check_runs(framework, point) -> None:
    """One line for a layout the framework's engine does not run (a single layout; the planner skips them)."""
    if framework.recompute_modes is not None and point.recompute not in framework.recompute_modes:
        raise CostModelError(f"--framework {framework.name} recomputes with --recompute "
                             f"{recompute_flags(framework.recompute_modes)}, not "
                             f"{RECOMPUTE_NAMES.get(point.recompute, point.recompute)}")
    rerun = point.recompute != "none" and framework.checkpoints is not None
    if rerun and point.checkpoint not in framework.checkpoints:
        raise CostModelError(f"--framework {framework.name} reruns recomputed layers to their end: --checkpoint "
                             f"{'|'.join(framework.checkpoints)}, not {point.checkpoint} (torch's early stop)")
    if framework.fsdp_over_cp and isinstance(point.cp, int) and point.cp > 1:
        raise CostModelError(f"--framework {framework.name} shards FSDP over the data and CP ranks together (its "
                             f"dp_shard x cp mesh), which cost4d does not model: give --cp 1, or --framework exact for "
                             f"CP ranks that replicate the weights")
    pipelined = isinstance(point.pp, int) and point.pp > 1
    if pipelined and framework.schedules is not None and point.schedule not in framework.schedules:
        raise CostModelError(f"--framework {framework.name}: its pipeline engine runs --schedule "
                             f"{'|'.join(framework.schedules)}, not {point.schedule}")
    if pipelined and not (isinstance(point.fsdp, int) and point.fsdp == 1):
        if point.zero > framework.pipeline_zero_max:  # ZeRO runs over the data shards (--fsdp) only
            raise CostModelError(f"--framework {framework.name}: its pipeline engine runs ZeRO stage "
                                 f"{framework.pipeline_zero_max} at most, not --zero {point.zero} with --pp {point.pp}")
    sharded = isinstance(point.fsdp, int) and point.fsdp > 1
    if sharded and point.zero and framework.zero_stages is not None and point.zero not in framework.zero_stages:
        raise CostModelError(f"--framework {framework.name} shards the data axis with ZeRO "
                             f"{'/'.join(map(str, framework.zero_stages))} only, not --zero {point.zero} (give --zero "
                             f"{framework.zero_stages[0]})")
    if sharded and point.zero and isinstance(point.dp, int) and point.dp > 1 and point.zero < framework.hybrid_zero_min:
        whole = f"--fsdp {point.dp * point.fsdp} alone"
        if framework.hybrid_zero_min > 3:
            raise CostModelError(f"--framework {framework.name} shards over its one data-parallel group: no --dp "
                                 f"{point.dp} replicas of --fsdp {point.fsdp} shards (give {whole})")
        raise CostModelError(f"--framework {framework.name}: ZeRO-{point.zero} shards over the whole data axis; "
                             f"--dp {point.dp} replicas of --fsdp {point.fsdp} shards need --zero "
                             f"{framework.hybrid_zero_min} or more (or {whole})")
