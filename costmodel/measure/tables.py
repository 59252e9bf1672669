"""Measured tables shipped as CSV (GEMM and attention throughput): rows by column name, each with its line."""

from __future__ import annotations

import csv
import io

from costmodel.errors import CostModelError


def csv_rows(path: str, kind: str, columns: tuple, where: dict | None = None):
    """(line, {column: text}) for each row of the CSV at ``path`` (a ``kind``, named in errors) with the
    ``columns`` it needs, blank lines skipped, and only the rows whose cells equal ``where``'s texts (those
    columns must be among ``columns``); a missing column or a short row is one clear error. csv.reader, not
    DictReader, rows filtered before they become tables: `step` reads these at start-up."""
    from costmodel.inputs.files import LOG_LIMIT, read_text

    reader = csv.reader(io.StringIO(read_text(path, kind, LOG_LIMIT)))
    header = next(reader, [])
    missing = [c for c in columns if c not in header]
    if missing:
        raise CostModelError(f"{path}: the {kind} has no column {missing[0]!r} (needs {', '.join(columns)})")
    at = {c: header.index(c) for c in columns}
    wanted = [(at[c], text) for c, text in (where or {}).items()]
    for line, cells in enumerate(reader, 2):
        if not cells:
            continue
        if len(cells) != len(header):
            raise CostModelError(f"{path}:{line}: expected {len(header)} columns as in the header")
        if any(cells[i] != text for i, text in wanted):
            continue
        yield line, {c: cells[i] for c, i in at.items()}
