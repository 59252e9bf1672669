"""Wall time of `cost4d plan`'s search (no printing), one core.

    python benchmarks/plan_search.py [--repeat 3]

Searches llama3-405b on 4,096 H100s (16M tokens per step, seq 8192, Megatron profile), llama3-70b
on 512 (4M tokens, exact accounting), and the MoE models deepseek-v3 on 2,048 (15,360 sequences of 4,096,
its report's batch) and mixtral-8x7b on 64, whose searches add the expert-parallel degree; prints layouts considered, feasible, and seconds (best of
--repeat). The aggregator's own throughput on a fixed grid is benchmarks/planner_grid.py.
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one core

from costmodel.solve.plan import plan  # noqa: E402
from costmodel.specs.framework_catalog import FRAMEWORKS  # noqa: E402
from costmodel.specs.load import load_hardware, load_model, load_recipe  # noqa: E402

CASES = [("llama3-405b", "megatron", "megatron", 4096, 16 * 2**20, 8192),
         ("llama3-70b", "cs336", None, 512, 4 * 2**20, 8192),
         ("deepseek-v3", "megatron", "megatron", 2048, 15360 * 4096, 4096),  # arXiv:2412.19437's 2,048 GPUs, batch
         ("mixtral-8x7b", "megatron", "megatron", 64, 4 * 2**20, 4096)]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    hardware = load_hardware("h100-sxm")
    for model, recipe, framework, gpus, tokens, seq in CASES:
        spec, rec = load_model(model), load_recipe(recipe)
        frame = FRAMEWORKS[framework] if framework else None
        times, result = [], None
        for _ in range(args.repeat):
            start = time.perf_counter()
            result = plan(spec, rec, hardware, devices=gpus, global_tokens=tokens, seq=seq, framework=frame)
            times.append(time.perf_counter() - start)
        print(f"{model} on {gpus:,} GPUs ({framework or 'exact'}): {result.considered:,} layouts considered, "
              f"{result.feasible:,} feasible, best {min(times):.2f} s "
              f"({result.considered / min(times):,.0f} layouts/s including the search's own bookkeeping)")


if __name__ == "__main__":
    main()
