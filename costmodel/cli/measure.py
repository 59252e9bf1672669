"""`cost4d import nccl-tests` and `cost4d validate`: measurements in, errors out (`cost4d bench`: bench.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from costmodel.cli import options as o
from costmodel.cli.layout import no_tables
from costmodel.errors import CostModelError
from costmodel.inputs.files import shown
from costmodel.inputs.bounds import DEVICES
from costmodel.inputs.numbers import whole
from costmodel.measure.results import ALGORITHMS, COLLECTIVES

import_app = typer.Typer(help="Read other tools' benchmark output into cost4d's results format.",
                         no_args_is_help=True)


_LOGS = "nccl-tests logs that do not say"
#: what a log may leave out, given on the command line (import nccl-tests, validate)
LOG_HINTS = {
    "op": (Annotated[Optional[str], typer.Option(
        metavar="OP", help="The collective, for a log with no 'Collective test starting' line whose file name names "
        f"none: {', '.join(COLLECTIVES)}.", rich_help_panel=_LOGS)], None),
    "algorithm": (Annotated[Optional[str], typer.Option(
        metavar="ALGO", help=f"NCCL_ALGO the logs ran with: {', '.join(ALGORITHMS)}; default: a log's 'NCCL_ALGO set "
        "by environment' line, else its file name, else 'auto' (NCCL's own choice, with a note).",
        rich_help_panel=_LOGS)], None),
    "nodes": (Annotated[Optional[int], typer.Option(
        parser=whole(1, DEVICES), metavar="N", help="Nodes, for the logs with no '#  Rank' lines (a log that lists its "
        "ranks keeps its own world).",
        rich_help_panel=_LOGS)], None),
    "gpus_per_node": (Annotated[Optional[int], typer.Option(
        parser=whole(1, DEVICES), metavar="N", help="GPUs per node, for the logs with no '#  Rank' lines.",
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
    """Results JSON files, nccl-tests logs and nccl-tests' own JSON (-J), each as a results document
    (measure/load.read_measurements); ``hints`` fill in what logs leave out. Their notes: :func:`say_notes`."""
    from costmodel.measure.load import read_measurements

    return read_measurements([p for given in paths for p in shipped(given)], hints)


def say_notes(docs: list[dict], spec=None) -> None:
    """The logs' notes (what a sweep left out, what was assumed) and, against a ``spec``, where they ran on another
    GPU than its (validate, plot validate), once the command has its answer: a refusal stays one line."""
    from costmodel.measure.devices import device_note

    for source in (doc["source"] for doc in docs):
        for note in source.get("skipped", []) + source.get("notes", []):
            typer.echo(f"note: {note}", err=True)
    note = device_note(docs, spec) if spec is not None else None
    if note:
        typer.echo(f"note: {note}", err=True)


def shipped(path: Path) -> list[Path]:
    """``shipped:FOLDER`` names the logs that ship with cost4d (hardware/measured/FOLDER/*.out, also
    from an installed package); any other path is itself."""
    from costmodel.inputs.files import shown
    from costmodel.specs.load import hardware_dir

    text = str(path)
    if not text.startswith("shipped:"):
        return [path]
    root = hardware_dir() / "measured"
    known = sorted(p.name for p in root.iterdir() if p.is_dir() and any(p.glob("*.out")))  # logs, not the GEMM table
    name = text.removeprefix("shipped:")
    if name not in known:
        raise CostModelError(f"no shipped logs {shown(name)}; shipped: {', '.join(known)}")
    return sorted((root / name).glob("*.out"))


def message_size(text: str, flag: str) -> int:
    """A message size in bytes (a plain number is bytes, as in nccl-tests' -b/-e)."""
    from costmodel.inputs.numbers import size

    return int(size(text, flag=flag, lo=1, hi=2**50, unit_required=False))


def out_path(out: Optional[Path]) -> Optional[Path]:
    """--out checked before any work, so a bad path fails first and nothing is written."""
    from costmodel.inputs.output import writable

    return writable(out) if out is not None else None


@import_app.callback()
def _import_group() -> None:
    """Read other tools' benchmark output into cost4d's results format (JSON: no tables, so no --plain)."""


@import_app.command("nccl-tests")
@no_tables
@with_log_hints
def import_nccl_tests(
    logs: Annotated[list[Path], typer.Argument(metavar="LOG", help="nccl-tests output files (all_reduce_perf, ...).")],
    out: Annotated[Optional[Path], typer.Option(metavar="FILE",
                                                help="Write the JSON here (atomically) instead of stdout.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="With --out, print the results JSON as well (--out alone "
                                          "prints one line; without --out the JSON is always printed).",
                                          rich_help_panel="Output")] = False,
    *,
    hints,
) -> None:
    """Parse nccl-tests logs (single or multi-node, any collective, one run per test in the file) into
    one results JSON. Any nccl-tests version's columns (read by the column header), -I and -S columns, and
    NCCL_DEBUG lines mixed in; lines may carry srun's '0: ', Open MPI's '[1,0]<stdout>:', MPICH's '[0] ' or
    kubectl's and ts's timestamps. Parallel groups (NCCL_TESTS_SPLIT_MASK) are timed as one group."""
    from costmodel.inputs.output import write_json
    from costmodel.measure.nccl_tests import merge
    from costmodel.report import emit_json

    out = out_path(out)
    docs = load_measurements(logs, hints)
    document = merge(docs)
    say_notes(docs)
    if out:
        write_json(out, document)
    if as_json or not out:
        emit_json(document)
    else:
        typer.echo(f"wrote {out}: {len(document['runs'])} runs, "
                   f"{sum(len(r['rows']) for r in document['runs'])} rows")


def check_validate_options(hardware, placement: str) -> None:
    """What `validate` and `plot validate` need: a hardware spec, and a placement nccl-tests prints."""
    if hardware is None:
        raise CostModelError("give --hardware (the spec whose network model is checked)")
    if placement not in ("out-of-place", "in-place", "both"):
        raise CostModelError(f"--placement {shown(placement)}: use out-of-place, in-place or both")


def validate(
    results: Annotated[list[Path], typer.Argument(
        metavar="FILE", help="cost4d results JSON or nccl-tests logs; shipped:FOLDER for the logs that ship with cost4d "
        "(shipped:h100-8gpu-together-nccl-tests).")],
    hardware: o.HardwareOpt = None,
    fit: Annotated[bool, typer.Option("--fit", help="Fit latency and bandwidth per collective and algorithm.")] = False,
    out: Annotated[Optional[Path], typer.Option(metavar="FILE",
                                                help="With --fit: write the calibrated hardware spec (JSON).")] = None,
    placement: Annotated[str, typer.Option(metavar="out-of-place|in-place|both",
                                           help="Which of the log's two timings to compare.")] = "out-of-place",
    min_bytes: Annotated[str, typer.Option(
        metavar="SIZE", help="Smallest size in the medians and the fit (below, latency dominates).")] = "1MiB",
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

    check_validate_options(hardware, placement)
    if out is not None and not fit:
        raise CostModelError("--out writes the calibrated spec, which only --fit makes: add --fit")
    out = out_path(out)
    floor = message_size(min_bytes, "--min-bytes")
    spec = load_hardware(hardware)
    docs = load_measurements(results, hints)
    v.check_networked(docs)
    before = v.compare(docs, spec, placement)
    fits, after = [], None
    if fit:
        fits = v.fit(docs, spec, placement, floor)
        calibrated = v.calibrated_spec(spec, fits, f"cost4d validate --fit on {', '.join(map(str, results))}")
        after = v.compare(docs, validate_spec(Hardware, calibrated, "the calibrated spec"), placement)
        if out:
            from costmodel.inputs.output import write_json

            write_json(out, calibrated)
    say_notes(docs, spec)
    report_measure.validation(spec, before, fits, after, out, as_json, floor)


def register(app: typer.Typer) -> None:
    app.add_typer(import_app, name="import")
    app.command("validate")(with_log_hints(validate))
