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


def check_path(path: str) -> None:
    """Refuse a --plot file name that cannot be written or whose format is not PNG/SVG, before any work."""
    from costmodel.inputs.files import shown
    from costmodel.inputs.output import writable

    if not str(path).lower().endswith(FORMATS):
        raise CostModelError(f"--plot {shown(path)}: give a .png or .svg file")
    writable(path, "--plot")
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
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
