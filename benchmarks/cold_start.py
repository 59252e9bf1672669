"""Cold-process wall time of CLI commands (each run is a fresh interpreter), and the numeric commands'
ratio to a one-command typer app with as many options (issue 14: target <= 1.2).

Usage: python benchmarks/cold_start.py [--runs 21] [--only-ratios] [--checkout DIR] [--instructions]
(--checkout times `python -m costmodel` from another copy of the source, e.g. `git archive HEAD` unpacked,
for a before/after comparison; by default the installed `cost4d` script is timed.)
Prints the median and spread per command, and which heavy modules the numeric path imported; the ratios by
median wall time, by median CPU time (user + system, which a loaded machine disturbs far less) and by the
fastest run of each (noise only ever adds time, so the minima are the steadiest figure on a shared machine).
Bytecode is cached (in a temporary folder, as after `pip install`) and one untimed run precedes the
timed ones; the command and its baseline take turns, so a noisy neighbour slows both alike.
Machines are shared and noisy: report the median, never assert on it in tests. --instructions counts the
instructions each command and its baseline execute under valgrind (callgrind, ~15 s a run): the same count on
any load, so the steadiest ratio there is (instructions are not time: a cache miss or a system call weighs more).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: the numeric commands the issue names, each timed against its one-command typer baseline
NUMERIC = {
    "memory": ["memory", "--model", "xxl"],
    "solve fsdp": ["solve", "fsdp", "--model", "xxl", "--limit", "95GB"],
    "solve batch": ["solve", "batch", "--model", "xxl", "--hardware", "tpu-v5p", "--fsdp", "16", "--tp", "4", "--mx",
                    "2", "--my", "1", "--peak-flops", "4.6e14", "--ici-bandwidth", "1.8e11", "--overlap", "sum"],
    "step": ["step", "--model", "llama3-70b", "--hardware", "h100-sxm", "--tp", "8", "--pp", "4", "--sp", "--fsdp", "8",
             "--tokens", "8192", "--microbatches", "16", "--recompute", "selective"],
}

COMMANDS = [
    ["memory", "--model", "xxl", "--fsdp", "38", "--tokens", "4096", "--shard-activations", "0.5"],
    ["memory", "--model", "xxl", "--json"],
    ["flops", "--model", "llama3-8b", "--tokens", "8192"],
    ["comm", "--model", "xxl", "--hardware", "tpu-v5p", "--fsdp", "16", "--tp", "4", "--mx", "2", "--tokens", "4096"],
    ["solve", "batch", "--model", "xxl", "--hardware", "tpu-v5p", "--fsdp", "16", "--tp", "4", "--mx", "2",
     "--peak-flops", "4.6e14", "--ici-bandwidth", "1.8e11", "--optimize-split", "--slice", "4x4x4"],
    ["memory", "--model", "llama3-405b", "--tp", "8", "--pp", "16", "--sp", "--recompute", "selective",
     "--tokens", "8192"],
    ["validate", "shipped:h100-8gpu-together-nccl-tests", "--hardware", "h100-sxm", "--fit"],
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


def baseline_app(options: int) -> str:
    """A one-command typer app with ``options`` string options that prints one line."""
    params = ",\n".join(f"    o{i}: Annotated[Optional[str], typer.Option('--o{i}')] = None" for i in range(options))
    return ("from typing import Annotated, Optional\n\nimport typer\n\n\n"
            f"def main(\n{params},\n) -> None:\n    typer.echo('ok')\n\n\ntyper.run(main)\n")


def option_count(args: list[str]) -> int:
    """How many options (help included) the command ``args`` names has."""
    import typer.main

    try:  # typer >= 0.22 carries its own copy of click
        import typer._click as click
    except ImportError:
        import click

    from costmodel.cli import app

    command = typer.main.get_command(app)
    for word in args:
        if word.startswith("-") or not hasattr(command, "get_command"):
            break
        with click.Context(command) as ctx:
            command = command.get_command(ctx, word)
    return sum(1 for p in command.params if getattr(p, "opts", None) and p.opts[0].startswith("-")) + 1  # --help


def baseline_args(args: list[str]) -> list[str]:
    """One baseline option with a value for each option the real command line gives."""
    given = [a for a in args if a.startswith("--")]
    return [word for i in range(len(given)) for word in (f"--o{i}", "1")]


def timed(argv: list[str], env: dict) -> tuple[float, float]:
    """(wall, CPU) seconds of one run; CPU time (user + system) barely moves when neighbours load the machine."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, env=env, cwd=env["PWD"])
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def instructions(argv: list[str], env: dict) -> int:
    """Instructions one run executes, counted by valgrind's callgrind (deterministic: neighbours do not move it)."""
    done = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *argv],
                          capture_output=True, text=True, env=env, cwd=env["PWD"], check=True)
    return int(next(line for line in done.stderr.splitlines() if "Collected" in line).split()[-1])


