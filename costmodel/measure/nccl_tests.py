"""Parse nccl-tests output (all_reduce_perf, all_gather_perf, ...) into cost4d results.

Handles single- and multi-node logs (ranks, hosts and GPUs per node from the '#  Rank' lines),
in-place and out-of-place columns, and any collective. Malformed logs get an error naming the line.
One row of the table, and the labels launchers add to lines, are :mod:`costmodel.measure.nccl_rows`'.
"""

from __future__ import annotations

import re
from pathlib import Path

from costmodel.errors import CostModelError
from costmodel.inputs.bounds import DEVICES
from costmodel.measure.nccl_rows import data_row, delta_checked, is_row, layout_of, unlabelled
from costmodel.measure.nccl_world import Section, WorldFlags, check_told, flags_of, world_of
from costmodel.inputs.files import shown
from costmodel.measure.results import COLLECTIVES, FORMAT, algorithm_set_by, canonical_algorithm, canonical_collective
from costmodel.record import record

_VERSION = re.compile(r"nccl-tests version (\S+) nccl-headers=(\d+) nccl-library=(\d+)")
_TEST = re.compile(r"Collective test starting: (\w+)")
_ALGO = re.compile(r"NCCL INFO NCCL_ALGO set by environment to (.+?)\s*$")  # NCCL_DEBUG=INFO (src/graph/tuning.cc)
_THREADS = re.compile(r"#\s*nThread\s+(\d+)\s+nGpus\s+(\d+)")  # one thread launches nGpus GPUs' kernels
#: '#  Rank  0 Group  0 Pid ... on HOST device  0 [BUS] NAME'; nccl-tests before 2.11 print no Group
#: (src/common.cu@0f8c785a run(): "#   Rank %2d Pid %6d on %10s device %2d [0x%02x] %s")
_RANK = re.compile(r"#\s+Rank\s+(\d+)\s+(?:Group\s+(\d+)\s+)?Pid\s+\d+\s+on\s+(\S+)\s+device\s+(\d+)\s+"
                   r"\[[^\]]*\]\s+(.*)$")
#: programs that are no collective NCCL's tuner prices: an all-gather built from send/recv between hypercube
#: partners (src/hypercube.cu), and pairs sending across a bisection (src/bisection.cu)
_UNMODELLED = {"hypercube": "an all-gather built from send/recv between hypercube partners",
               "bisection": "send/recv pairs across a bisection of the ranks"}
_ALGORITHMS = ("nvlstree", "nvls", "collnet", "tree", "ring", "pat")


def nccl_version_of(code: str) -> str:
    """22602 -> '2.26.2'; before 2.9 NCCL_VERSION_CODE was X x 1000 + Y x 100 + Z (2708 -> '2.7.8'; nccl.h.in)."""
    value = int(code)
    if value < 20900:
        return f"{value // 1000}.{value // 100 % 10}.{value % 100}"
    return f"{value // 10000}.{value // 100 % 100}.{value % 100}"


#: collective names as file names spell them, longest first (reduce_scatter before reduce)
_OPS_IN_NAMES = ("all_reduce", "allreduce", "all_gather", "allgather", "reduce_scatter", "reducescatter",
                 "alltoall", "all_to_all", "sendrecv", "broadcast", "gather", "scatter", "reduce")
def _named(path: Path, names) -> str | None:
    """The first of ``names`` that the file name holds as a word (between _, -, . or its ends)."""
    stem = Path(path).stem.lower().replace("-", "_")
    return next((name for name in names if re.search(rf"(^|[_.]){name}($|[_.])", stem)), None)


def infer_algorithm(path: Path) -> str:
    """The algorithm named in the file name (…_ring.out, …_nvls.out), else 'auto'."""
    return _named(path, _ALGORITHMS) or "auto"


@record
class Hints:
    """What a log may not say, given by the user: the op (``--op``), the algorithm it ran with
    (``--algorithm``), and the world (``--nodes``, ``--gpus-per-node``) when it lists no ranks."""

    op: str | None = None
    algorithm: str | None = None
    nodes: int | None = None
    gpus_per_node: int | None = None

    def environment(self, path) -> dict | None:
        if self.nodes is None and self.gpus_per_node is None:
            return None
        if self.nodes is None or self.gpus_per_node is None:
            raise CostModelError(f"{path}: give both --nodes and --gpus-per-node")
        world = self.nodes * self.gpus_per_node
        return {"world_size": world, "nodes": self.nodes, "gpus_per_node": self.gpus_per_node, "hosts": [],
                "devices": [], "backend": "nccl"}


def infer_op(path: Path) -> str | None:
    """The collective a file name names (all_reduce_perf.out, dgxc-allreduce.out), else None."""
    name = _named(path, _OPS_IN_NAMES)
    return canonical_collective(name) if name else None


