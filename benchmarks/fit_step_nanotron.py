"""Fit nanotron's step-time constants to the Ultra-Scale Playbook's 1B and 3B runs.

    python benchmarks/fit_step_nanotron.py [CSV]      # default ../shared/data/training-runs/...

The measured step is gbs x 4096 / tok_s of each run that finished (status ok). cost4d predicts it with
the ``nanotron`` profile on h100-sxm: the hardware's step model (GEMM table x the DGXC-fitted
fraction, collectives from NCCL's tuner) and the four constants of ``FrameworkTime``
(specs/framework.py), fitted here:

    step = (m + p - 1) / m x max(a x C, m x L_s x (h x N_tp + k x t x [pipeline across nodes]))
           + d x D + O

C is the critical path of the hardware model (matmuls, memory-bound ops, TP and p2p traffic), m the
micro-batches, p the stages, L_s the most layers on a stage, N_tp the nodes the TP group spans, t the
TP degree, D the data-axis traffic, O the optimizer step (HBM-bound, not fitted). The fit minimises the mean of min(|log(predicted / measured)|, 0.7)
(robust: a few runs took minutes for a step) by Nelder-Mead from a fixed start. The 64-node runs are
left out of the fit: as a group they ran several times slower than the model fitted on 1-32 nodes
predicts (the script prints by how much), which no constant here describes.

The per-row quantities come from cost4d itself (two evaluations of each row: without the framework's
time, and its host floor per unit constant), so the closed form above is checked against ``cost4d step`` in
tests/test_step_nanotron.py, not restated.
"""

from __future__ import annotations

import csv
import math
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from fit_memory_nanotron import DATA, SEQ, layout_of  # noqa: E402

from costmodel.cost.evaluate import evaluate_layout  # noqa: E402
from costmodel.errors import CostModelError  # noqa: E402
from costmodel.specs.framework import FrameworkTime  # noqa: E402
from costmodel.specs.framework_catalog import FRAMEWORKS  # noqa: E402
from costmodel.specs.load import load_hardware, load_model, load_recipe  # noqa: E402

#: Nelder-Mead's start: (kernel_factor, layer_floor_s, pipeline_tp_rank_s, data_factor)
START = (1.5, 0.0045, 0.0027, 1.0)
CAP = 0.7  # |log error| beyond which a run counts the same (runs that stalled)
LEFT_OUT_NODES = 64


@dataclass(frozen=True)
class Run:
    model: str
    nodes: int
    layout: object
    measured: float  # seconds per step
    critical: float  # C
    pipelined: float  # (m + p - 1) / m
    floor_h: float  # m x L_s x N_tp: the floor per unit layer_floor_s
    floor_k: float  # m x L_s x t x [pipeline across nodes]: per unit pipeline_tp_rank_s
    data: float  # D
    optimizer: float = 0.0  # O: the optimizer step, after the last backward


def _unit(h: float, k: float) -> FrameworkTime:
    return FrameworkTime(hardware="h100-sxm", kernel_factor=0.5, layer_floor_s=h, pipeline_tp_rank_s=k,
                         data_factor=0.0, error_low=0.0, error_high=0.0)


def runs(path=DATA) -> list[Run]:
    """Every run that finished and that cost4d accepts, with the quantities the step needs."""
    hardware, recipe = load_hardware("h100-sxm"), load_recipe("megatron")
    bare = FRAMEWORKS["nanotron"].model_copy(update={"time": None})
    models = {"1B": load_model("nanotron-1b"), "3B": load_model("nanotron-3b")}
    out = []
    with open(path, newline="") as handle:
        for row in csv.DictReader(handle):
            if row["status"] != "ok":
                continue
            layout = layout_of(row)
            try:
                plain = evaluate_layout(models[row["model"]], recipe, layout, hardware, framework=bare).step
            except (CostModelError, ValueError):
                continue
            critical = plain.modelled_critical_s
            floors = [evaluate_layout(models[row["model"]], recipe, layout, hardware,
                                      framework=bare.model_copy(update={"time": unit})).step.host_floor_s
                      for unit in (_unit(1.0, 0.0), _unit(0.0, 1.0))]
            out.append(Run(row["model"], int(row["nodes"]), layout, int(row["gbs"]) * SEQ / float(row["tok_s"]), critical,
                           1 / (1 - plain.bubble), floors[0], floors[1], plain.data_comm_s, plain.optimizer_s))
    return out


def predict(run: Run, x) -> float:
    a, h, k, d = x
    return run.pipelined * max(a * run.critical, h * run.floor_h + k * run.floor_k) + d * run.data + run.optimizer


def errors(sample, x) -> list[float]:
    return [predict(r, x) / r.measured - 1 for r in sample]


def loss(sample, x) -> float:
    import math

    if min(x) < 0 or x[0] < 0.5:
        return float("inf")
    return statistics.fmean(min(abs(math.log(predict(r, x) / r.measured)), CAP) for r in sample)


