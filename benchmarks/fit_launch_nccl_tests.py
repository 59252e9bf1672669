"""Fit the host launch time per GPU (hardware [nccl] launch_s) to the shipped 8 x H100 nccl-tests logs.

nccl-tests with -g G has one thread launch each collective on G GPUs, back to back over its timed
iterations, so a collective cannot take less than G launches: small sizes sit on a floor of
G x launch_s (the logs here: nGpus 8, ~35 us; a log with one GPU per thread sits near NCCL's own
latency). The fit: launch_s = median over logs of (median time of sizes <= 64 KiB) / G, with the
in-sample and leave-one-out error of each log's floor.

Data: hardware/measured/h100-8gpu-together-nccl-tests/*.out (copies of ../shared/data/nccl-tests/,
the training data). Usage: python benchmarks/fit_launch_nccl_tests.py
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from costmodel.measure.nccl_tests import parse_log  # noqa: E402

LOGS = sorted((ROOT / "hardware" / "measured" / "h100-8gpu-together-nccl-tests").glob("*.out"))
FLOOR_BYTES = 64 * 1024


def floor_per_gpu(path: Path) -> tuple[float, int]:
    """(floor / G, G) of one log: the median out-of-place time of sizes <= 64 KiB over its GPUs per thread."""
    run = parse_log(path)["runs"][0]
    g = run["environment"]["gpus_per_thread"]
    times = [r["time_s"] for r in run["rows"] if r["placement"] == "out-of-place" and 0 < r["bytes"] <= FLOOR_BYTES]
    return statistics.median(times) / g, g


def main() -> None:
    per = {p.name: floor_per_gpu(p) for p in LOGS}
    fitted = statistics.median(c for c, _ in per.values())
    print(f"launch_s = {fitted * 1e6:.2f} us per GPU (median of {len(per)} logs)")
    for name, (c, g) in per.items():
        others = statistics.median(o for n, (o, _) in per.items() if n != name)
        print(f"  {name}: floor {c * g * 1e6:.1f} us over G = {g}; in-sample {100 * (fitted / c - 1):+.1f}%, "
              f"leave-one-out {100 * (others / c - 1):+.1f}%")


if __name__ == "__main__":
    main()
