"""Memory, collectives and step time of llama3-70b on h100-sxm over a grid of layouts, as numpy arrays.

One call of the aggregator (costmodel.cost.evaluate) with one array element per layout; the figure
is layouts per second on one core (best of --repeat, after a warm-up call). Every element of a random
sample is then checked against the scalar path (one layout at a time): memory, bytes sent and step
time must agree to 1e-9 relative.

Usage: python benchmarks/planner_grid.py [--repeat 7] [--check 2000]
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import random
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one core

import numpy as np  # noqa: E402

from costmodel.cost.evaluate import evaluate  # noqa: E402
from costmodel.cost.point import Point  # noqa: E402
from costmodel.cost.shape import Shape  # noqa: E402
from costmodel.specs.load import load_hardware, load_model, load_recipe  # noqa: E402

AXES = {"dp": [1, 2, 4, 8], "fsdp": [1, 2, 4, 8, 16, 32], "tp": [1, 2, 4, 8], "pp": [1, 2, 4, 8, 16],
        "cp": [1, 2, 4, 8], "tokens": [2048, 4096, 8192, 16384], "microbatches": [16, 32, 64, 128],
        "grad_accum": [1, 2, 4, 8]}
STRUCTURE = dict(sp=True, recompute="selective", zero=3, schedule="1f1b")


def grid() -> np.ndarray:
    return np.array(list(itertools.product(*AXES.values())), dtype=np.int64).T


def point(columns: np.ndarray) -> Point:
    return Point(**{name: columns[i] for i, name in enumerate(AXES)}, **STRUCTURE)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--check", type=int, default=2000, help="layouts checked against the scalar path")
    args = parser.parse_args()
    shape, recipe, hardware = Shape.of(load_model("llama3-70b")), load_recipe("megatron"), load_hardware("h100-sxm")
    columns = grid()
    layouts = columns.shape[1]
    evaluate(shape, recipe, point(columns), hardware)  # warm-up: numpy's first calls, the matmul table
    times = []
    for _ in range(args.repeat):
        start = time.perf_counter()
        cost = evaluate(shape, recipe, point(columns), hardware)
        times.append(time.perf_counter() - start)
    best, median = min(times), sorted(times)[len(times) // 2]
    print(f"{layouts:,} layouts (llama3-70b, megatron recipe, h100-sxm; SP, selective recompute, ZeRO-3)")
    print(f"best {best * 1e3:.1f} ms = {layouts / best:,.0f} layouts/s; median {median * 1e3:.1f} ms = "
          f"{layouts / median:,.0f} layouts/s")
    sent, step = cost.bytes_sent, cost.step.step_s
    worst = 0.0
    for i in random.Random(0).sample(range(layouts), min(args.check, layouts)):
        one = evaluate(shape, recipe, Point(**{n: int(columns[j, i]) for j, n in enumerate(AXES)}, **STRUCTURE),
                       hardware)
        for array, scalar in ((cost.memory_bytes[i], one.memory_bytes), (sent[i], one.bytes_sent),
                              (step[i], one.step.step_s)):
            worst = max(worst, abs(array - scalar) / max(abs(scalar), 1e-300))
            assert math.isclose(array, scalar, rel_tol=1e-9), (i, array, scalar)
    print(f"{min(args.check, layouts):,} sampled layouts equal the scalar path (worst relative difference {worst:.1e})")


if __name__ == "__main__":
    main()
