"""Figures (matplotlib, the optional `cost4d[plot]` extra): written to a PNG or SVG file."""

from __future__ import annotations

from costmodel.errors import CostModelError

FORMATS = (".png", ".svg")


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise CostModelError("--plot needs matplotlib: pip install 'cost4d[plot]'") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def check_path(path: str, flag: str = "--plot") -> None:
    """Refuse a figure file name that cannot be written or whose format is not PNG/SVG, before any work."""
    from costmodel.inputs.files import shown
    from costmodel.inputs.output import writable

    if not str(path).lower().endswith(FORMATS):
        raise CostModelError(f"{flag} {shown(path)}: give a .png or .svg file")
    writable(path, flag)
    _pyplot()


def plan_cloud(result, header: dict, path: str) -> None:
    """Tokens/s against peak memory of every feasible layout, the Pareto front and the best highlighted."""
    from costmodel.solve.plan import pareto

    plt = _pyplot()
    memory, rates = result.cloud
    front = pareto(memory, rates)
    fig, ax = plt.subplots(figsize=(7, 4.5))
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
    _save(plt, fig, path)


def _save(plt, fig, path: str) -> None:
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def pipeline_timeline(ops, stages: int, schedule: str, bubble: float, path: str) -> None:
    """A Gantt chart of one step: each stage's forwards (light) and backwards (dark), numbered by micro-batch."""
    plt = _pyplot()
    length = max(op.end for op in ops)
    fig, ax = plt.subplots(figsize=(min(4 + length / 3, 16), 0.6 * stages + 1.2))
    for op in ops:
        ax.barh(op.stage, op.end - op.start, left=op.start, color="C0" if op.kind == "F" else "C1",
                edgecolor="white", height=0.8)
        ax.text((op.start + op.end) / 2, op.stage, str(op.microbatch), ha="center", va="center", fontsize=7)
    ax.set_yticks(range(stages), [f"stage {s}" for s in range(stages)])
    ax.invert_yaxis()
    ax.set_xlabel("time (a forward = 1, a backward = 2)")
    ax.set_title(f"{schedule}: {stages} stages, {len(ops) // (2 * stages)} micro-batches; bubble {bubble:.1%} "
                 "(forward blue, backward orange)", fontsize=9)
    _save(plt, fig, path)


def stage_memory(cost, path: str, units) -> None:
    """Stacked bars per pipeline stage: persistent state, weight copies, activations (and framework terms)."""
    from costmodel.units import in_unit

    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(max(4, 0.5 * len(cost.stages) + 3), 4))
    names = list(dict.fromkeys(k for s in cost.stages for k in {**s.components, **s.overheads}))
    bottoms = [0.0] * len(cost.stages)
    for i, name in enumerate(names):
        values = [in_unit(s.components.get(name, s.overheads.get(name, 0)), units)[0] for s in cost.stages]
        ax.bar(range(len(cost.stages)), values, bottom=bottoms, label=name.replace("_", " "), color=f"C{i % 10}")
        bottoms = [b + v for b, v in zip(bottoms, values)]
    ax.set_xticks(range(len(cost.stages)), [str(i) for i in range(len(cost.stages))])
    ax.set_xlabel("pipeline stage")
    ax.set_ylabel(f"per device ({in_unit(0, units)[1]})")
    ax.set_title(f"{cost.shape.name}, recipe {cost.recipe.name}: memory per device by stage", fontsize=9)
    ax.legend(fontsize=7)
    _save(plt, fig, path)
