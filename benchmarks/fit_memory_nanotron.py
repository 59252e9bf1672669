"""Fit nanotron's two reserved-memory constants to the Ultra-Scale Playbook's 1B and 3B runs.

    python benchmarks/fit_memory_nanotron.py [CSV]      # default ../shared/data/training-runs/...

The data (``gpu_mem_GB``) is torch.cuda.max_memory_reserved() / 2^30 of world rank 0, the first
pipeline stage (huggingface/nanotron@67c5ebb6 src/nanotron/helpers.py L615-616, L775-776). cost4d
predicts that stage's reserved peak with the ``nanotron`` profile; two constants are fitted: a
(reserved bytes per byte of saved activations) and r (a constant reserve). Prints in-sample and
leave-one-model-out median |error|, and the fits/OOM confusion matrix at the H100's usable HBM over
every run of the sweep (heaviest stage, plus what lives outside torch's allocator).
"""

from __future__ import annotations

import csv
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from costmodel.cost.evaluate import evaluate_layout  # noqa: E402
from costmodel.cost.memory import FORWARD_BACKWARD, OPTIMIZER  # noqa: E402
from costmodel.errors import CostModelError  # noqa: E402
from costmodel.specs.framework_catalog import FRAMEWORKS  # noqa: E402
from costmodel.specs.layout import Layout  # noqa: E402
from costmodel.specs.load import load_hardware, load_model, load_recipe  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "training-runs" / "ultrascale_playbook_1b_3b.csv"
GIB = 2**30
SEQ = 4096


@dataclass(frozen=True)
class Run:
    model: str
    row: dict
    ok: bool
    measured: float | None  # bytes reserved on rank 0
    first: tuple | None  # (forward-backward bytes without fitted terms, activations, optimizer-phase bytes)
    heaviest: list | None  # the same for every stage
    error: str | None = None


def layout_of(row: dict) -> Layout:
    """A sweep row as cost4d's layout: ZeRO-1 shards over the data axis, ZeRO-0 replicates (DDP)."""
    dp, tp, pp, zero, mbs, acc = (int(row[k]) for k in ("dp", "tp", "pp", "zero", "mbs", "grad_acc"))
    return Layout(fsdp=dp if zero else 1, dp=1 if zero else dp, zero=1 if zero else 3, tp=tp, sp=tp > 1, pp=pp,
                  tokens=mbs * SEQ, schedule="1f1b", microbatches=acc if pp > 1 else None,
                  grad_accum=1 if pp > 1 else acc)


def _parts(stage):
    """(reserved in forward-backward, activations, reserved in the optimizer step), before the fitted terms."""
    return (stage.phase_bytes(FORWARD_BACKWARD), stage.components["activations"], stage.phase_bytes(OPTIMIZER))


def runs(path=DATA, framework=None) -> list[Run]:
    """Every row of the sweep with what the unfitted profile predicts for it."""
    framework = framework or FRAMEWORKS["nanotron"].model_copy(update={"activation_factor": 1.0, "reserve_bytes": 0.0})
    recipe = load_recipe(framework.recipe)
    models = {"1B": load_model("nanotron-1b"), "3B": load_model("nanotron-3b")}
    out = []
    with open(path, newline="") as handle:
        for row in csv.DictReader(handle):
            ok = row["status"] == "ok"
            measured = float(row["gpu_mem_GB"]) * GIB if ok else None
            try:
                cost = evaluate_layout(models[row["model"]], recipe, layout_of(row), framework=framework)
            except (CostModelError, ValueError) as err:
                out.append(Run(row["model"], row, ok, measured, None, None, str(err)))
                continue
            out.append(Run(row["model"], row, ok, measured, _parts(cost.stages[0]), [_parts(s) for s in cost.stages]))
    return out


def predict(parts, a, r):
    fb, acts, opt = parts
    return max(fb + (a - 1) * acts, opt) + r


def errors(sample, a, r) -> list[float]:
    return [predict(x.first, a, r) / x.measured - 1 for x in sample]


def fit(sample) -> tuple[float, float]:
    """a on a grid, r the median gap for that a; the pair with the smallest median |error|."""
    best = None
    for step in range(0, 301):
        a = 1 + step / 100
        r = float(max(0, round(statistics.median(x.measured - predict(x.first, a, 0) for x in sample))))
        score = statistics.median(abs(e) for e in errors(sample, a, r))
        if best is None or score < best[0]:
            best = (score, a, r)
    return best[1], best[2]


