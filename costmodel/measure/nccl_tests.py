"""Parse nccl-tests output (all_reduce_perf, all_gather_perf, ...) into cost4d results.

Handles single- and multi-node logs (ranks, hosts and GPUs per node from the '#  Rank' lines),
in-place and out-of-place columns, and any collective. Malformed logs get an error naming the line.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from costmodel.errors import CostModelError
from costmodel.inputs.bounds import MEASURED
from costmodel.inputs.files import shown
from costmodel.measure.results import FORMAT, canonical_algorithm, canonical_collective

_VERSION = re.compile(r"nccl-tests version (\S+) nccl-headers=(\d+) nccl-library=(\d+)")
_TEST = re.compile(r"Collective test starting: (\w+)")
_RANK = re.compile(r"#\s+Rank\s+(\d+)\s+Group\s+\d+\s+Pid\s+\d+\s+on\s+(\S+)\s+device\s+(\d+)\s+\[[^\]]*\]\s+(.*)$")
_ALGORITHMS = ("nvlstree", "nvls", "collnet", "tree", "ring", "pat")


def _nccl_version(code: str) -> str:
    """22602 -> '2.26.2'."""
    value = int(code)
    return f"{value // 10000}.{value // 100 % 100}.{value % 100}"


_SRUN = re.compile(r"^\s*\d+:\s")  # srun --label's task prefix, '0: '
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


def infer_algorithm(path: Path) -> str:
    """The algorithm named in the file name (…_ring.out, …_nvls.out), else 'auto'."""
    stem = path.stem.lower()
    for name in _ALGORITHMS:
        if re.search(rf"(^|[_\-.]){name}($|[_\-.])", stem):
            return name
    return "auto"


class _Section:
    """One 'Collective test starting' block: its collective, rank lines and data rows."""

    def __init__(self, collective: str, lineno: int):
        self.collective, self.lineno = collective, lineno
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
                "backend": "nccl"}


def _spans(ranks: list[int]) -> str:
    return ", ".join(map(str, ranks[:8])) + (", ..." if len(ranks) > 8 else "")


def parse_log(path: Path, algorithm: str | None = None, text: str | None = None) -> dict:
    """One nccl-tests log (``text`` if already read) as a cost4d results document: one run per
    'Collective test starting' block."""
    from costmodel.inputs.files import LOG_LIMIT, read_text

    text = read_text(path, "nccl-tests log", LOG_LIMIT) if text is None else text
    algorithm = canonical_algorithm(algorithm) if algorithm is not None else infer_algorithm(Path(path))
    version = nccl = None
    sections: list[_Section] = []
    for lineno, line in enumerate(text.splitlines(), 1):
        line = _SRUN.sub("", line, count=1)
        if (m := _VERSION.search(line)):
            version, nccl = m.group(1), _nccl_version(m.group(3))
        elif (m := _TEST.search(line)):
            sections.append(_Section(canonical_collective(m.group(1)), lineno))
        elif (m := _RANK.search(line)):
            _open(sections, path, lineno, "a '#  Rank' line").add_rank(
                int(m.group(1)), m.group(2), m.group(4).strip(), path, lineno)
        elif line.strip() and not line.lstrip().startswith("#"):
            _open(sections, path, lineno, "a data row").rows += _data_row(line, path, lineno)
    if not sections:
        raise CostModelError(f"{path}: no 'Collective test starting' line: is this nccl-tests output?")
    runs, environment = [], None
    for section in sections:
        if not section.ranks and environment is None:
            raise CostModelError(f"{path}: no '#  Rank' lines in the {section.collective} test (line "
                                 f"{section.lineno}) to tell the world size")
        if not section.rows:
            raise CostModelError(f"{path}: the {section.collective} test (line {section.lineno}) has no data rows")
        env = section.environment(path) if section.ranks else environment
        environment = environment or env
        runs.append({"collective": section.collective, "algorithm": algorithm, "rows": section.rows,
                     "environment": env})
    return {
        "format": FORMAT,
        "source": {"tool": "nccl-tests", "version": version, "nccl": nccl, "files": [str(path)]},
        "environment": environment,
        "runs": runs,
    }


def _open(sections: list[_Section], path, lineno: int, what: str) -> _Section:
    if not sections:
        raise CostModelError(f"{path}:{lineno}: {what} before any 'Collective test starting' line: "
                             "is this nccl-tests output?")
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