def parse_log(path: Path, hints: Hints = Hints(), text: str | None = None) -> dict:
    """One nccl-tests log (``text`` if already read) as a cost4d results document (:func:`read_log`), read alone:
    --nodes/--gpus-per-node that name another world than its rank lines, where no block of it lacks them, are
    refused (nccl_world.check_told; measure/load.read_measurements judges several logs together)."""
    document, flags = read_log(path, hints, text)
    check_told([flags])
    return document


def read_log(path: Path, hints: Hints = Hints(), text: str | None = None) -> tuple[dict, WorldFlags]:
    """One nccl-tests log as a cost4d results document, and what --nodes/--gpus-per-node did in it (judged by the
    caller over every log read together): one run per 'Collective test starting' block; a log that starts at its
    header (no such line) is one block whose op comes from ``--op`` or the file name."""
    from costmodel.inputs.files import LOG_LIMIT, read_text

    text = read_text(path, "nccl-tests log", LOG_LIMIT) if text is None else text
    named = _named(Path(path), _ALGORITHMS)  # the algorithm the file name gives, if any
    algorithm = canonical_algorithm(hints.algorithm) if hints.algorithm is not None else named or "auto"
    op = canonical_collective(hints.op) if hints.op is not None else None
    version = nccl = threads = layout = set_to = prefix = banner = cut = None
    sections: list[Section] = []
    lines = text.splitlines()
    for lineno, line in enumerate(lines, 1):
        line = unlabelled(prefix.sub("", line, count=1) if prefix else line)
        if (m := _VERSION.search(line)):
            version, nccl = m.group(1), nccl_version_of(m.group(3))
            prefix = prefix or launcher_prefix(line)
        elif (m := _ALGO.search(line)):
            set_to = algorithm_set_by(m.group(1), f"{path}:{lineno}") if hints.algorithm is None else None
        elif (m := _TEST.search(line)):
            prefix = prefix or launcher_prefix(line)
            sections.append(_section(m.group(1), op, path, lineno))
            layout = None
        elif (m := _THREADS.search(line)):
            threads = min(int(m.group(2)), DEVICES)
            if sections:
                sections[-1].gpus_per_thread = threads
        elif (m := _RANK.search(line)):
            _open(sections, path, lineno, op, threads).add_rank(int(m.group(1)), m.group(3), m.group(5).strip(),
                                                                 path, lineno, int(m.group(2) or 0))
        elif line.lstrip().startswith("#"):
            columns = line.lstrip().lstrip("#").split()
            if columns[:2] == ["size", "count"]:
                layout = layout_of(columns, path, lineno, banner)
            banner = line  # the line above a column header names its placements
        elif is_row(line.split(), layout):
            if cut:  # a row after an unreadable one: that one was not the last, cut short by a time limit
                raise cut[0]
            section = _open(sections, path, lineno, op, threads)
            try:
                rows = data_row(line, path, lineno, layout)
            except CostModelError as err:  # kept while no data row follows: the last one, cut short
                cut, rows = (err, section, lineno), []
            section.rows += [] if section.unmodelled else rows
        # anything else is not nccl-tests' table: NCCL_DEBUG lines, launcher and container notices
    if cut:  # the last data row, followed by non-data lines only (a scheduler's, NCCL's or mpirun's notice)
        err, section, lineno = cut
        section.skipped = (f"its last row (line {lineno}) is cut short and left out: "  # a time limit
                           f"{str(err).removeprefix(f'{path}:{lineno}: ')}")
    if not sections:
        raise CostModelError(f"{path}: no data rows: is this nccl-tests output?")
    algorithm = set_to or algorithm  # NCCL's own word on NCCL_ALGO over the file name's
    given = hints.environment(path)
    runs, environment, skipped = [], None, []
    timed = [s for s in sections if s.rows and not s.unmodelled]
    for section in sections:
        why = section.unmodelled or (None if section.rows else "it has no data rows (the test failed before them?)")
        if why and timed:  # a sweep keeps its other tests, and says what it left out
            skipped.append(f"{path}: the {section.name} test (line {section.lineno}) is left out: {why}")
            continue
        if why:
            raise CostModelError(f"{path}: the {section.name} test (line {section.lineno}): {why}")
        if section.skipped:
            skipped.append(f"{path}: the {section.collective} test (line {section.lineno}): {section.skipped}")
        env = world_of(section, given, environment, path)
        environment = environment or env
        runs.append({"collective": section.collective, "algorithm": algorithm,
                     "rows": delta_checked(section.rows, env["world_size"]), "environment": env})
    notes = [] if set_to or hints.algorithm or named else untold_algorithm(path, runs)
    return {
        "format": FORMAT,
        "source": {"tool": "nccl-tests", "version": version, "nccl": nccl, "files": [str(path)],
                   **({"skipped": skipped} if skipped else {}), **({"notes": notes} if notes else {})},
        "environment": environment,
        "runs": runs,
    }, flags_of(sections)


