"""`cost4d plan`: search every 4D layout of a model on N devices for a global batch, best first.

The search space is the product of the axes (tp x pp x cp x data, the data axis split into HSDP
replicas x shards; for MoE models the expert-parallel degree within it; on a TPU the torus axes the
data and TP axes span, M_X and M_Y; on a GPU the order the axes fill the NVLink domain and the nodes,
each order that places them differently once: solve/plan_candidates.py), the micro-batch size, the ZeRO stage, the recompute policy, the pipeline
schedule (1F1B, interleaved with 2 or 4 chunks), the CP kind (ring, all-to-all) and TP with or without sequence
parallelism. Structure (ZeRO stage, recompute, schedule, CP kind, SP) is a Python value in the aggregator, so each
combination of it is one group; within a group every layout is one element of numpy arrays and the
whole group goes through :func:`costmodel.cost.evaluate.evaluate` once: the same wiring `memory` and
`step` use for one layout, so a reported layout's numbers equal theirs. Layouts are pruned by the
layout rules, by the global batch (it must split into whole micro-batches) and by memory, then
ranked by predicted tokens/s (ties: more memory headroom).
"""

from __future__ import annotations

import itertools
import time
from dataclasses import field, replace

from costmodel.cost.runs import CP_INSIDE_DATA, cp_kinds
from costmodel.cost.shape_op import unmodelled_block
from costmodel.errors import CostModelError
from costmodel.inputs.placement import DEFAULT_PLACEMENT, PLACEMENTS
from costmodel.parallel.pipeline.stages import whole_chunks
from costmodel.record import record
from costmodel.solve.plan_candidates import candidates, with_placements, with_torus_axes
from costmodel.specs import SPLITS
from costmodel.units import UnitSystem, in_unit

#: structure varied by the search: (zero, recompute, schedule, chunks)
#: the ZeRO stages the exact accounting searches; a framework's own are its profile's zero_stages
ZERO_STAGES = (1, 3)
RECOMPUTE = ("none", "selective", "full")
SCHEDULES = (("1f1b", 1), ("interleaved", 2), ("interleaved", 4))
#: TP with sequence parallelism (less memory, elementwise work split) and without (one all-reduce where SP has an
#: all-gather and a reduce-scatter: NCCL's NVLS all-reduce can be the faster)
SEQUENCE_PARALLEL = (True, False)


@record
class Planned:
    """One feasible layout with what the aggregator predicts for it."""

    layout: dict  # the Layout fields
    step_s: float
    tokens_per_s: float
    mfu: float
    memory_bytes: float  # heaviest stage (reserved, with the framework's terms)
    bubble: float
    exposed_comm_s: float  # communication on the critical path (TP, CP, p2p) + exposed data-axis traffic
    parts: dict = field(default_factory=dict)  # each part's whole time (CP by its exposed share)
    breakdown: dict = field(default_factory=dict)  # the parts that sum to step_s (the step's critical_parts)

    @property
    def bubble_s(self) -> float:
        """The pipeline bubble's seconds."""
        return self.breakdown.get("bubble_s", 0.0)


@record
class Plan:
    """A search's best layouts and what it did: layouts considered, rejected by which rule, time."""

    best: list[Planned]
    considered: int
    rejected: dict  # reason -> count
    feasible: int
    seconds: float
    capacity_bytes: float
    global_tokens: int
    seq: int
    cloud: tuple = ()  # (memory bytes, tokens/s) of every feasible layout, for the plot


