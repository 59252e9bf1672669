"""nccl-tests' own JSON output (``-J FILE``, JSON_FILE_VERSION 2; NVIDIA/nccl-tests src/util.cu jsonOutputInit,
writeDeviceReport, writeBenchmarkLinePreamble and writeBenchmarkLineBody) as the same results its text log gives:
the program from ``args``, the ranks from ``config.devices``, NCCL_ALGO from ``env``, one row per placement."""

from __future__ import annotations

from pathlib import Path

from costmodel.errors import CostModelError
from costmodel.inputs.bounds import DEVICES, MESSAGE
from costmodel.inputs.files import shown
from costmodel.measure.nccl_rows import measurement
from costmodel.measure.nccl_tests import Hints, infer_algorithm, nccl_version_of, program_of
from costmodel.measure.nccl_world import Section, WorldFlags, check_told, flags_of, world_of
from costmodel.measure.results import FORMAT, algorithm_set_by, canonical_algorithm, canonical_collective


def is_nccl_tests_json(data) -> bool:
    """Whether a JSON document is nccl-tests' -J output (rather than a cost4d results file)."""
    return isinstance(data, dict) and {"config", "results", "args"} <= data.keys() and "format" not in data


def parse_json(path: Path, data: dict, hints: Hints = Hints()) -> dict:
    """One nccl-tests JSON file as a cost4d results document (:func:`read_json`), read alone: --nodes/--gpus-per-node
    that name another world than its devices are refused (nccl_world.check_told)."""
    document, flags = read_json(path, data, hints)
    check_told([flags])
    return document


def read_json(path: Path, data: dict, hints: Hints = Hints()) -> tuple[dict, WorldFlags]:
    """One nccl-tests JSON file as a cost4d results document (one run: one program per file), and what
    --nodes/--gpus-per-node did in it (judged by the caller over every file read together)."""
    where = str(path)
    args, config, results = data.get("args"), data.get("config"), data.get("results")
    if not (isinstance(args, list) and args and isinstance(config, dict) and isinstance(results, list) and results):
        raise CostModelError(f"{where}: nccl-tests JSON without 'args', 'config' or 'results' rows")
    op = canonical_collective(hints.op) if hints.op is not None else None
    logged = program_of(Path(str(args[0])).name, where, "args[0]")
    if op is not None and op != logged:
        raise CostModelError(f"{where}: the file runs {logged}, but --op says {op}")
    ngpus = config.get("ngpus")
    section = Section(logged, 1, ngpus if _whole(ngpus) and 0 < ngpus <= DEVICES else None)
    for i, device in enumerate(config.get("devices") or []):
        if not (isinstance(device, dict) and _whole(device.get("rank")) and _whole(device.get("group", 0))):
            raise CostModelError(f"{where}: config.devices[{i}]: expected an object with an integer 'rank' and 'group'")
        section.add_rank(device["rank"], str(device.get("hostname", "")), str(device.get("device_info", "")), where,
                         f"devices[{i}]", device.get("group", 0))
    for i, row in enumerate(results):
        section.rows += _rows(row, f"{where}: results[{i}]")
    env = world_of(section, hints.environment(path), None, where)
    nccl = data.get("nccl_version")
    return {
        "format": FORMAT,
        "source": {"tool": "nccl-tests", "version": None,
                   "nccl": nccl_version_of(nccl) if _whole(nccl) and 10000 <= nccl < 1000000 else None,
                   "files": [str(path)]},
        "environment": env,
        "runs": [{"collective": logged, "algorithm": _algorithm(data, hints, path), "rows": section.rows,
                  "environment": env}],
    }, flags_of([section])


def _whole(value) -> bool:
    """An integer as JSON writes one (not a boolean)."""
    return isinstance(value, int) and not isinstance(value, bool)


def _rows(row, where: str) -> list[dict]:
    if not isinstance(row, dict) or not _whole(row.get("size")) or not 0 <= row["size"] <= MESSAGE:
        raise CostModelError(f"{where}: expected an object with a whole 'size' of 0 to {MESSAGE:,} bytes, found "
                             f"{shown(row, 40)}")
    out = []
    for key, placement in (("out_of_place", "out-of-place"), ("in_place", "in-place")):
        values = row.get(key)
        if values is None or row["size"] == 0:
            continue
        if not isinstance(values, dict) or "cpu_time" in values:
            raise CostModelError(f"{where}.{key}: expected 'time', 'alg_bw', 'bus_bw' (a 'cpu_time' is nccl-tests "
                                 "-C 1: the host's launch time, not the collective's; rerun without -C)")
        wrong = values.get("nwrong")
        count = row.get("count")
        out.append(measurement(row["size"], count if _whole(count) and 0 <= count <= MESSAGE else 0,
                               str(row.get("type", "")), placement,
                               [values.get("time"), values.get("alg_bw"), values.get("bus_bw")],
                               None if wrong is None else wrong, f"{where}.{key}"))
    return out


def _algorithm(data: dict, hints: Hints, path: Path) -> str:
    """--algorithm, else the NCCL_ALGO the run's environment set, else the file name's, else 'auto'."""
    if hints.algorithm is not None:
        return canonical_algorithm(hints.algorithm)
    for entry in data.get("env") or []:
        if isinstance(entry, str) and entry.startswith("NCCL_ALGO="):
            set_to = algorithm_set_by(entry.split("=", 1)[1], f"{path}: env")
            if set_to is not None:
                return set_to
    return infer_algorithm(path)
