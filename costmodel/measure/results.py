"""The results format shared by `cost4d bench collectives` and `cost4d import nccl-tests`.

One JSON document: ``format``, ``source`` (tool, versions, files), ``environment`` (world size, nodes,
GPUs per node, devices, backend, library versions) and ``runs``: one per (collective, algorithm),
each with rows of (bytes, placement, time_s, algbw, busbw) in nccl-tests' conventions:
algbw = S / t, busbw = algbw x (2(n-1)/n all-reduce; (n-1)/n all-gather, reduce-scatter, all-to-all;
1 otherwise), S the full buffer (nccl-tests doc/PERFORMANCE.md).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from costmodel.errors import CostModelError

FORMAT = "cost4d-collectives/1"

#: canonical collective names, and the names nccl-tests and torch use for them
COLLECTIVES = {
    "all-reduce": ("all_reduce", "allreduce"),
    "all-gather": ("all_gather", "allgather"),
    "reduce-scatter": ("reduce_scatter", "reducescatter"),
    "all-to-all": ("alltoall", "all_to_all"),
    "broadcast": ("broadcast",),
    "reduce": ("reduce",),
    "send/recv": ("sendrecv", "send_recv", "hypercube"),
}


def canonical_collective(name: str) -> str:
    """'all_reduce_perf' / 'allreduce' / 'all-reduce' -> 'all-reduce'."""
    key = name.lower().removesuffix("_perf").replace("-", "_")
    for canonical, aliases in COLLECTIVES.items():
        if key == canonical.replace("-", "_").replace("/", "_") or key in aliases:
            return canonical
    raise CostModelError(f"unknown collective {name!r}; known: {', '.join(COLLECTIVES)}")


def bus_factor(collective: str, ranks: int) -> float:
    """nccl-tests' busbw / algbw factor: passes x (n - 1)/n (1 for send/recv)."""
    from costmodel.formulas.comms import PASSES, ring_factor

    if collective in PASSES:
        return PASSES[collective] * ring_factor(group=ranks)
    return 1.0


def write_atomically(path: Path, document: dict) -> None:
    """Write JSON to a temporary file in the same folder, then rename: readers never see half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as handle:
            json.dump(document, handle, indent=1)
            handle.write("\n")
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def read_results(path: Path) -> dict:
    """A results document, or one line saying why it is not one."""
    try:
        document = json.loads(Path(path).read_text())
    except OSError as err:
        raise CostModelError(f"cannot read {path}: {err.strerror}") from None
    except json.JSONDecodeError as err:
        raise CostModelError(f"{path}: not JSON (line {err.lineno}: {err.msg})") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise CostModelError(f"{path}: not a cost4d results file (expected \"format\": \"{FORMAT}\"; "
                             "nccl-tests logs can be passed directly)")
    for i, run in enumerate(document.get("runs", [])):
        if not run.get("rows"):
            raise CostModelError(f"{path}: run {i} ({run.get('collective')}) has no rows")
    return document