def plan(model, recipe, hardware, *, devices: int, global_tokens: int, seq: int, framework=None,
         precision: str = "bf16", top: int = 5, headroom: float = 0.0, document: int | None = None,
         memory: str = "likely", kernels: str | None = None, split: str | None = None) -> Plan:
    """The ``top`` layouts by predicted tokens/s (see the module docstring); ``document``: every layout's
    sequences hold documents of that many tokens, attention masked to each (`step --document`); ``split``: how
    pipeline stages take the layers (None: the framework's, and for a framework whose stages take equal, whole layer
    counts (Megatron-core) the ends split too, which counts the embedding and the loss as a layer each: L + 2 then
    divides over the stages and chunks where L may not, as NeMo's Llama 3.1 405B recipe runs it)."""
    import numpy as np

    from costmodel.cost.evaluate import check_document, evaluate
    from costmodel.cost.point import Point
    from costmodel.cost.shape import Shape

    if global_tokens % seq:
        raise CostModelError(f"--global-batch {global_tokens:,} is not a whole number of --seq {seq:,} sequences")
    if hardware.step_model is None:
        raise CostModelError(f"{hardware.name} has no step_model section: plan ranks by step time")
    check_document(document, seq)
    start = time.perf_counter()
    shape = Shape.of(model)
    shape = replace(shape, seq_len=seq) if shape.attention else shape
    rows = np.array(list(candidates(devices, shape.layers, global_tokens // seq, shape.experts if shape.moe else 0,
                                    shape.heads if shape.attention else None)), dtype=np.int64)
    if rows.size == 0:
        raise CostModelError(f"no layout of {devices} devices splits {global_tokens // seq:,} sequences into whole "
                             "micro-batches")
    rows = with_placements(with_torus_axes(rows, hardware), hardware)
    placed = bool(rows[:, 10].any())  # some layout is searched in another order than the default
    outside = framework.outside_allocator_bytes if framework is not None else 0
    capacity = (hardware.hbm.usable_bytes or hardware.hbm.capacity_bytes) * (1 - headroom) - outside
    if memory == "sure" and framework is not None:  # the band's high end, reserved / (1 + error_low), must fit too
        capacity *= 1 + framework.error_low
    over = memory_rule(capacity, band=memory == "sure" and framework is not None)
    rejected = {"layout rules (divisibility, stages)": 0, over: 0}
    found, considered, feasible, cloud = [], 0, 0, []
    tp, pp, cp, dp, fsdp, mbs, steps, ep, mx, my, order = rows.T
    stages = tuple(framework.zero_stages or ZERO_STAGES) if framework is not None else ZERO_STAGES
    modes = RECOMPUTE if framework is None or framework.recompute_modes is None else tuple(
        m for m in framework.recompute_modes if m != "every")  # every:K: not searched
    if unmodelled_block(shape) is not None:
        modes = tuple(m for m in modes if m != "op")  # a block the op policy is not modelled for
    if not shape.attention:
        modes = tuple(m for m in modes if m != "selective")  # it drops the attention core only: "none" again
    cp_inside_data = np.array([CP_INSIDE_DATA in placement for placement in PLACEMENTS])
    # KV heads copied to the TP ranks that read them where TP exceeds them (PaLM's one KV head on 12); the frameworks
    # assert TP divides them (Megatron-core's divide(num_query_groups, tp), nanotron's llama.py L352, torchtitan's)
    replicate_kv = "replicate" if framework is None and shape.attention else "split"
    kinds = cp_kinds(framework)
    default_split = framework.split if framework is not None else "even"
    if split is not None and split not in SPLITS:
        raise CostModelError(f"--split {str(split)[:40]!r}: use {', '.join(SPLITS[:-1])} or {SPLITS[-1]}")
    whole = framework is not None and framework.whole_chunks
    splits = (split,) if split else (default_split, "ends") if whole and default_split != "ends" else (default_split,)
    for zero, recompute, (schedule, chunks), cp_kind, sp, split in itertools.product(
            stages, modes, SCHEDULES, kinds, SEQUENCE_PARALLEL, splits):
        keep = np.ones(len(rows), dtype=bool)
        if split != splits[0]:
            keep &= pp > 1  # one stage: the split changes nothing, the first split's group has it
        if not sp:
            keep &= tp > 1  # one TP device: nothing to shard, the SP pass has it
        if schedule == "interleaved":
            keep &= (pp > 1) & (steps % pp == 0) & whole_chunks(shape.layers, split, pp, chunks)
        elif whole:
            keep &= whole_chunks(shape.layers, split, pp)  # its stages take equal, whole layer counts
        if cp_kind != kinds[0]:
            keep &= cp > 1  # one CP device: the kind changes nothing, the first kind's group has it
        if framework is not None and framework.cp_in_data:  # its mesh: CP directly inside the data axis, and its
            # routed experts' sharding over both is not modelled (cost/runs.py check_runs)
            keep &= (cp == 1) | (cp_inside_data[order.astype(int)] & (not shape.moe))
        if zero < 3 and 3 in stages:
            keep &= fsdp > 1  # without shards the ZeRO stage changes nothing: ZeRO-3's group has them
        if framework is not None and zero > framework.pipeline_zero_max:
            keep &= (pp == 1) | (fsdp == 1)  # a pipeline engine that runs lower ZeRO stages only (DeepSpeed's)
        if framework is not None and framework.schedules is not None and schedule not in framework.schedules:
            keep &= pp == 1  # nor every schedule
        if framework is not None and zero < framework.hybrid_zero_min:
            keep &= (dp == 1) | (fsdp == 1)  # ZeRO over the whole data axis: no replicas of shards
        considered += int(keep.sum())
        if not keep.any():
            continue
        idx = np.nonzero(keep)[0]
        piped = pp[idx] > 1
        point = Point(tp=tp[idx], pp=pp[idx], cp=cp[idx], dp=dp[idx], fsdp=fsdp[idx], ep=ep[idx], mx=mx[idx], my=my[idx],
                      tokens=mbs[idx] * seq,
                      microbatches=np.where(piped, steps[idx], 1), grad_accum=np.where(piped, 1, steps[idx]),
                      chunks=np.full(len(idx), chunks), zero=zero, sp=sp, recompute=recompute,
                      schedule=schedule, cp_kind=cp_kind, split=split,
                      tp_kv=replicate_kv,
                      placement=order[idx] if placed else DEFAULT_PLACEMENT, document=document)
        cost = evaluate(shape, recipe, point, hardware, framework=framework, precision=precision, kernels=kernels)
        valid = np.broadcast_to(np.asarray(cost.valid, dtype=bool), idx.shape)
        memory = np.asarray(cost.memory_bytes, dtype=float)
        fits = memory <= capacity
        rejected["layout rules (divisibility, stages)"] += int((~valid).sum())
        rejected[over] += int((valid & ~fits).sum())
        ok = np.nonzero(valid & fits)[0]
        step = cost.step
        seconds = np.broadcast_to(np.asarray(step.step_s, dtype=float), idx.shape)
        feasible += len(ok)
        rates = np.broadcast_to(np.asarray(step.tokens_per_s, dtype=float), idx.shape)
        cloud.append((memory[ok], rates[ok]))
        for i in ok[np.lexsort((memory[ok], seconds[ok]))][:top]:  # this group's best; the merge keeps the top
            j = idx[i]
            found.append((float(seconds[i]), float(memory[i]), dict(
                tp=int(tp[j]), sp=bool(sp and tp[j] > 1), pp=int(pp[j]), cp=int(cp[j]), dp=int(dp[j]), fsdp=int(fsdp[j]),
                ep=int(ep[j]), **({"mx": int(mx[j]), "my": int(my[j])} if hardware.kind == "tpu" else {}),
                zero=zero, tokens=int(mbs[j] * seq), seq=seq, recompute=recompute,
                schedule=schedule if pp[j] > 1 else "1f1b", chunks=chunks if pp[j] > 1 else 1, cp_kind=cp_kind,
                microbatches=int(steps[j]) if pp[j] > 1 else None, grad_accum=1 if pp[j] > 1 else int(steps[j]),
                placement=PLACEMENTS[order[j]], **({"document": document} if document else {}),
                **({"split": split} if split != default_split and pp[j] > 1 else {}),
                **({"tp_kv": "replicate"} if replicate_kv == "replicate" and tp[j] > shape.kv_heads else {})),
                _row(step, i, memory[i])))
    found.sort(key=lambda item: (item[0], item[1]))
    best, seen = [], set()
    for step_s, memory_bytes, layout, rest in found:  # orders the model prices alike: the first (default-most)
        key = (step_s, memory_bytes, tuple(sorted((k, v) for k, v in layout.items() if k != "placement")))
        if key not in seen and len(best) < top:
            seen.add(key)
            best.append(Planned(layout, step_s, *rest))
    points = (np.concatenate([m for m, _ in cloud]), np.concatenate([r for _, r in cloud])) if cloud else ()
    return Plan(best, considered, rejected, feasible, time.perf_counter() - start, capacity, global_tokens, seq,
                points)