def nelder_mead(f, start, rounds: int = 4, iterations: int = 1500):
    """Plain Nelder-Mead (reflection 1, expansion 2, contraction 1/2, shrink 1/2), restarted ``rounds``
    times from the best point; deterministic."""
    best = list(start)
    for _ in range(rounds):
        simplex = [best] + [[v * 1.3 if j == i else v for j, v in enumerate(best)] for i in range(len(best))]
        values = [f(p) for p in simplex]
        for _ in range(iterations):
            order = sorted(range(len(simplex)), key=values.__getitem__)
            simplex, values = [simplex[i] for i in order], [values[i] for i in order]
            centre = [sum(p[j] for p in simplex[:-1]) / (len(simplex) - 1) for j in range(len(best))]
            toward = lambda t: [c + t * (c - w) for c, w in zip(centre, simplex[-1])]  # noqa: E731
            reflected = toward(1.0)
            fr = f(reflected)
            if fr < values[0]:
                expanded = toward(2.0)
                fe = f(expanded)
                simplex[-1], values[-1] = (expanded, fe) if fe < fr else (reflected, fr)
            elif fr < values[-2]:
                simplex[-1], values[-1] = reflected, fr
            else:
                contracted = toward(-0.5)
                fc = f(contracted)
                if fc < values[-1]:
                    simplex[-1], values[-1] = contracted, fc
                else:
                    simplex = [simplex[0]] + [[b + 0.5 * (v - b) for b, v in zip(simplex[0], p)] for p in simplex[1:]]
                    values = [values[0]] + [f(p) for p in simplex[1:]]
        best = simplex[min(range(len(simplex)), key=values.__getitem__)]
    return tuple(best)


def fit(sample) -> tuple:
    return nelder_mead(lambda x: loss(sample, x), START)


def median_abs(values) -> float:
    return statistics.median(abs(v) for v in values)


def within(values, bound: float) -> float:
    return sum(abs(v) <= bound for v in values) / len(values)


def error_band(sample, x) -> tuple[float, float]:
    """5th and 95th percentiles of predicted / measured - 1 (nearest rank), rounded to 0.001."""
    values = sorted(errors(sample, x))
    pick = lambda q: round(values[min(len(values) - 1, max(0, round(q * (len(values) - 1))))], 3)  # noqa: E731
    return pick(0.05), pick(0.95)


def stall_ratio() -> float:
    """measured / predicted beyond which a run counts as stalled: where the fit's loss stops growing."""
    return round(math.exp(CAP), 3)


def stalled(run: Run, x) -> bool:
    return run.measured > stall_ratio() * predict(run, x)


def steady_band(sample, x) -> tuple[float, float]:
    """error_band over the runs that did not stall."""
    return error_band([r for r in sample if not stalled(r, x)], x)


def stall_table(every, x) -> list[tuple[bool, int, int, int]]:
    """(pipelined, nodes, stalled, runs) over every run of the sweep, the left-out 64-node runs included."""
    groups: dict = {}
    for r in every:
        key = (r.layout.pp > 1, r.nodes)
        done, total = groups.get(key, (0, 0))
        groups[key] = (done + stalled(r, x), total + 1)
    return [(p, n, done, total) for (p, n), (done, total) in sorted(groups.items())]


def main(argv: list[str]) -> None:
    every = runs(Path(argv[0]) if argv else DATA)
    sample = [r for r in every if r.nodes < LEFT_OUT_NODES]
    x = fit(sample)
    names = ("kernel_factor", "layer_floor_s", "pipeline_tp_rank_s", "data_factor")
    print(f"fitted on {len(sample)} runs (1-32 nodes): " + ", ".join(f"{n} = {v:.4g}" for n, v in zip(names, x)))
    bare = (1.0, 0.0, 0.0, 0.0)
    print(f"without the framework's time: median |error| {median_abs(errors(sample, bare)):.1%}, "
          f"median error {statistics.median(errors(sample, bare)):+.1%}")
    errs = errors(sample, x)
    print(f"in-sample: median |error| {median_abs(errs):.1%}; within 10%: {within(errs, .1):.0%}, "
          f"within 25%: {within(errs, .25):.0%}")
    print("error band (5th, 95th percentile of predicted / measured - 1): {:+.3f}, {:+.3f}".format(*error_band(sample, x)))
    steady = [r for r in sample if not stalled(r, x)]
    print(f"stalled (measured > {stall_ratio()} x predicted): {len(sample) - len(steady)} of {len(sample)} fitted runs; "
          "the others' band: {:+.3f}, {:+.3f}, median |error| {:.1%}".format(*steady_band(sample, x),
                                                                          median_abs(errors(steady, x))))
    for pipelined in (False, True):
        print(f"  stalls {'with' if pipelined else 'without'} a pipeline, by nodes: " + ", ".join(
            f"{n}: {done}/{total}" for p, n, done, total in stall_table(every, x) if p == pipelined))
    for held in ("1B", "3B"):
        other = fit([r for r in sample if r.model != held])
        test = [r for r in sample if r.model == held]
        print(f"leave {held} out: fitted on the other (" + ", ".join(f"{v:.4g}" for v in other) +
              f"), median |error| on {held} {median_abs(errors(test, other)):.1%}, within 25%: "
              f"{within(errors(test, other), .25):.0%} (in-sample {median_abs(errors(test, x)):.1%})")
    far = [r for r in every if r.nodes >= LEFT_OUT_NODES]
    if far:
        print("left out, {} runs on {} nodes: {}".format(len(far), LEFT_OUT_NODES, slowdown_text(far, x)))


def slowdown_text(far, x) -> str:
    """How much slower the left-out runs ran than the fitted model predicts: median and range of
    measured / predicted."""
    ratios = sorted(r.measured / predict(r, x) for r in far)
    return f"a median {statistics.median(ratios):.1f}x slower than predicted ({ratios[0]:.1f}x to {ratios[-1]:.0f}x)"


if __name__ == "__main__":
    main(sys.argv[1:])
