"""`cost4d bench collectives` and `cost4d bench gpu`: measure real hardware (torch imported only here).

Under torchrun (multi-node) `bench collectives` is one rank of the run: the worker module hands it its
arguments, so both read the one parser below."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from costmodel.cli import options as o
from costmodel.cli.measure import message_size, out_path
from costmodel.errors import CostModelError
from costmodel.inputs.files import shown
from costmodel.inputs.numbers import real, whole

bench_app = typer.Typer(help="Measure real hardware (needs torch: pip install torch).",
                        no_args_is_help=True)


_COUNT = dict(parser=whole(0, 10**6), metavar="N")


@bench_app.command("collectives")
def bench_collectives(
    out: Annotated[Path, typer.Option(metavar="FILE", help="Results JSON (written atomically, also on failure).")],
    nproc: Annotated[Optional[int], typer.Option(
        "--nproc-per-node", "--nproc", parser=whole(2, 1024), metavar="N",
        help="Processes on this node (GPUs with nccl); default 2. Under torchrun (multi-node) it is ignored: "
        "torchrun's own --nnodes x --nproc-per-node decide (and its parser refuses the short --nproc after the "
        "module: spell it --nproc-per-node there, or put -- before the arguments).")] = None,
    backend: Annotated[str, typer.Option(metavar="gloo|nccl", help="nccl on GPUs, gloo on CPUs.")] = "gloo",
    ops: Annotated[str, typer.Option(metavar="OP,...", help="Comma-separated: all-reduce, all-gather, "
                                     "reduce-scatter, all-to-all, broadcast, send/recv.",
                                     show_default="all-reduce, all-gather, reduce-scatter")]
    = "all-reduce,all-gather,reduce-scatter",
    min_bytes: Annotated[str, typer.Option(metavar="SIZE",
                                           help="Smallest buffer S, e.g. 1KiB (a plain number is bytes).")] = "1KiB",
    max_bytes: Annotated[str, typer.Option(metavar="SIZE",
                                           help="Largest buffer S, e.g. 1GiB (a plain number is bytes).")] = "16MiB",
    factor: Annotated[float, typer.Option(parser=real(1, 1024, above=True), metavar="X",
                                          help="Size step factor (> 1).")] = 2.0,
    warmup: Annotated[int, typer.Option(**_COUNT, help="Untimed iterations per size.")] = 5,
    iters: Annotated[int, typer.Option(parser=whole(1, 10**6), metavar="N",
                                       help="Timed iterations per size.")] = 20,
    dtype: Annotated[str, o.choices(("float32", "bfloat16", "float16"), "DTYPE",
                                    help="Element type: float32, bfloat16 or float16.")] = "float32",
    timeout: Annotated[float, typer.Option(parser=real(0, 10**6, above=True), metavar="SECONDS",
                                           help="Seconds before the run is stopped (results so far are kept; "
                                           "when cost4d starts torchrun).")] = 600,
    as_json: o.JsonOpt = False,
) -> None:
    """Time collectives over a size sweep with torch.distributed (launched with torchrun).

    Multi-node: `torchrun --nnodes N ... -m costmodel.bench.collectives_worker` with these options (README).

    One JSON per run, readable by `cost4d validate`; options are checked before anything runs or --out is written.

    A failed run exits 1: the reason on one line, the log in the results file's "error".
    """
    from costmodel.bench.collectives import SUPPORTED, launch, sizes
    from costmodel.measure.results import canonical_collective
    from costmodel.report import bench as report

    if backend not in ("gloo", "nccl"):
        raise CostModelError(f"--backend {shown(backend)}: use nccl (GPUs) or gloo (CPUs)")
    if dtype not in ("float32", "bfloat16", "float16"):
        raise CostModelError(f"--dtype {shown(dtype)}: use float32, bfloat16 or float16")
    names = [canonical_collective(op.strip()) for op in ops.split(",") if op.strip()]
    if not names:
        raise CostModelError(f"--ops {shown(ops)}: name at least one collective")
    if any(name not in SUPPORTED for name in names):
        raise CostModelError(f"--ops: the benchmark times {', '.join(SUPPORTED)}; not "
                             f"{', '.join(n for n in names if n not in SUPPORTED)}")
    lo, hi = message_size(min_bytes, "--min-bytes"), message_size(max_bytes, "--max-bytes")
    if hi < lo:
        raise CostModelError(f"--max-bytes {max_bytes} is below --min-bytes {min_bytes}")
    sweep = dict(ops=names, min_bytes=lo, max_bytes=hi, factor=factor, warmup=warmup, iters=iters, dtype=dtype,
                 backend=backend, out=out_path(out))
    _need_torch("bench collectives")
    if _under_torchrun():
        return _run_rank(sweep, nproc, as_json)
    nproc = 2 if nproc is None else nproc
    _check_backend(backend, nproc)
    steps = len(names) * len(sizes(lo, hi, factor))
    with report.progress(steps, f"starting torchrun ({nproc} processes, {backend})") as advance:
        doc = launch(nproc=nproc, timeout=timeout, on_progress=lambda op, size: advance(f"{op} {size:,} B"), **sweep)
    report.collectives(doc, out, as_json)
    if doc["status"] != "ok":
        typer.echo(f"error: bench collectives {doc['status']}: {doc['reason']} (results so far and the log in {out})",
                   err=True)
        raise typer.Exit(1)


def _under_torchrun() -> bool:
    """Whether torchrun started this process (it sets these for every rank)."""
    import os

    return all(name in os.environ for name in ("TORCHELASTIC_RUN_ID", "RANK", "WORLD_SIZE", "LOCAL_RANK"))


def _run_rank(sweep: dict, nproc, as_json: bool) -> None:
    """One rank of a run torchrun started; a failure is one line naming the rank, exit 1."""
    import os

    from costmodel.bench.collectives_worker import run_rank
    from costmodel.report import bench as report

    rank = int(os.environ["RANK"])
    if nproc is not None and rank == 0:
        typer.echo(f"note: --nproc {nproc} is ignored under torchrun: its --nnodes x --nproc-per-node give "
                   f"{os.environ['WORLD_SIZE']} processes", err=True)
    try:
        doc = run_rank(**sweep)
    except Exception as err:  # noqa: BLE001 - torch's errors (NCCL, rendezvous, CUDA), one line per rank
        typer.echo(f"error: rank {rank}: {type(err).__name__}: {' '.join(str(err).split())[:300]}", err=True)
        raise typer.Exit(1) from None
    if rank == 0:
        report.collectives(doc, sweep["out"], as_json)


def _need_torch(command: str) -> None:
    """torch imports, or one line saying how to get it."""
    import importlib

    try:
        importlib.import_module("torch")
    except ImportError as err:
        raise CostModelError(f"{command} needs PyTorch ({err}): pip install torch (or the bench extra: pip install '.[bench]' in cost4d's source folder)") from None


def _check_backend(backend: str, nproc: int) -> None:
    """What the backend needs, checked before torchrun starts (so the reason is one line, not a rank's log)."""
    import torch
    import torch.distributed as dist

    if not dist.is_available():
        raise CostModelError(f"bench collectives: torch {torch.__version__} was built without torch.distributed")
    if backend == "gloo":
        if not dist.is_gloo_available():
            raise CostModelError(f"--backend gloo: torch {torch.__version__} was built without gloo")
        return
    if not torch.cuda.is_available():
        raise CostModelError(f"--backend nccl: this torch sees no CUDA device (torch {torch.__version__}); "
                             "--backend gloo runs on CPUs")
    if not dist.is_nccl_available():
        raise CostModelError(f"--backend nccl: torch {torch.__version__} was built without NCCL; "
                             "--backend gloo runs on CPUs")
    if torch.cuda.device_count() < nproc:
        raise CostModelError(f"--nproc {nproc}: this node has {torch.cuda.device_count()} CUDA devices")


@bench_app.command("gpu")
def bench_gpu(
    out: Annotated[Path, typer.Option(metavar="FILE", help="Results JSON.")],
    device: Annotated[str, typer.Option(metavar="cuda|cuda:N|cpu",
                                        help="cuda, cuda:1, or cpu (a smoke run).")] = "cuda",
    iters: Annotated[int, typer.Option(parser=whole(1, 10**6), metavar="N", help="Timed iterations.")] = 10,
    small: Annotated[bool, typer.Option("--small", help="Tiny shapes (for CPU smoke tests).")] = False,
    hardware: o.HardwareOpt = None,
    as_json: o.JsonOpt = False,
) -> None:
    """bf16 matmul throughput, copy bandwidth, an FFN training step's time, MFU and peak memory.

    Each is printed next to cost4d's figure for it (the spec's peaks and the predicted step: give --hardware).
    """
    import re

    from costmodel.inputs.output import write_json
    from costmodel.report import bench as report
    from costmodel.specs.load import load_hardware

    if not re.fullmatch(r"cpu|cuda(:[0-9]{1,3})?", device):
        raise CostModelError(f"--device {shown(device)}: use cuda, cuda:N or cpu")
    out = out_path(out)
    spec = load_hardware(hardware) if hardware else None
    _need_torch("bench gpu")
    import torch

    if device.startswith("cuda"):
        index = int(device.partition(":")[2] or 0)
        if not torch.cuda.is_available():
            raise CostModelError(f"--device {device}: this torch sees no CUDA device (torch {torch.__version__}); "
                                 "--device cpu --small runs a smoke test")
        if index >= torch.cuda.device_count():
            raise CostModelError(f"--device {device}: only {torch.cuda.device_count()} CUDA devices")
    from costmodel.bench.gpu import run, steps

    try:
        with report.progress(steps(small), f"bench gpu on {device}") as advance:
            doc = run(device, iters=iters, small=small, hardware=spec, on_progress=advance)
    except RuntimeError as err:  # CUDA errors, out of memory
        typer.echo(f"error: bench gpu failed on {device}: {' '.join(str(err).split())[:300]}", err=True)
        raise typer.Exit(1) from None
    write_json(out, doc)
    report.gpu(doc, spec, out, as_json)


def register(app: typer.Typer) -> None:
    app.add_typer(bench_app, name="bench")
