"""`cost4d import nccl-tests`, `cost4d validate` and `cost4d bench`: measurements in, errors out."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from costmodel.cli import options as o
from costmodel.errors import CostModelError
from costmodel.inputs.files import shown
from costmodel.inputs.bounds import DEVICES
from costmodel.inputs.numbers import real, whole

import_app = typer.Typer(help="Read other tools' benchmark output into cost4d's results format.",
                         no_args_is_help=True)


_LOGS = "nccl-tests logs that do not say"
#: what a log may leave out, given on the command line (import nccl-tests, validate)
LOG_HINTS = {
    "op": (Annotated[Optional[str], typer.Option(
        help="The collective, for a log with no 'Collective test starting' line whose file name names none "
        "(all-reduce, all-gather, reduce-scatter, all-to-all, broadcast, reduce, gather, scatter, send/recv).",
        rich_help_panel=_LOGS)], None),
    "algorithm": (Annotated[Optional[str], typer.Option(
        help="NCCL_ALGO the logs ran with (ring, tree, nvls, ...); default: from the file name, else 'auto' "
        "(NCCL's own choice).", rich_help_panel=_LOGS)], None),
    "nodes": (Annotated[Optional[int], typer.Option(
        parser=whole(1, DEVICES), metavar="N", help="Nodes, for a log with no '#  Rank' lines.",
        rich_help_panel=_LOGS)], None),
    "gpus_per_node": (Annotated[Optional[int], typer.Option(
        parser=whole(1, DEVICES), metavar="N", help="GPUs per node, for a log with no '#  Rank' lines.",
        rich_help_panel=_LOGS)], None),
}


def with_log_hints(command):
    """Add LOG_HINTS to a command, which then receives ``hints=`` (a nccl_tests.Hints)."""
    from costmodel.cli.layout import extend

    def build(own, **values):
        from costmodel.measure.nccl_tests import Hints

        return Hints(**values)

    return extend(command, LOG_HINTS, "hints", build)


def load_measurements(paths: list[Path], hints=None) -> list[dict]:
    """Results JSON files and nccl-tests logs (told apart by their first character), each as a
    results document; ``hints`` fill in what logs leave out."""
    from costmodel.inputs.files import LOG_LIMIT, read_text
    from costmodel.measure.nccl_tests import Hints, parse_log
    from costmodel.measure.results import read_results

    docs = []
    for path in [p for given in paths for p in shipped(given)]:
        text = read_text(path, "measurement file", LOG_LIMIT)
        head = text.lstrip()[:40]
        is_json = head[:1] == "{" or (head[:1] == "[" and "]<std" not in head)  # not Open MPI's '[1,0]<stdout>:'

        docs.append(read_results(path, text) if is_json else parse_log(path, hints or Hints(), text))
    return docs


def shipped(path: Path) -> list[Path]:
    """``shipped:FOLDER`` names the logs that ship with cost4d (hardware/measured/FOLDER/*.out, also
    from an installed package); any other path is itself."""
    from costmodel.inputs.files import shown
    from costmodel.specs.load import hardware_dir

    text = str(path)
    if not text.startswith("shipped:"):
        return [path]
    root = hardware_dir() / "measured"
    known = sorted(p.name for p in root.iterdir() if p.is_dir())
    name = text.removeprefix("shipped:")
    if name not in known:
        raise CostModelError(f"no shipped logs {shown(name)}; shipped: {', '.join(known)}")
    return sorted((root / name).glob("*.out"))


def _size(text: str, flag: str) -> int:
    """A message size in bytes (a plain number is bytes, as in nccl-tests' -b/-e)."""
    from costmodel.inputs.numbers import size

    return int(size(text, flag=flag, lo=1, hi=2**50, unit_required=False))


def _out(out: Optional[Path]) -> Optional[Path]:
    """--out checked before any work, so a bad path fails first and nothing is written."""
    from costmodel.inputs.output import writable

    return writable(out) if out is not None else None


@import_app.command("nccl-tests")
@with_log_hints
def import_nccl_tests(
    logs: Annotated[list[Path], typer.Argument(help="nccl-tests output files (all_reduce_perf, ...).")],
    out: Annotated[Optional[Path], typer.Option(help="Write the JSON here (atomically) instead of stdout.")] = None,
    *,
    hints,
) -> None:
    """Parse nccl-tests logs (single or multi-node, any collective, one run per test in the file) into
    one results JSON. Lines may carry srun's '0: ' or Open MPI's '[1,0]<stdout>:' labels."""
    from costmodel.inputs.output import write_json
    from costmodel.measure.nccl_tests import merge
    from costmodel.report import emit_json

    out = _out(out)
    document = merge(load_measurements(logs, hints))
    if out:
        write_json(out, document)
        typer.echo(f"wrote {out}: {len(document['runs'])} runs, "
                   f"{sum(len(r['rows']) for r in document['runs'])} rows")
    else:
        emit_json(document)


def validate(
    results: Annotated[list[Path], typer.Argument(
        help="cost4d results JSON or nccl-tests logs; shipped:FOLDER for the logs that ship with cost4d "
        "(shipped:h100-8gpu-together-nccl-tests).")],
    hardware: o.HardwareOpt = None,
    fit: Annotated[bool, typer.Option("--fit", help="Fit latency and bandwidth per collective and algorithm.")] = False,
    out: Annotated[Optional[Path], typer.Option(help="With --fit: write the calibrated hardware spec (JSON).")] = None,
    placement: Annotated[str, typer.Option(help="out-of-place, in-place or both.")] = "out-of-place",
    min_bytes: Annotated[str, typer.Option(
        help="Smallest size in the medians and the fit (below, latency dominates).")] = "1MiB",
    as_json: o.JsonOpt = False,
    *,
    hints,
) -> None:
    """Predicted vs measured time per collective and size; median |error| over sizes >= --min-bytes.

    Example: cost4d validate shipped:h100-8gpu-together-nccl-tests --hardware h100-sxm --fit
    """
    from costmodel.report import measure as report_measure
    from costmodel.measure import validate as v
    from costmodel.specs.hardware import Hardware
    from costmodel.specs.load import load_hardware
    from costmodel.specs.load import validate as validate_spec

    if hardware is None:
        raise CostModelError("give --hardware (the spec whose network model is checked)")
    if placement not in ("out-of-place", "in-place", "both"):
        raise CostModelError(f"--placement {shown(placement)}: use out-of-place, in-place or both")
    if out is not None and not fit:
        raise CostModelError("--out writes the calibrated spec, which only --fit makes: add --fit")
    out = _out(out)
    floor = _size(min_bytes, "--min-bytes")
    spec = load_hardware(hardware)
    docs = load_measurements(results, hints)
    before = v.compare(docs, spec, placement)
    fits, after = [], None
    if fit:
        fits = v.fit(docs, spec, placement, floor)
        calibrated = v.calibrated_spec(spec, fits, f"cost4d validate --fit on {', '.join(map(str, results))}")
        after = v.compare(docs, validate_spec(Hardware, calibrated, "the calibrated spec"), placement)
        if out:
            from costmodel.inputs.output import write_json

            write_json(out, calibrated)
    report_measure.validation(spec, before, fits, after, out, as_json, floor)




bench_app = typer.Typer(help="Measure real hardware (needs torch: pip install 'cost4d\\[test]').",
                        no_args_is_help=True)


_COUNT = dict(parser=whole(0, 10**6), metavar="N")


@bench_app.command("collectives")
def bench_collectives(
    out: Annotated[Path, typer.Option(help="Results JSON (written atomically, also on failure).")],
    nproc: Annotated[int, typer.Option(parser=whole(2, 1024), metavar="N",
                                       help="Processes on this node (GPUs with nccl).")] = 2,
    backend: Annotated[str, typer.Option(help="nccl on GPUs, gloo on CPUs.")] = "gloo",
    ops: Annotated[str, typer.Option(help="Comma-separated: all-reduce, all-gather, reduce-scatter, all-to-all, "
                                          "broadcast, send/recv.")] = "all-reduce,all-gather,reduce-scatter",
    min_bytes: Annotated[str, typer.Option(help="Smallest buffer S, e.g. 1KiB (a plain number is bytes).")] = "1KiB",
    max_bytes: Annotated[str, typer.Option(help="Largest buffer S, e.g. 1GiB (a plain number is bytes).")] = "16MiB",
    factor: Annotated[float, typer.Option(parser=real(1, 1024, above=True), metavar="X",
                                          help="Size step factor (> 1).")] = 2.0,
    warmup: Annotated[int, typer.Option(**_COUNT, help="Untimed iterations per size.")] = 5,
    iters: Annotated[int, typer.Option(parser=whole(1, 10**6), metavar="N",
                                       help="Timed iterations per size.")] = 20,
    dtype: Annotated[str, typer.Option(help="float32, bfloat16 or float16.")] = "float32",
    timeout: Annotated[float, typer.Option(parser=real(0, 10**6, above=True), metavar="SECONDS",
                                           help="Seconds before the run is stopped (results so far are kept).")]
    = 600,
) -> None:
    """Time collectives over a size sweep with torch.distributed (launched with torchrun).

    Multi-node: run the same command on every node with torchrun's --nnodes/--rdzv options
    (see README); one JSON per run, readable by `cost4d validate`. Every option is checked before
    anything runs or --out is touched.
    """
    from costmodel.bench.collectives import launch
    from costmodel.measure.results import canonical_collective

    if backend not in ("gloo", "nccl"):
        raise CostModelError(f"--backend {shown(backend)}: use nccl (GPUs) or gloo (CPUs)")
    if dtype not in ("float32", "bfloat16", "float16"):
        raise CostModelError(f"--dtype {shown(dtype)}: use float32, bfloat16 or float16")
    names = [canonical_collective(op.strip()) for op in ops.split(",") if op.strip()]
    if not names:
        raise CostModelError(f"--ops {shown(ops)}: name at least one collective")
    lo, hi = _size(min_bytes, "--min-bytes"), _size(max_bytes, "--max-bytes")
    if hi < lo:
        raise CostModelError(f"--max-bytes {max_bytes} is below --min-bytes {min_bytes}")
    _need_torch("bench collectives")
    doc = launch(nproc=nproc, ops=names, min_bytes=lo, max_bytes=hi, factor=factor, warmup=warmup, iters=iters,
                 dtype=dtype, backend=backend, out=_out(out), timeout=timeout)
    typer.echo(f"{out}: status {doc['status']}, {len(doc['runs'])} collectives, "
               f"{sum(len(r['rows']) for r in doc['runs'])} sizes")
    if doc["status"] != "ok":
        raise typer.Exit(1)


def _need_torch(command: str) -> None:
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        raise CostModelError(f"{command} needs PyTorch: pip install 'cost4d[test]' (or torch itself)")


@bench_app.command("gpu")
def bench_gpu(
    out: Annotated[Path, typer.Option(help="Results JSON.")],
    device: Annotated[str, typer.Option(help="cuda, cuda:1, or cpu (a smoke run).")] = "cuda",
    iters: Annotated[int, typer.Option(parser=whole(1, 10**6), metavar="N", help="Timed iterations.")] = 10,
    small: Annotated[bool, typer.Option("--small", help="Tiny shapes (for CPU smoke tests).")] = False,
    hardware: o.HardwareOpt = None,
) -> None:
    """bf16 matmul throughput, memory-copy bandwidth, and an FFN training step's MFU and peak memory
    against cost4d's own prediction of both (the time and MFU prediction with --hardware, e.g. h100-sxm)."""
    import re

    from costmodel.inputs.output import write_json
    from costmodel.specs.load import load_hardware

    if not re.fullmatch(r"cpu|cuda(:[0-9]{1,3})?", device):
        raise CostModelError(f"--device {shown(device)}: use cuda, cuda:N or cpu")
    out = _out(out)
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
    from costmodel.bench.gpu import run

    doc = run(device, iters=iters, small=small, hardware=spec)
    write_json(out, doc)
    step = doc["ffn_step"]
    typer.echo(f"{out}: best bf16 matmul {max(r['flops_per_s'] for r in doc['matmul_bf16']) / 1e12:.1f} TFLOP/s; "
               f"copy {doc['copy']['bytes_per_s'] / 1e9:.1f} GB/s; FFN step {step['flops_per_s'] / 1e12:.2f} TFLOP/s")


def register(app: typer.Typer) -> None:
    app.add_typer(import_app, name="import")
    app.command("validate")(with_log_hints(validate))
    app.add_typer(bench_app, name="bench")
