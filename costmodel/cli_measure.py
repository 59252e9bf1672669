"""`cost4d import nccl-tests`, `cost4d validate` and `cost4d bench`: measurements in, errors out."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from costmodel import options as o
from costmodel.errors import CostModelError

import_app = typer.Typer(help="Read other tools' benchmark output into cost4d's results format.",
                         no_args_is_help=True)


def load_measurements(paths: list[Path], algorithm: Optional[str] = None) -> list[dict]:
    """Results JSON files and nccl-tests logs, each as a results document."""
    from costmodel.measure.nccl_tests import parse_log
    from costmodel.measure.results import read_results

    docs = []
    for path in paths:
        try:
            head = path.read_text()[:1].strip()
        except OSError as err:
            raise CostModelError(f"cannot read {path}: {err.strerror}") from None
        docs.append(read_results(path) if head == "{" else parse_log(path, algorithm))
    return docs


@import_app.command("nccl-tests")
def import_nccl_tests(
    logs: Annotated[list[Path], typer.Argument(help="nccl-tests output files (all_reduce_perf, ...).")],
    algorithm: Annotated[Optional[str], typer.Option(
        help="Algorithm the logs ran with (ring, tree, nvls); default: from the file name, else 'auto'.")] = None,
    out: Annotated[Optional[Path], typer.Option(help="Write the JSON here (atomically) instead of stdout.")] = None,
) -> None:
    """Parse nccl-tests logs (single or multi-node, any collective) into one results JSON."""
    from costmodel.measure.nccl_tests import merge
    from costmodel.measure.results import write_atomically
    from costmodel.report import emit_json

    document = merge(load_measurements(logs, algorithm))
    if out:
        write_atomically(out, document)
        typer.echo(f"wrote {out}: {len(document['runs'])} runs, "
                   f"{sum(len(r['rows']) for r in document['runs'])} rows")
    else:
        emit_json(document)


def validate(
    results: Annotated[list[Path], typer.Argument(help="cost4d results JSON or nccl-tests logs.")],
    hardware: o.HardwareOpt = None,
    fit: Annotated[bool, typer.Option("--fit", help="Fit latency and bandwidth per collective and algorithm.")] = False,
    out: Annotated[Optional[Path], typer.Option(help="With --fit: write the calibrated hardware spec (JSON).")] = None,
    placement: Annotated[str, typer.Option(help="out-of-place, in-place or both.")] = "out-of-place",
    as_json: o.JsonOpt = False,
) -> None:
    """Predicted vs measured time per collective and size; median |error| over sizes >= 1 MiB.

    Example: cost4d validate hardware/measured/h100-8gpu-together-nccl-tests/*.out --hardware h100-sxm --fit
    """
    from costmodel import report_measure
    from costmodel.measure import validate as v
    from costmodel.specs.hardware import Hardware
    from costmodel.specs.load import load_hardware

    if hardware is None:
        raise CostModelError("give --hardware (the spec whose network model is checked)")
    if placement not in ("out-of-place", "in-place", "both"):
        raise CostModelError(f"--placement {placement!r}: use out-of-place, in-place or both")
    spec = load_hardware(hardware)
    docs = load_measurements(results)
    before = v.compare(docs, spec, placement)
    fits, after = [], None
    if fit:
        fits = v.fit(docs, spec, placement)
        calibrated = v.calibrated_spec(spec, fits, f"cost4d validate --fit on {', '.join(map(str, results))}")
        after = v.compare(docs, Hardware.model_validate(calibrated), placement)
        if out:
            from costmodel.measure.results import write_atomically

            write_atomically(out, calibrated)
    report_measure.validation(spec, before, fits, after, out, as_json)


def register(app: typer.Typer) -> None:
    app.add_typer(import_app, name="import")
    app.command("validate")(validate)
