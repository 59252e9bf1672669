"""Parse nccl-tests output (all_reduce_perf, all_gather_perf, ...) into cost4d results.

Handles single- and multi-node logs (ranks, hosts and GPUs per node from the '#  Rank' lines),
in-place and out-of-place columns, and any collective. Malformed logs get an error naming the line.
"""

from __future__ import annotations

import re
from pathlib import Path

from costmodel.errors import CostModelError
from costmodel.measure.results import FORMAT, canonical_collective

_VERSION = re.compile(r"nccl-tests version (\S+) nccl-headers=(\d+) nccl-library=(\d+)")
_TEST = re.compile(r"Collective test starting: (\w+)")
_RANK = re.compile(r"#\s+Rank\s+(\d+)\s+Group\s+\d+\s+Pid\s+\d+\s+on\s+(\S+)\s+device\s+(\d+)\s+\[[^\]]*\]\s+(.*)$")
_ALGORITHMS = ("nvls", "nvlstree", "collnet", "tree", "ring", "pat")


def _nccl_version(code: str) -> str:
    """22602 -> '2.26.2'."""
    value = int(code)
    return f"{value // 10000}.{value // 100 % 100}.{value % 100}"


def _number(token: str, path: Path, lineno: int) -> float:
    try:
        return float(token)
    except ValueError:
        raise CostModelError(f"{path}:{lineno}: expected a number, found {token!r}") from None


def infer_algorithm(path: Path) -> str:
    """The algorithm named in the file name (…_ring.out, …_nvls.out), else 'auto'."""
    stem = path.stem.lower()
    for name in _ALGORITHMS:
        if re.search(rf"(^|[_\-.]){name}($|[_\-.])", stem):
            return name
    return "auto"


def parse_log(path: Path, algorithm: str | None = None) -> dict:
    """One nccl-tests log as a cost4d results document."""
    try:
        lines = Path(path).read_text().splitlines()
    except OSError as err:
        raise CostModelError(f"cannot read {path}: {err.strerror}") from None
    collective = version = nccl = None
    ranks: dict[int, tuple[str, str]] = {}
    rows = []
    for lineno, line in enumerate(lines, 1):
        if (m := _VERSION.search(line)):
            version, nccl = m.group(1), _nccl_version(m.group(3))
        elif (m := _TEST.search(line)):
            collective = canonical_collective(m.group(1))
        elif (m := _RANK.search(line)):
            ranks[int(m.group(1))] = (m.group(2), m.group(4).strip())
        elif line.strip() and not line.lstrip().startswith("#"):
            rows += _data_row(line, path, lineno)
    if collective is None:
        raise CostModelError(f"{path}: no 'Collective test starting' line: is this nccl-tests output?")
    if not ranks:
        raise CostModelError(f"{path}: no '#  Rank' lines to tell the world size")
    if not rows:
        raise CostModelError(f"{path}: no data rows")
    hosts = sorted({host for host, _ in ranks.values()})
    world = len(ranks)
    return {
        "format": FORMAT,
        "source": {"tool": "nccl-tests", "version": version, "nccl": nccl, "files": [str(path)]},
        "environment": {"world_size": world, "nodes": len(hosts), "gpus_per_node": world // len(hosts),
                        "hosts": hosts, "devices": sorted({name for _, name in ranks.values()}),
                        "backend": "nccl"},
        "runs": [{"collective": collective, "algorithm": algorithm or infer_algorithm(Path(path)),
                  "rows": rows}],
    }


def _data_row(line: str, path: Path, lineno: int) -> list[dict]:
    """size count type redop root | time algbw busbw #wrong (out-of-place) | the same in-place."""
    tokens = line.split()
    if len(tokens) < 9:
        raise CostModelError(f"{path}:{lineno}: a data row needs at least 9 columns, found {len(tokens)}: "
                             f"{line.strip()[:60]!r}")
    size = _number(tokens[0], path, lineno)
    out = []
    fields = tokens[5:]
    width = 4 if len(fields) >= 8 else 3  # '#wrong' is absent in some versions
    for placement, start in (("out-of-place", 0), ("in-place", width)):
        chunk = fields[start:start + 3]
        if len(chunk) < 3 or size == 0:
            continue
        time_us, algbw, busbw = (_number(t, path, lineno) for t in chunk)
        out.append({"bytes": int(size), "count": int(_number(tokens[1], path, lineno)), "dtype": tokens[2],
                    "placement": placement, "time_s": time_us * 1e-6, "algbw_bytes_per_s": algbw * 1e9,
                    "busbw_bytes_per_s": busbw * 1e9})
    return out


def merge(documents: list[dict]) -> dict:
    """Several logs of one system as one document (runs appended, files listed)."""
    first = documents[0]
    merged = {**first, "source": {**first["source"], "files": []}, "runs": []}
    for doc in documents:
        merged["source"]["files"] += doc["source"]["files"]
        merged["runs"] += [dict(run, environment=doc["environment"]) for run in doc["runs"]]
    return merged
