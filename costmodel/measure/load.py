"""Measurement files read together: cost4d results JSON, nccl-tests logs and nccl-tests' own JSON (-J), each as a
results document, with --nodes/--gpus-per-node judged over them all (nccl_world.check_told)."""

from __future__ import annotations

import re
from pathlib import Path

#: what only nccl-tests' text output prints (its parameter line, a test's start, the table's header)
_NCCL_TESTS = re.compile(r"^.*(?:#\s*nThread\s+\d+|Collective test starting:|#\s+size\s+count\b)", re.MULTILINE)


def read_measurements(paths: list[Path], hints=None) -> list[dict]:
    """Each file as a results document (told apart by their first character and nccl-tests' table); ``hints``
    (nccl_tests.Hints) fill in what logs leave out. Flags that describe none of the files are refused; what a file
    left out or assumed is in its document's source (skipped, notes)."""
    from costmodel.inputs.files import LOG_LIMIT, parse_document, read_text
    from costmodel.measure.nccl_json import is_nccl_tests_json, read_json
    from costmodel.measure.nccl_tests import Hints, read_log
    from costmodel.measure.nccl_world import WorldFlags, check_told
    from costmodel.measure.results import read_results

    docs, flags = [], []
    for path in paths:
        text = read_text(path, "measurement file", LOG_LIMIT)
        # a log may open with '[' or '{' too (Open MPI's '[1,0]<stdout>:', MPICH's '[0] ', a launcher's own line):
        # a file with nccl-tests' table is a log
        is_json = text.lstrip()[:1] in ("{", "[") and not _NCCL_TESTS.search(text)
        if not is_json:
            doc, told = read_log(path, hints or Hints(), text)
        else:
            data = parse_document(text, str(path), "json")
            doc, told = (read_json(path, data, hints or Hints()) if is_nccl_tests_json(data)
                         else (read_results(path, text), WorldFlags()))
        docs.append(doc)
        flags.append(told)
    check_told(flags)
    return docs
