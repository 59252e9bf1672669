"""Figures (matplotlib, the optional `cost4d[plot]` extra), the same ones for `cost4d plot` and the notebooks.

Each function draws what another part of cost4d computed and returns the matplotlib Figure; with a
``path`` (.png or .svg) it writes it there too. Figures are made without pyplot: no backend is chosen
and no global state is touched (a notebook shows one with ``display(fig)``).
"""

from __future__ import annotations

from costmodel.errors import CostModelError

FORMATS = (".png", ".svg")
#: what each op of a pipeline timeline is drawn in and called (ZB-H1's B is the input gradient only)
OP_COLORS = {"F": ("C0", "forward"), "B": ("C1", "backward"), "W": ("C2", "weight gradient W")}


def _figure(width: float, height: float):
    """A new Figure and its axes."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise CostModelError("figures need matplotlib: pip install matplotlib (or the plot extra: "
                             "pip install '.[plot]' in cost4d's source folder)") from None
    fig = Figure(figsize=(width, height))
    return fig, fig.subplots()


def check_path(path: str, flag: str = "--plot") -> None:
    """Refuse a figure file name that cannot be written or whose format is not PNG/SVG, before any work."""
    from costmodel.inputs.files import shown
    from costmodel.inputs.output import writable

    if not str(path).lower().endswith(FORMATS):
        raise CostModelError(f"{flag} {shown(path)}: give a .png or .svg file")
    writable(path, flag)
    _figure(1, 1)  # matplotlib is there


def _save(fig, path: str | None):
    fig.tight_layout()
    if path is not None:
        from costmodel.inputs.files import where

        try:
            fig.savefig(path)
        except OSError as err:
            raise CostModelError(f"cannot write {where(path)}: {err.strerror or err}") from None
    return fig


def _seconds_unit(largest: float) -> tuple[float, str]:
    """(factor, name) that shows times up to ``largest`` seconds in s, ms or us."""
    for factor, name in ((1, "s"), (1e3, "ms"), (1e6, "us")):
        if largest * factor >= 1:
            return factor, name
    return 1e9, "ns"


def plan_cloud(result, header: dict, path: str | None = None):
    """Tokens/s against peak memory of every feasible layout, the Pareto front and the best highlighted."""
    from costmodel.solve.plan import pareto

    fig, ax = _figure(7, 4.5)
    memory, rates = result.cloud
    front = pareto(memory, rates)
    ax.scatter(memory / 2**30, rates, s=6, alpha=0.35, label=f"{len(rates):,} feasible layouts")
    ax.plot(memory[front] / 2**30, rates[front], "-o", ms=3, color="C3", label="Pareto front")
    best = result.best[0]
    ax.scatter([best.memory_bytes / 2**30], [best.tokens_per_s], s=60, marker="*", color="k", label="#1", zorder=3)
    ax.axvline(result.capacity_bytes / 2**30, ls="--", color="grey", lw=1, label="memory limit")
    ax.set_xlabel("peak memory per device (GiB)")
    ax.set_ylabel("predicted tokens/s")
    ax.set_title(f"{header['model']} on {header['devices']:,} x {header['hardware']}, {header['global_tokens']:,} "
                 f"tokens/step ({header['framework']}, {header['precision']})", fontsize=9)
    ax.legend(fontsize=8)
    return _save(fig, path)


def pipeline_timeline(ops, stages: int, schedule: str, bubble: float, path: str | None = None, chunks: int = 1):
    """A Gantt chart of one step: each stage's forwards, backwards (and ZB-H1's weight-gradient passes),
    numbered by micro-batch; an interleaved schedule's later model chunks in lighter shades."""
    length = max(op.end for op in ops)
    microbatches = len({op.microbatch for op in ops})
    fig, ax = _figure(min(4 + length / 3, 16), min(0.6 * stages + 1.4, 12))
    spans: dict[tuple, list] = {}
    for op in ops:
        spans.setdefault((op.kind, op.chunk, op.stage), []).append((op.start, op.end - op.start))
    for (kind, chunk, s), bars in sorted(spans.items(), key=lambda item: ("FBW".index(item[0][0]), item[0][1:])):
        name = "input gradient B" if kind == "B" and schedule == "zb-h1" else OP_COLORS[kind][1]
        ax.broken_barh(bars, (s - 0.4, 0.8), facecolors=OP_COLORS[kind][0], edgecolor="white",
                       alpha=1 - 0.5 * chunk / max(chunks - 1, 1),
                       label=name + (f", chunk {chunk}" if chunks > 1 else "") if s == 0 else None)
    if len(ops) <= 600:  # numbers stay legible
        for op in ops:
            ax.text((op.start + op.end) / 2, op.stage, str(op.microbatch), ha="center", va="center", fontsize=6)
    ticks = range(0, stages, -(-stages // 16))  # at most 16 labels
    ax.set_yticks(ticks, [f"stage {s}" for s in ticks])
    ax.set_ylim(stages - 0.5, -0.5)
    ax.set_xlim(0, length)
    ax.set_ylabel("pipeline stage (device)")
    split = "B and W 1 each" if schedule == "zb-h1" else "backward 2" + (f", a chunk's 1/{chunks}" if chunks > 1 else "")
    ax.set_xlabel(f"time (one micro-batch's forward through a stage = 1, {split})")
    ax.set_title(f"{schedule}" + (f", v = {chunks} chunks" if chunks > 1 else "") + f": {stages} stages, "
                 f"{microbatches} micro-batches; bubble {bubble:.1%} of the step", fontsize=9)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return _save(fig, path)


def stage_memory(cost, path: str | None, units, layout: str = ""):
    """Stacked bars per pipeline stage: persistent state, weight copies, activations (and framework terms);
    ``layout`` (its text) goes under the title."""
    from costmodel.units import in_unit

    fig, ax = _figure(max(4, 0.5 * len(cost.stages) + 3), 4)
    names = list(dict.fromkeys(k for s in cost.stages for k in {**s.components, **s.overheads}))
    bottoms = [0.0] * len(cost.stages)
    for i, name in enumerate(names):
        values = [in_unit(s.components.get(name, s.overheads.get(name, 0)), units)[0] for s in cost.stages]
        ax.bar(range(len(cost.stages)), values, bottom=bottoms, label=name.replace("_", " "), color=f"C{i % 10}")
        bottoms = [b + v for b, v in zip(bottoms, values)]
    ax.set_xticks(range(len(cost.stages)), [str(i) for i in range(len(cost.stages))])
    ax.set_xlabel("pipeline stage")
    ax.set_ylabel(f"per device ({in_unit(0, units)[1]})")
    ax.set_title(f"{cost.shape.name}, recipe {cost.recipe.name}: memory per device by stage"
                 + (f"\n{layout}" if layout else ""), fontsize=9)
    ax.legend(fontsize=7)
    return _save(fig, path)


def fsdp_memory(shards, need, limit_bytes: float, answer: int, name: str, limit_source: str, units,
                path: str | None = None, layout: str = ""):
    """Memory per device against the FSDP shard count N (what `cost4d solve fsdp` solves), the limit as a
    line and the smallest N under it marked; ``layout`` (the rest of it, and the recipe) under the title."""
    from costmodel.units import in_unit

    unit = in_unit(0, units)[1]
    fig, ax = _figure(7, 4)
    ax.plot(shards, [in_unit(b, units)[0] for b in need], marker="o", ms=3, color="C0", label="memory per device")
    ax.axhline(in_unit(limit_bytes, units)[0], color="C3", ls="--", lw=1, label=f"limit: {limit_source}")
    ax.axvline(answer, color="C2", ls=":", lw=1, label=f"smallest N under it: {answer}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("N_FSDP (shards of the data axis)")
    ax.set_ylabel(f"per device ({unit})")
    ax.set_title(f"{name}: memory per device vs FSDP shards" + (f"\n{layout}" if layout else ""), fontsize=9)
    ax.legend(fontsize=7)
    return _save(fig, path)


def batch_crossover(curves, name: str, path: str | None = None, marks: dict | None = None):
    """T_math, T_FSDP, T_TP and T_comms per layer against the global batch (solve.crossover.Curves), each
    convention's compute-bound crossover marked; ``marks``: more batches to mark, label -> tokens."""
    fig, ax = _figure(8, 4.5)
    factor, unit = _seconds_unit(max(curves.math_s.max(), max(c.max() for c in curves.comms_s.values())))
    b = curves.batches
    ax.plot(b, curves.math_s * factor, color="k", lw=2, label=r"$T_{math}$")
    written = {"sum": r"$T_{FSDP} + T_{TP}$ (sum)", "max": r"$\max(T_{FSDP}, T_{TP})$ (max)"}
    colors = {"sum": "C2", "max": "C3"}
    for overlap, comms in curves.comms_s.items():
        ax.plot(b, comms * factor, color=colors[overlap], lw=2 if overlap == "sum" else 5,
                alpha=1 if overlap == "sum" else 0.35, label=written[overlap])
    ax.plot(b, curves.fsdp_s * factor, ls="--", color="C0", label=r"$T_{FSDP}$")
    ax.plot(b, curves.tp_s * factor, ls="--", color="C1", label=r"$T_{TP}$")
    for answer in curves.answers:
        if not answer.compute_bound_ever:
            continue
        at, color = answer.global_batch, colors[answer.problem.overlap]
        ax.axvline(at, color=color, lw=0.8, ls=":")
        y = answer.problem.times(at)["math"] * factor
        ax.plot([at], [y], "o", color=color)
        ax.annotate(f"{answer.problem.overlap}: B = {at:,.0f} ({answer.per_device_batch:,.1f} per device, "
                    f"{answer.binding_term} binds)", (at, y), textcoords="offset points", xytext=(8, -14),
                    fontsize=8, color=color)
    for label, at in (marks or {}).items():
        ax.axvline(at, color="k", ls="-.", lw=0.8, label=label)
    from matplotlib.ticker import StrMethodFormatter

    p = curves.answers[0].problem
    ax.xaxis.set_major_formatter(StrMethodFormatter("{x:,.0f}"))
    ax.set_xlabel("global batch B (tokens)")
    ax.set_ylabel(f"time per MLP layer, {p.pass_} ({unit})")
    ax.set_title(f"{name}: X = {p.fsdp} (M_X = {p.mx}), Y = {p.tp} (M_Y = {p.my}); compute-bound where "
                 f"T_math >= T_comms\n(Scaling Book: k = {'4, forward' if p.pass_ == 'forward' else '12, whole step'}, "
                 f"bf16 weights and activations, ring factor (n - 1)/n dropped)", fontsize=9)
    ax.legend(fontsize=8)
    return _save(fig, path)


def roofline(rl, name: str, path: str | None = None):
    """The step's parts (solve.roofline.Roofline) under the device's roofs, log-log."""
    import numpy as np

    fig, ax = _figure(8, 5)
    ridges = [rl.peak_flops / w for w in rl.roofs.values()]
    lo = min([m.intensity for m in rl.marks] + ridges) / 10
    hi = max([m.intensity for m in rl.marks] + ridges) * 10
    x = np.geomspace(lo, hi, 200)
    for i, (roof, bandwidth) in enumerate(rl.roofs.items()):
        ax.plot(x, np.minimum(rl.peak_flops, x * bandwidth), color=f"C{i}", ls="-" if i == 0 else "--",
                label=f"{roof}: {bandwidth / 1e9:,.0f} GB/s (ridge {rl.peak_flops / bandwidth:,.0f} FLOP/B)")
    ax.axhline(rl.peak_flops, color="k", lw=0.8, label=f"peak {rl.peak_flops / 1e12:,.0f} TFLOP/s ({rl.precision} dense)")
    ax.axhline(rl.step_flops_per_s, color="grey", ls=":", lw=1,
               label=f"the step: {rl.step_flops_per_s / 1e12:,.0f} TFLOP/s")
    for mark in rl.marks:
        ax.scatter([mark.intensity], [mark.flops_per_s], s=40, zorder=3, color="k")
        ax.annotate(f"{mark.name} ({mark.resource}): {mark.seconds * 1e3:,.1f} ms", (mark.intensity, mark.flops_per_s),
                    textcoords="offset points", xytext=(6, 4), fontsize=7)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP/B): the step's matmul FLOPs per byte each part moves")
    ax.set_ylabel("FLOP/s per device: matmul FLOPs / the part's time")
    ax.set_title(f"{name}\nthe step's parts on the roofline, per device per step", fontsize=8)
    ax.legend(fontsize=7, loc="lower right", title_fontsize=7, alignment="left",
              title="the lowest point takes the longest; a point above the peak line takes less\ntime than the "
              "matmuls would at peak (times as the step model gives them, before any overlap)")
    return _save(fig, path)


def validation(rows, name: str, path: str | None = None, min_bytes: int = 2**20):
    """Predicted (lines) against measured (dots) time per call and message size, one series per
    collective, algorithm and nodes x GPUs (measure.validate rows), log-log."""
    from costmodel.measure.validate import median_abs_error

    fig, ax = _figure(8, 5)
    series: dict[tuple, list] = {}
    for r in rows:
        series.setdefault((r.collective, r.algorithm, r.nodes, r.gpus_per_node), []).append(r)
    factor, unit = _seconds_unit(min(min(r.measured_s, r.predicted_s) for r in rows))
    for i, ((collective, algorithm, nodes, gpus), members) in enumerate(series.items()):
        members.sort(key=lambda r: r.bytes)
        error = median_abs_error(members, min_bytes)
        label = f"{collective} ({algorithm}, {nodes}x{gpus})" + (f": {error:.1f}%" if error is not None else "")
        ax.plot([r.bytes for r in members], [r.predicted_s * factor for r in members], color=f"C{i % 10}", label=label)
        ax.plot([r.bytes for r in members], [r.measured_s * factor for r in members], "o", ms=3, color=f"C{i % 10}")
    ax.axvline(min_bytes, color="grey", ls=":", lw=0.8)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("message size S (bytes, nccl-tests' size)")
    ax.set_ylabel(f"time per call ({unit})")
    overall = median_abs_error(rows, min_bytes)
    ax.set_title(f"{name}: predicted (lines) vs measured (dots); median |error| over S >= {min_bytes / 2**20:g} MiB "
                 + (f"{overall:.1f}%" if overall is not None else "-") + " (legend: per series)", fontsize=8)
    ax.legend(fontsize=7)
    return _save(fig, path)