def heavy_imports(args: list[str], env: dict) -> str:
    done = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, env=env, cwd=env["PWD"])
    line = [x for x in done.stderr.splitlines() if x.startswith("HEAVY=")]
    return line[-1].removeprefix("HEAVY=") or "none" if line else "?"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--only-ratios", action="store_true", help="Time the four numeric commands only.")
    parser.add_argument("--checkout", type=Path, help="Time `python -m costmodel` with this folder on PYTHONPATH.")
    parser.add_argument("--instructions", action="store_true",
                        help="Also count instructions under valgrind (needs valgrind; ~15 s a run).")
    opts = parser.parse_args()
    cache = tempfile.mkdtemp(prefix="cost4d-pycache-")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(PYTHONPYCACHEPREFIX=cache, COLUMNS="120")
    if opts.checkout is not None:
        cost4d = [sys.executable, "-m", "costmodel"]
        env["PYTHONPATH"] = str(opts.checkout.resolve())
    elif shutil.which("cost4d"):
        cost4d = [shutil.which("cost4d")]
    else:
        sys.exit("cost4d is not installed (pip install -e .)")
    folder = Path(tempfile.mkdtemp(prefix="cost4d-baseline-"))
    env["PWD"] = str(folder)  # run there: `python -m costmodel` must not find the checkout it is started from
    try:
        print(f"{'numeric command':<14} {'options':>7} {'cost4d s':>9} {'typer app s':>11} {'ratio':>6} "
              f"{'cpu ratio':>9} {'min ratio':>9}" + (f" {'instr ratio':>11}" if opts.instructions else "")
              + "  heavy imports")
        for name, args in NUMERIC.items():
            n = option_count(args)
            app = folder / f"baseline_{n}.py"
            app.write_text(baseline_app(n))
            ours, base = [*cost4d, *args], [sys.executable, str(app), *baseline_args(args)]
            timed(ours, env), timed(base, env)  # bytecode written, files in the page cache
            t_ours, t_base = [], []
            for _ in range(opts.runs):
                t_ours.append(timed(ours, env))
                t_base.append(timed(base, env))
            (a, a_cpu), (b, b_cpu) = ([statistics.median(x) for x in zip(*t)] for t in (t_ours, t_base))
            fastest = min(w for w, _ in t_ours) / min(w for w, _ in t_base)  # noise only ever adds time
            counted = f" {instructions(ours, env) / instructions(base, env):11.3f}" if opts.instructions else ""
            print(f"{name:<14} {n:>7} {a:9.3f} {b:11.3f} {a / b:6.2f} {a_cpu / b_cpu:9.2f} {fastest:9.2f}{counted}  "
                  f"{heavy_imports(args, env)}")
        if opts.only_ratios:
            return
        print(f"\n{'command':<100} {'median s':>9} {'min s':>7} {'max s':>7}  heavy imports")
        for args in COMMANDS:
            timed([*cost4d, *args], env)
            t = [timed([*cost4d, *args], env)[0] for _ in range(opts.runs)]
            label = "cost4d " + " ".join(args)
            print(f"{label:<100} {statistics.median(t):9.3f} {min(t):7.3f} {max(t):7.3f}  {heavy_imports(args, env)}")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        shutil.rmtree(cache, ignore_errors=True)


if __name__ == "__main__":
    main()
