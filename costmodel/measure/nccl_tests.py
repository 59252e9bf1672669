"""Parse nccl-tests output (all_reduce_perf, all_gather_perf, ...) into cost4d results.

Handles single- and multi-node logs (ranks, hosts and GPUs per node from the '#  Rank' lines),
in-place and out-of-place columns, and any collective. Malformed logs get an error naming the line.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

from costmodel.errors import CostModelError
from costmodel.inputs.bounds import DEVICES, MEASURED
from costmodel.inputs.files import shown
from costmodel.measure.results import FORMAT, canonical_algorithm, canonical_collective

_VERSION = re.compile(r"nccl-tests version (\S+) nccl-headers=(\d+) nccl-library=(\d+)")
_TEST = re.compile(r"Collective test starting: (\w+)")
_THREADS = re.compile(r"#\s*nThread\s+(\d+)\s+nGpus\s+(\d+)")  # one thread launches nGpus GPUs' kernels
_RANK = re.compile(r"#\s+Rank\s+(\d+)\s+Group\s+\d+\s+Pid\s+\d+\s+on\s+(\S+)\s+device\s+(\d+)\s+\[[^\]]*\]\s+(.*)$")
_ALGORITHMS = ("nvlstree", "nvls", "collnet", "tree", "ring", "pat")


def _nccl_version(code: str) -> str:
    """22602 -> '2.26.2'."""
    value = int(code)
    return f"{value // 10000}.{value // 100 % 100}.{value % 100}"


#: task labels launchers put before each line: srun --label ('0: '), Open MPI --tag-output ('[1,0]<stdout>:')
_LABEL = re.compile(r"^\s*(?:\d+:\s|\[\d+,\d+\]<std(?:out|err)>:\s?)")
#: collective names as file names spell them, longest first (reduce_scatter before reduce)
_OPS_IN_NAMES = ("all_reduce", "allreduce", "all_gather", "allgather", "reduce_scatter", "reducescatter",
                 "alltoall", "all_to_all", "sendrecv", "broadcast", "gather", "scatter", "reduce")
_MAX_BYTES = 2**50


def _number(token: str, path, lineno: int, what: str) -> float:
    """A finite, non-negative number from a log column."""
    try:
        value = float(token)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        raise CostModelError(f"{path}:{lineno}: {what}: expected a finite number >= 0, found {shown(token, 20)}")
    return value


def _named(path: Path, names) -> str | None:
    """The first of ``names`` that the file name holds as a word (between _, -, . or its ends)."""
    stem = Path(path).stem.lower().replace("-", "_")
    return next((name for name in names if re.search(rf"(^|[_.]){name}($|[_.])", stem)), None)


def infer_algorithm(path: Path) -> str:
    """The algorithm named in the file name (…_ring.out, …_nvls.out), else 'auto'."""
    return _named(path, _ALGORITHMS) or "auto"


class _Section:
    """One 'Collective test starting' block: its collective, rank lines and data rows."""

    def __init__(self, collective: str, lineno: int, gpus_per_thread: int | None = None):
        self.collective, self.lineno = collective, lineno
        self.gpus_per_thread = gpus_per_thread  # nccl-tests -g: GPUs one thread drives
        self.ranks: dict[int, tuple[str, str]] = {}
        self.rows: list[dict] = []

    def add_rank(self, rank: int, host: str, device: str, path, lineno: int) -> None:
        if rank in self.ranks:
            raise CostModelError(f"{path}:{lineno}: rank {rank} is listed twice in the "
                                 f"{self.collective} test (line {self.lineno})")
        self.ranks[rank] = (host, device)

    def environment(self, path) -> dict:
        world = len(self.ranks)
        if sorted(self.ranks) != list(range(world)):
            raise CostModelError(f"{path}: the {self.collective} test (line {self.lineno}) lists ranks "
                                 f"{_spans(sorted(self.ranks))}; expected 0 to {world - 1}")
        per_host: dict[str, int] = {}
        for host, _ in self.ranks.values():
            per_host[host] = per_host.get(host, 0) + 1
        if len(set(per_host.values())) > 1:
            counts = ", ".join(f"{host}: {n}" for host, n in sorted(per_host.items()))
            raise CostModelError(f"{path}: ranks per host differ ({counts}); cost4d models nodes with "
                                 "equal numbers of GPUs")
        return {"world_size": world, "nodes": len(per_host), "gpus_per_node": world // len(per_host),
                "hosts": sorted(per_host), "devices": sorted({name for _, name in self.ranks.values()}),
                "backend": "nccl", "gpus_per_thread": self.gpus_per_thread}


def _spans(ranks: list[int]) -> str:
    return ", ".join(map(str, ranks[:8])) + (", ..." if len(ranks) > 8 else "")


@dataclass(frozen=True)
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
    """One nccl-tests log (``text`` if already read) as a cost4d results document: one run per
    'Collective test starting' block; a log that starts at its header (no such line) is one block
    whose op comes from ``--op`` or the file name."""
    from costmodel.inputs.files import LOG_LIMIT, read_text

    text = read_text(path, "nccl-tests log", LOG_LIMIT) if text is None else text
    algorithm = canonical_algorithm(hints.algorithm) if hints.algorithm is not None else infer_algorithm(Path(path))
    op = canonical_collective(hints.op) if hints.op is not None else None
    version = nccl = threads = None
    sections: list[_Section] = []
    for lineno, line in enumerate(text.splitlines(), 1):
        line = _LABEL.sub("", line, count=1)
        if (m := _VERSION.search(line)):
            version, nccl = m.group(1), _nccl_version(m.group(3))
        elif (m := _TEST.search(line)):
            sections.append(_Section(_agreed(canonical_collective(m.group(1)), op, path, lineno), lineno))
        elif (m := _THREADS.search(line)):
            threads = min(int(m.group(2)), DEVICES)
            if sections:
                sections[-1].gpus_per_thread = threads
        elif (m := _RANK.search(line)):
            _open(sections, path, lineno, op, threads).add_rank(int(m.group(1)), m.group(2), m.group(4).strip(),
                                                                 path, lineno)
        elif line.strip() and not line.lstrip().startswith("#"):
            _open(sections, path, lineno, op, threads).rows += _data_row(line, path, lineno)
    if not sections:
        raise CostModelError(f"{path}: no data rows: is this nccl-tests output?")
    given = hints.environment(path)
    runs, environment = [], None
    for section in sections:
        if not section.rows:
            raise CostModelError(f"{path}: the {section.collective} test (line {section.lineno}) has no data rows")
        env = _world(section, given, environment, path)
        environment = environment or env
        runs.append({"collective": section.collective, "algorithm": algorithm, "rows": section.rows,
                     "environment": env})
    return {
        "format": FORMAT,
        "source": {"tool": "nccl-tests", "version": version, "nccl": nccl, "files": [str(path)]},
        "environment": environment,
        "runs": runs,
    }


def _agreed(logged: str, given: str | None, path, lineno: int) -> str:
    if given is not None and given != logged:
        raise CostModelError(f"{path}:{lineno}: the log runs {logged}, but --op says {given}")
    return logged


def _world(section: "_Section", given: dict | None, previous: dict | None, path) -> dict:
    """A block's world: its rank lines, else --nodes/--gpus-per-node, else the block before's."""
    if section.ranks:
        listed = section.environment(path)
        if given and (given["nodes"], given["gpus_per_node"]) != (listed["nodes"], listed["gpus_per_node"]):
            raise CostModelError(f"{path}: the log lists {listed['nodes']} x {listed['gpus_per_node']} ranks, but "
                                 f"--nodes/--gpus-per-node say {given['nodes']} x {given['gpus_per_node']}")
        return listed
    if given or previous:
        world = given or previous
        _check_bus_factor(section, world, path)
        return world
    raise CostModelError(f"{path}: no '#  Rank' lines in the {section.collective} test (line {section.lineno}) "
                         "to tell the world size: give --nodes and --gpus-per-node")


def _check_bus_factor(section: "_Section", world: dict, path) -> None:
    """A world size given for a log without rank lines must match what its busbw / algbw says: nccl-tests
    prints busbw = algbw x passes (n - 1)/n (formulas.comms.bus_factor), so the ratio names n. Rows under
    1 GB/s are left out (two printed decimals make their ratio coarse)."""
    from costmodel.formulas.comms import PASSES, bus_factor

    ratios = sorted(r["busbw_bytes_per_s"] / r["algbw_bytes_per_s"] for r in section.rows
                    if r.get("algbw_bytes_per_s", 0) >= 1e9 and r.get("busbw_bytes_per_s"))
    if section.collective not in PASSES or not ratios:
        return
    ratio, n = ratios[len(ratios) // 2], world["world_size"]
    expected = bus_factor(op=section.collective, group=n)
    if abs(ratio - expected) > 0.01 * expected:
        passes = PASSES[section.collective]
        implied = passes / (passes - ratio) if ratio < passes else math.inf
        raise CostModelError(f"{path}: the {section.collective} test (line {section.lineno}) has busbw / algbw = "
                             f"{ratio:.4g}, {passes} (n - 1)/n for n = {implied:.3g}, not for the {n} ranks of "
                             f"--nodes {world['nodes']} x --gpus-per-node {world['gpus_per_node']} ({expected:.4g})")


def _open(sections: list[_Section], path, lineno: int, op: str | None, threads: int | None) -> _Section:
    """The block a rank line or data row belongs to; before any 'Collective test starting' line, a
    block of its own whose op is --op or the file name's."""
    if not sections:
        op = op or infer_op(Path(path))
        if op is None:
            raise CostModelError(f"{path}:{lineno}: no 'Collective test starting' line before the data, and the "
                                 "file name names no collective: give --op (e.g. --op all-reduce)")
        sections.append(_Section(op, lineno, threads))
    return sections[-1]