def _at(value, i) -> float:
    """Element ``i`` of an array quantity, or the quantity itself when every layout shares it."""
    return float(value[i]) if hasattr(value, "__len__") else float(value)


def _row(step, i, memory) -> tuple:
    parts = {k: _at(v, i) for k, v in step.parts.items() if k != "cp_s"}
    parts["cp_exposed_s"] = _at(step.cp_exposed_s, i)  # CP by its exposed share: ring attention hides the rest
    critical = step.critical_parts
    exposed = sum(_at(critical[k], i) for k in ("tp_exposed_s", "cp_exposed_s", "ep_s", "p2p_exposed_s",
                                               "data_exposed_s"))
    return (_at(step.tokens_per_s, i), _at(step.mfu, i), float(memory), _at(step.bubble, i), exposed, parts,
            {k: _at(v, i) for k, v in critical.items()})


def command(model: str, hardware: str, layout: dict, *, recipe: str, framework: str | None, precision: str,
            kernels: str | None = None) -> str:
    """The `cost4d step` command line that reproduces one planned layout, each argument shell-quoted where it needs
    it (a spec file's path with a space): plain ones print as typed."""
    import shlex

    from costmodel.specs.layout import Layout

    argv = ["cost4d", "step", "--model", model, "--hardware", hardware, "--recipe", recipe]
    for key, value in layout.items():
        if key == "sp":
            argv += ["--sp"] if value else []
        elif key == "cp_kind" and layout.get("cp", 1) == 1:
            continue  # no context parallelism: the kind says nothing
        elif key == "tokens" or Layout.model_fields[key].default != value:
            argv += [f"--{key.replace('_', '-')}", str(value)]
    if framework:
        argv += ["--framework", framework]
    if precision != "bf16":
        argv += ["--precision", precision]
    if kernels is not None:
        argv += ["--kernels", kernels]
    return shlex.join(argv)