def untold_algorithm(path, runs: list[dict]) -> list[str]:
    """One note where a log of an op NCCL_ALGO steers names no algorithm (no NCCL_ALGO line, none in its file name):
    it is priced as NCCL's own choice, which a run under NCCL_ALGO=ring would not be."""
    from costmodel.cost.nccl import TUNED

    steered = sorted({r["collective"] for r in runs if r["collective"] in TUNED and r["environment"]["world_size"] > 1})
    if not steered:
        return []
    return [f"{path}: the log names no algorithm (no 'NCCL_ALGO set by environment' line, none in its file name): "
            f"its {', '.join(steered)} rows are taken as NCCL's own choice; if it ran with NCCL_ALGO set, say so with "
            "--algorithm (e.g. --algorithm ring)"]


def _agreed(logged: str, given: str | None, path, lineno: int) -> str:
    if given is not None and given != logged:
        raise CostModelError(f"{path}:{lineno}: the log runs {logged}, but --op says {given}")
    return logged


def _open(sections: list[Section], path, lineno: int, op: str | None, threads: int | None) -> Section:
    """The block a rank line or data row belongs to; before any 'Collective test starting' line, a
    block of its own whose op is --op or the file name's."""
    if not sections:
        op = op or infer_op(Path(path))
        if op is None:
            raise CostModelError(f"{path}:{lineno}: no 'Collective test starting' line before the data, and the "
                                 "file name names no collective: give --op (e.g. --op all-reduce)")
        sections.append(Section(op, lineno, threads))
    return sections[-1]


def _section(name: str, op: str | None, path, lineno: int) -> Section:
    """The block a 'Collective test starting' line opens: its collective's, or one no model times."""
    why = unmodelled(name)
    if why:
        return Section(_program(name), lineno, unmodelled=why, name=name)
    return Section(_agreed(program_of(name, path, lineno), op, path, lineno), lineno)


def launcher_prefix(line: str):
    """What a launcher or log collector put before one of nccl-tests' own header lines ('# nccl-tests version',
    '# Collective test starting'), as a pattern for every line (its digits any digits: timestamps move), or None
    where nothing but the known labels precedes them."""
    head = line[:line.find("#")] if "#" in line else ""
    if not head.strip():
        return None
    return re.compile("^" + re.sub(r"\d+", r"\\d+", re.escape(head)))


def _program(name: str) -> str:
    """all_reduce_perf, or with a build's NAME_SUFFIX (make MPI=1 NAME_SUFFIX=_mpi: all_reduce_perf_mpi; nccl-tests
    README), without its suffix: all_reduce."""
    return re.sub(r"_perf\w*$", "", name)


def unmodelled(name: str) -> str | None:
    """Why no model times a program (hypercube, bisection), or None."""
    base = _program(name)
    return (f"{name} times {_UNMODELLED[base]}: no NCCL collective, so cost4d has no time model for it"
            if base in _UNMODELLED else None)


def program_of(name: str, path, lineno: int) -> str:
    """The collective a 'Collective test starting' line names (one line where no model times it)."""
    why = unmodelled(name)
    if why:
        raise CostModelError(f"{path}:{lineno}: {why}")
    try:
        return canonical_collective(_program(name))
    except CostModelError:
        raise CostModelError(f"{path}:{lineno}: unknown collective {shown(name)}; known: "
                             f"{', '.join(COLLECTIVES)}") from None


def merge(documents: list[dict]) -> dict:
    """Several logs of one system as one document (runs appended, files listed)."""
    first = documents[0]
    kept = {k: v for k, v in first["source"].items() if k not in ("skipped", "notes")}  # each doc's added below
    merged = {**first, "source": {**kept, "files": []}, "runs": []}
    for doc in documents:
        files = doc["source"].get("files")
        merged["source"]["files"] += [str(f) for f in files] if isinstance(files, list) else []
        release = doc["source"].get("nccl")  # each log's own release (or none stated) stays with its runs
        merged["runs"] += [dict(run, environment=run.get("environment") or doc["environment"],
                                nccl=run.get("nccl", release)) for run in doc["runs"]]
        for key in ("skipped", "notes"):
            merged["source"][key] = merged["source"].get(key, []) + doc["source"].get(key, [])
    if len({doc["source"].get("nccl") for doc in documents}) > 1:  # no one release for them all
        merged["source"].pop("nccl", None)
    stated = {doc["source"].get("version") for doc in documents} - {None}  # nccl-tests' own: where the logs agree
    merged["source"]["version"] = stated.pop() if len(stated) == 1 else None
    for key in ("skipped", "notes"):
        if not merged["source"][key]:
            del merged["source"][key]
    return merged
