"""Measured tables shipped as CSV (GEMM and attention throughput): rows by column name, each with its line."""

from __future__ import annotations

import csv
import io

from costmodel.errors import CostModelError


def csv_rows(path: str, kind: str, columns: tuple, where: dict | None = None):
    """(line, {column: text}) for each row of the CSV at ``path`` (a ``kind``, named in errors) with the
    ``columns`` it needs, blank lines skipped, and only the rows whose cells equal ``where``'s texts (those
    columns must be among ``columns``); a missing column, a short row or unreadable CSV is one clear error.
    csv.reader, not DictReader, and rows filtered before they become tables: `step` reads these at start-up.
    In a file of plain lines (no quotes, no carriage return but before a newline), a line that lacks one of ``where``'s texts
    cannot have a cell equal to it, so it is skipped unparsed (the XLA matmul table: 1,875 rows, 375 kept; a
    row of the wrong width is kept, to be refused); any other file goes through the csv module whole."""
    from costmodel.inputs.files import LOG_LIMIT, read_text

    text = read_text(path, kind, LOG_LIMIT)
    plain = '"' not in text and text.count("\r") == text.count("\r\n")  # CRLF ends lines as LF does
    rows = _filtered(text.replace("\r\n", "\n"), (where or {}).values()) if plain else _parsed(text, path)
    header = next(rows, (1, []))[1]
    missing = [c for c in columns if c not in header]
    if missing:
        raise CostModelError(f"{path}: the {kind} has no column {missing[0]!r} (needs {', '.join(columns)})")
    at = {c: header.index(c) for c in columns}
    wanted = [(at[c], text) for c, text in (where or {}).items()]
    for line, cells in rows:
        if not cells:
            continue
        if len(cells) != len(header):
            raise CostModelError(f"{path}:{line}: expected {len(header)} columns as in the header")
        if any(cells[i] != text for i, text in wanted):
            continue
        yield line, {c: cells[i] for c, i in at.items()}


def _parsed(text: str, path: str):
    """(line, cells) of every record, each numbered by the line it ends on (\\r, \\n and \\r\\n all end a
    line); what the csv module cannot read (a cell over its field limit) is one line naming where."""
    reader = csv.reader(io.StringIO(text, newline=None))
    while True:
        try:
            cells = next(reader)
        except StopIteration:
            return
        except csv.Error as err:
            raise CostModelError(f"{path}:{reader.line_num}: not readable as CSV: {err}") from None
        yield reader.line_num, cells


def _filtered(text: str, texts):
    """(line, cells) of a CSV of plain lines: the header, then the lines (not blank) containing each of
    ``texts``, and those whose cells do not match the header's (to be refused). Lines end at \\n only, as
    the csv module ends them (not at the other separators str.splitlines knows)."""
    lines = text.split("\n")
    commas = lines[0].count(",")
    kept = [(line, row) for line, row in enumerate(lines[1:], 2) if row]
    for wanted in texts:  # one pass per text: `in` on each line, no generator per line
        kept = [(line, row) for line, row in kept if wanted in row or row.count(",") != commas]
    return iter([(1, lines[0].split(",") if lines[0] else [])] + [(line, row.split(",")) for line, row in kept])
