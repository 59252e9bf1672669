"""Cold-process wall time of CLI commands (each run is a fresh interpreter).

Usage: python benchmarks/cold_start.py [--runs 21] [-- extra commands...]
Prints the median and spread per command, and which heavy modules the numeric path imported.
Machines are shared and noisy: report the median, never assert on it in tests.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time

COMMANDS = [
    ["memory", "--model", "xxl"],
    ["memory", "--model", "xxl", "--fsdp", "38", "--tokens", "4096", "--shard-activations", "0.5"],
    ["memory", "--model", "xxl", "--json"],
    ["flops", "--model", "llama3-8b", "--tokens", "8192"],
    ["comm", "--model", "xxl", "--hardware", "tpu-v5p", "--fsdp", "16", "--tp", "4", "--mx", "2", "--tokens", "4096"],
    ["solve", "fsdp", "--model", "xxl", "--limit", "95GB"],
    ["solve", "batch", "--model", "xxl", "--hardware", "tpu-v5p", "--fsdp", "16", "--tp", "4", "--mx", "2",
     "--peak-flops", "4.6e14", "--ici-bandwidth", "1.8e11", "--optimize-split", "--slice", "4x4x4"],
    ["memory", "--model", "llama3-405b", "--tp", "8", "--pp", "16", "--sp", "--recompute", "selective",
     "--tokens", "8192"],
    ["step", "--model", "llama3-70b", "--hardware", "h100-sxm", "--tp", "8", "--pp", "4", "--sp", "--fsdp", "8",
     "--tokens", "8192", "--microbatches", "16", "--recompute", "selective"],
    ["validate", "hardware/measured/h100-8gpu-together-nccl-tests/all_gather_ring.out",
     "hardware/measured/h100-8gpu-together-nccl-tests/all_reduce_nvls.out",
     "hardware/measured/h100-8gpu-together-nccl-tests/all_reduce_ring.out",
     "hardware/measured/h100-8gpu-together-nccl-tests/reduce_scatter_ring.out", "--hardware", "h100-sxm", "--fit"],
    # symbolic paths (sympy): issue 3 asks for < 2 s
    ["memory", "--model", "xxl", "--fsdp", "38", "--tokens", "4096", "--shard-activations", "0.5", "--symbolic"],
    ["solve", "fsdp", "--model", "xxl", "--limit", "95GB", "--symbolic"],
    ["explain", "batch", "--model", "xxl", "--hardware", "tpu-v5p", "--fsdp", "16", "--tp", "4", "--mx", "2"],
]

PROBE = ("import sys, runpy; sys.argv = ['cost4d'] + sys.argv[1:]\n"
         "try:\n    runpy.run_module('costmodel', run_name='__main__')\n"
         "except SystemExit:\n    pass\n"
         "heavy = sorted(m for m in ('sympy', 'numpy', 'torch') if m in sys.modules)\n"
         "sys.stderr.write('HEAVY=' + ','.join(heavy) + '\\n')\n")


def time_command(exe: str, args: list[str], runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([exe, *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        times.append(time.perf_counter() - start)
    return times


def heavy_imports(args: list[str]) -> str:
    done = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True)
    line = [x for x in done.stderr.splitlines() if x.startswith("HEAVY=")]
    return line[-1].removeprefix("HEAVY=") or "none" if line else "?"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21)
    opts = parser.parse_args()
    exe = shutil.which("cost4d")
    if exe is None:
        sys.exit("cost4d is not installed (pip install -e .)")
    print(f"{'command':<100} {'median s':>9} {'min s':>7} {'max s':>7}  heavy imports")
    for args in COMMANDS:
        t = time_command(exe, args, opts.runs)
        label = "cost4d " + " ".join(args)
        print(f"{label:<100} {statistics.median(t):9.3f} {min(t):7.3f} {max(t):7.3f}  {heavy_imports(args)}")


if __name__ == "__main__":
    main()