def median_abs(values) -> float:
    return statistics.median(abs(v) for v in values)


def error_band(sample, a, r) -> tuple[float, float]:
    """The 5th and 95th percentiles of predicted / measured - 1 (nearest rank), rounded to 0.001:
    the measured value lies in [predicted / (1 + high), predicted / (1 + low)] for 90% of the runs."""
    values = sorted(errors(sample, a, r))
    pick = lambda q: round(values[min(len(values) - 1, max(0, round(q * (len(values) - 1))))], 3)  # noqa: E731
    return pick(0.05), pick(0.95)


def verdicts(all_runs, a, r, low, high, capacity, outside) -> dict:
    """fits (even the band's top fits), oom (even its bottom does not), tight (between) vs what happened."""
    table = {f"{v}_{o}": 0 for v in ("fits", "oom", "refused") for o in ("ok", "crashed")}
    for x in all_runs:
        if x.heaviest is None:
            verdict = "refused"
        else:
            need = max(predict(p, a, r) for p in x.heaviest)
            verdict = ("fits" if need / (1 + low) + outside <= capacity else
                       "oom" if need / (1 + high) + outside > capacity else "tight")
        key = f"{verdict}_{'ok' if x.ok else 'crashed'}"
        table[key] = table.get(key, 0) + 1
    return table


def confusion(all_runs, a, r, capacity, outside) -> dict:
    """fits/OOM of the point prediction (heaviest stage reserved + outside the allocator <= capacity), vs
    what happened: the verdict with a band of width zero."""
    return verdicts(all_runs, a, r, 0.0, 0.0, capacity, outside)


def print_verdicts(every, a, r, low, high, capacity, outside) -> None:
    table = verdicts(every, a, r, low, high, capacity, outside)
    print("with the band: " + ", ".join(f"{k} {v}" for k, v in sorted(table.items())))


def main(argv: list[str]) -> None:
    path = Path(argv[0]) if argv else DATA
    every = runs(path)
    sample = [x for x in every if x.ok and x.first is not None]
    a, r = fit(sample)
    print(f"fitted on {len(sample)} runs ({path.name}): activation_factor a = {a:.2f}, reserve r = {r / GIB:.2f} GiB")
    print(f"unfitted (a = 1, r = 0): median |error| {median_abs(errors(sample, 1, 0)):.1%}, "
          f"median error {statistics.median(errors(sample, 1, 0)):+.1%}")
    print(f"in-sample: median |error| {median_abs(errors(sample, a, r)):.1%}")
    low, high = error_band(sample, a, r)
    print(f"error band (5th, 95th percentile of predicted / measured - 1): {low:+.3f}, {high:+.3f}")
    for held in ("1B", "3B"):
        train = [x for x in sample if x.model != held]
        test = [x for x in sample if x.model == held]
        ha, hr = fit(train)
        print(f"leave {held} out: fitted on the other ({ha:.2f}, {hr / GIB:.2f} GiB), "
              f"median |error| on {held} {median_abs(errors(test, ha, hr)):.1%} (in-sample {median_abs(errors(test, a, r)):.1%})")
    h100 = load_hardware("h100-sxm")
    framework = FRAMEWORKS["nanotron"]
    print(f"fits/OOM at usable {h100.hbm.usable_bytes / GIB:.1f} GiB less {framework.outside_allocator_bytes / GIB:.2f} "
          "GiB outside the allocator (rows: predicted; ok / crashed_or_oom: what happened):")
    for label, group in (("1B", [x for x in every if x.model == "1B"]), ("3B", [x for x in every if x.model == "3B"]),
                         ("all", every)):
        table = confusion(group, a, r, h100.hbm.usable_bytes, framework.outside_allocator_bytes)
        runnable = sum(v for k, v in table.items() if not k.startswith("refused"))
        right = table["fits_ok"] + table["oom_crashed"]
        median = median_abs(errors([x for x in sample if x in group], a, r))
        if label == "all":
            print_verdicts(group, a, r, low, high, h100.hbm.usable_bytes, framework.outside_allocator_bytes)
        print(f"  {label:>3}: fits {table['fits_ok']:>4} ok {table['fits_crashed']:>4} crashed | "
              f"OOM {table['oom_ok']:>3} ok {table['oom_crashed']:>4} crashed | refused {table['refused_ok']} ok "
              f"{table['refused_crashed']:>3} crashed | accuracy {right / runnable:.1%}; median |error| {median:.1%}")


if __name__ == "__main__":
    main(sys.argv[1:])
