"""Whether a framework runs a layout: its pipeline schedules, its ZeRO stages and where they shard, its
recomputation modes (each declared in its profile, specs/framework_catalog.py, with the code it is read from)."""

from __future__ import annotations

from costmodel.errors import CostModelError
from costmodel.parallel.pipeline.stages import whole_chunks

#: the CP kinds of a framework that names none: ring attention and Ulysses (torch's own kinds are torchtitan's)
GENERIC_CP_KINDS = ("ring", "a2a")
#: the placement blocks a framework that folds CP into the data axis needs adjacent (cp directly inside data)
CP_INSIDE_DATA = "cp,data"

#: --recompute's words for its modes, as an error names them
RECOMPUTE_NAMES = {"every": "every:K", "selective": "selective (Megatron's: the attention core)",
                   "op": "op (torchtitan's per-op policy)"}


def recompute_flags(modes) -> str:
    """Recompute modes as --recompute takes them: none|full|every:K|op."""
    return "|".join("every:K" if m == "every" else m for m in modes)


def framework_zero(layout, framework):
    """The layout with the framework's own ZeRO stage (specs.framework.Framework.own_zero) where --zero was left
    open, else as given: 3 (FSDP) by default."""
    if framework is None or framework.own_zero is None or "zero" in layout.model_fields_set:
        return layout
    return layout.model_copy(update={"zero": framework.own_zero})


def cp_kinds(framework) -> tuple:
    """The --cp-kind values a framework runs, its default first (no framework, or one that names none: ring, a2a)."""
    return tuple(framework.cp_kinds) if framework is not None and framework.cp_kinds else GENERIC_CP_KINDS


def named_shards(point, folded: bool) -> str:
    """The data axis's shards as the flags give them: --fsdp N, or --fsdp N x --cp c where CP is folded in."""
    return f"--fsdp {point.fsdp} x --cp {point.cp}" if folded else f"--fsdp {point.fsdp}"


def check_runs(framework, point, *, experts: bool = False, layers: int | None = None) -> None:
    """One line for a layout the framework's engine does not run (a single layout; the planner skips them);
    ``experts``: the model routes tokens to experts; ``layers``: its transformer layers."""
    _check_chunks(framework, point, layers)
    if framework.recompute_modes is not None and point.recompute not in framework.recompute_modes:
        raise CostModelError(f"--framework {framework.name} recomputes with --recompute "
                             f"{recompute_flags(framework.recompute_modes)}, not "
                             f"{RECOMPUTE_NAMES.get(point.recompute, point.recompute)}")
    rerun = point.recompute != "none" and framework.checkpoints is not None
    if rerun and point.checkpoint not in framework.checkpoints:
        raise CostModelError(f"--framework {framework.name} reruns recomputed layers to their end: --checkpoint "
                             f"{'|'.join(framework.checkpoints)}, not {point.checkpoint} (torch's early stop)")
    folded = framework.cp_in_data and isinstance(point.cp, int) and point.cp > 1
    if folded and CP_INSIDE_DATA not in point.placement:
        raise CostModelError(f"--framework {framework.name} shards and reduces over the data and CP ranks as one group, "
                             f"modelled with CP directly inside the data axis (its default mesh), not --placement "
                             f"{point.placement}")
    shards = point.sharding.fsdp  # the data axis's shards: with the CP ranks folded in, --fsdp x --cp
    named = named_shards(point, folded)
    sharded = isinstance(shards, int) and shards > 1
    only_fsdp = framework.zero_stages == [3]  # its data shards are always FSDP's; its DDP runs over replicas alone
    if only_fsdp and point.zero == 0 and sharded:
        raise CostModelError(f"--framework {framework.name} shards its data axis ({named}) with FSDP whenever it has "
                             f"shards: give --zero 3 (DDP runs over --dp replicas alone)")
    kinds = cp_kinds(framework)
    if isinstance(point.cp, int) and point.cp > 1 and point.cp_kind not in kinds:
        raise CostModelError(f"--framework {framework.name} runs context parallelism as --cp-kind "
                             f"{'|'.join(kinds)}, not {point.cp_kind}")
    if folded and experts:
        raise CostModelError(f"--framework {framework.name} with --cp {point.cp}: how it shards routed experts over the "
                             f"data and CP ranks is not modelled (give --cp 1, or --framework exact)")
    pipelined = isinstance(point.pp, int) and point.pp > 1
    if pipelined and framework.schedules is not None and point.schedule not in framework.schedules:
        raise CostModelError(f"--framework {framework.name}: its pipeline engine runs --schedule "
                             f"{'|'.join(framework.schedules)}, not {point.schedule}")
    if pipelined and not (isinstance(shards, int) and shards == 1):
        if point.zero > framework.pipeline_zero_max:  # ZeRO runs over the data shards (--fsdp) only
            raise CostModelError(f"--framework {framework.name}: its pipeline engine runs ZeRO stage "
                                 f"{framework.pipeline_zero_max} at most, not --zero {point.zero} with --pp {point.pp}")
    if sharded and point.zero and framework.zero_stages is not None and point.zero not in framework.zero_stages:
        raise CostModelError(f"--framework {framework.name} shards the data axis{f' ({named})' if folded else ''} with ZeRO "
                             f"{'/'.join(map(str, framework.zero_stages))} only, not --zero {point.zero} (give --zero "
                             f"{framework.zero_stages[0]}{', or --zero 0 for DDP' if folded and not only_fsdp else ''})")
    if sharded and point.zero and isinstance(point.dp, int) and point.dp > 1 and point.zero < framework.hybrid_zero_min:
        whole = f"--fsdp {point.dp * point.fsdp} alone"
        if framework.hybrid_zero_min > 3:
            raise CostModelError(f"--framework {framework.name} shards over its one data-parallel group: no --dp "
                                 f"{point.dp} replicas of {named} shards (give {whole})")
        raise CostModelError(f"--framework {framework.name}: ZeRO-{point.zero} shards over the whole data axis; "
                             f"--dp {point.dp} replicas of {named} shards need --zero "
                             f"{framework.hybrid_zero_min} or more (or {whole})")


def _check_chunks(framework, point, layers) -> None:
    """A pipeline whose layers (L + 2 under the ends split) do not divide over its stages (x its model chunks when
    interleaved), where the framework needs them to (:attr:`Framework.whole_chunks`); the ends split named where
    it would divide."""
    piped = isinstance(point.pp, int) and point.pp > 1
    if not (framework.whole_chunks and piped and isinstance(layers, int)):
        return
    interleaved = point.schedule == "interleaved"
    per_stage = point.chunks if interleaved else 1
    chunks = point.pp * per_stage
    if not whole_chunks(layers, point.split, point.pp, per_stage):
        over = f"--pp {point.pp} x --chunks {point.chunks} = {chunks}" if interleaved else f"--pp {point.pp}"
        hint = (f" (with --split ends, {layers} + 2 = {layers + 2} would)"
                if point.split != "ends" and (layers + 2) % chunks == 0 else "")
        what = f"{layers} layers" + (" + the embedding and the loss" if point.split == "ends" else "")
        raise CostModelError(f"--framework {framework.name} places whole, equal layer counts on its stages"
                             f"{' and model chunks' if interleaved else ''}: its {what} do not divide over "
                             f"{over}{hint}")