#: the parts of a step (its breakdown) that add up to its time, as `why` names them; the data axis counts by its
#: exposed share (data_comm_s is its traffic, mostly hidden)
WHY_PARTS = {"matmul_s": "matmul time", "attention_s": "flash attention kernels", "elementwise_s": "memory-bound ops",
             "tp_s": "TP communication", "cp_exposed_s": "exposed CP communication", "ep_s": "MoE all-to-alls",
             "p2p_s": "pipeline sends", "framework_s": "the framework's kernels and host floor",
             "data_exposed_s": "exposed data-axis traffic", "optimizer_s": "the optimizer step"}


def memory_rule(capacity_bytes: float, *, band: bool, units: UnitSystem = UnitSystem.iec) -> str:
    """The memory rule as a rejection names it: the plan's --json keys say GiB whatever --units; ``band``: the high end
    of the framework's band must fit too (--memory sure)."""
    value, unit = in_unit(capacity_bytes, units)
    return f"memory (over {value:,.1f} {unit}" + (", the band's high end over the HBM" if band else "") + ")"


def why(first: Planned, second: Planned, units: UnitSystem = UnitSystem.iec) -> str:
    """The part of the step that differs most between the best two layouts, in one line (memory in ``units``)."""
    if abs(second.step_s - first.step_s) <= 1e-9 * first.step_s:
        a, b = (f"{value:,.1f} {unit}" for value, unit in (in_unit(p.memory_bytes, units) for p in (first, second)))
        if first.memory_bytes == second.memory_bytes:
            return f"#1 and #2 tie on step time and on memory ({a})"
        if a == b:  # closer than 0.1 GB or GiB: the bytes say which
            a, b = (f"{p.memory_bytes:,.0f} B" for p in (first, second))
        return f"#1 and #2 tie on step time; #1 needs less memory ({a} against {b})"
    gaps = {k: second.parts[k] - first.parts[k] for k in WHY_PARTS}
    bubble = second.bubble_s - first.bubble_s
    name, gap = max(list(gaps.items()) + [("bubble", bubble)], key=lambda kv: abs(kv[1]))
    label = "pipeline bubble" if name == "bubble" else WHY_PARTS[name]
    return (f"#1 is {second.step_s / first.step_s - 1:.1%} faster than #2; the largest difference is {label}: "
            f"{abs(gap):.3f} s {'less' if gap > 0 else 'more'} per step")


def pareto(memory, rates):
    """Indices of the layouts no other beats on both: less memory and more tokens/s."""
    import numpy as np

    order = np.lexsort((-rates, memory))
    front, best = [], -np.inf
    for i in order:
        if rates[i] > best:
            front.append(i)
            best = rates[i]
    return np.array(front, dtype=int)
