"""The results format shared by `cost4d bench collectives` and `cost4d import nccl-tests`.

One JSON document: ``format``, ``source`` (tool, versions, files), ``environment`` (world size, nodes,
GPUs per node, devices, backend, library versions) and ``runs``: one per (collective, algorithm),
each with rows of (bytes, placement, time_s, algbw, busbw) in nccl-tests' conventions:
algbw = S / t, busbw = algbw x (2(n-1)/n all-reduce; (n-1)/n all-gather, reduce-scatter, all-to-all;
1 otherwise), S the full buffer (nccl-tests doc/PERFORMANCE.md).
"""

from __future__ import annotations

from pathlib import Path

from costmodel.errors import CostModelError
from costmodel.inputs.files import shown

FORMAT = "cost4d-collectives/1"

#: canonical collective names, and the names nccl-tests and torch use for them
COLLECTIVES = {
    "all-reduce": ("all_reduce", "allreduce"),
    "all-gather": ("all_gather", "allgather"),
    "reduce-scatter": ("reduce_scatter", "reducescatter"),
    "all-to-all": ("alltoall", "all_to_all", "alltoallv"),
    "broadcast": ("broadcast",),
    "reduce": ("reduce",),
    "gather": ("gather",),
    "scatter": ("scatter",),
    "send/recv": ("sendrecv", "send_recv"),
}


def canonical_collective(name: str) -> str:
    """'all_reduce_perf' / 'allreduce' / 'all-reduce' -> 'all-reduce'."""
    key = name.lower().removesuffix("_perf").replace("-", "_").replace("/", "_")
    for canonical, aliases in COLLECTIVES.items():
        if key == canonical.replace("-", "_").replace("/", "_") or key in aliases:
            return canonical
    raise CostModelError(f"unknown collective {shown(name)}; known: {', '.join(COLLECTIVES)}")


#: NCCL algorithm names (NCCL_ALGO), and 'auto' for NCCL's own choice
ALGORITHMS = ("auto", "ring", "tree", "nvls", "nvlstree", "collnet", "collnetdirect", "collnetchain", "pat")


def algorithm_set_by(value: str, where: str) -> str | None:
    """The algorithm an NCCL_ALGO value fixes (``where`` names it for the error), or None where it leaves NCCL a choice
    (a list, an exclusion '^...', per-collective 'op:algo' lists): NCCL picks among them as it would among all."""
    value = value.strip()
    if not value or any(c in value for c in ",^;:"):
        return None
    try:
        return canonical_algorithm(value)
    except CostModelError as err:
        raise CostModelError(f"{where}: NCCL_ALGO: {err}") from None


def canonical_algorithm(name: str) -> str:
    """'Ring' -> 'ring'; anything NCCL does not call an algorithm is refused."""
    key = str(name).strip().lower()
    if key not in ALGORITHMS:
        raise CostModelError(f"unknown algorithm {shown(name)}; known: {', '.join(ALGORITHMS)}")
    return key


def read_results(path: Path, text: str | None = None) -> dict:
    """A results document (``text`` if already read), validated field by field (see
    ``measure/document.py``), as plain dicts."""
    from costmodel.inputs.files import parse_document, read_text
    from costmodel.measure.document import Results
    from costmodel.specs.load import validate

    text = read_text(path, "results file") if text is None else text
    document = parse_document(text, str(path), "json")
    if document.get("format") != FORMAT:
        raise CostModelError(f"{path}: not a cost4d results file (expected \"format\": \"{FORMAT}\"; "
                             "nccl-tests logs can be passed directly)")
    return validate(Results, document, str(path)).model_dump()