def _data_row(line: str, path: Path, lineno: int) -> list[dict]:
    """size count type redop root | time algbw busbw #wrong (out-of-place) | the same in-place."""
    tokens = line.split()
    if len(tokens) < 9:
        raise CostModelError(f"{path}:{lineno}: a data row needs at least 9 columns, found {len(tokens)}: "
                             f"{shown(line.strip())}")
    if not tokens[0].isascii() or not tokens[0].isdigit() or int(tokens[0]) > _MAX_BYTES:
        raise CostModelError(f"{path}:{lineno}: size {shown(tokens[0], 20)}: expected a whole number of bytes "
                             f"up to {_MAX_BYTES:,}")
    size = int(tokens[0])
    out = []
    fields = tokens[5:]
    width = 4 if len(fields) >= 8 else 3  # '#wrong' is absent in some versions
    for placement, start in (("out-of-place", 0), ("in-place", width)):
        chunk = fields[start:start + width]
        if len(chunk) < 3 or size == 0:
            continue
        if width == 4 and chunk[3] not in ("0", "N/A"):
            raise CostModelError(f"{path}:{lineno}: #wrong = {shown(chunk[3], 20)} ({placement}): nccl-tests "
                                 "found wrong results in this row; rerun before timing it")
        time_us = _number(chunk[0], path, lineno, f"{placement} time")
        lo, hi = (1e6 * t for t in MEASURED)
        if not lo <= time_us <= hi:
            raise CostModelError(f"{path}:{lineno}: {placement} time {shown(chunk[0], 20)} us: a measured time is "
                                 f"positive, from {lo:g} to {hi:g} us")
        algbw, busbw = (_number(t, path, lineno, f"{placement} bandwidth") for t in chunk[1:3])
        out.append({"bytes": size, "count": int(_number(tokens[1], path, lineno, "count")), "dtype": tokens[2],
                    "placement": placement, "time_s": time_us * 1e-6, "algbw_bytes_per_s": algbw * 1e9,
                    "busbw_bytes_per_s": busbw * 1e9})
    return out


def merge(documents: list[dict]) -> dict:
    """Several logs of one system as one document (runs appended, files listed)."""
    first = documents[0]
    merged = {**first, "source": {**first["source"], "files": []}, "runs": []}
    for doc in documents:
        files = doc["source"].get("files")
        merged["source"]["files"] += [str(f) for f in files] if isinstance(files, list) else []
        merged["runs"] += [dict(run, environment=run.get("environment") or doc["environment"]) for run in doc["runs"]]
    return merged
