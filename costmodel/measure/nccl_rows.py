"""One row of nccl-tests' results table: where its measurements sit (from the column header), the labels and
timestamps launchers put before it, and which lines are rows at all.

The formats are nccl-tests' own (NVIDIA/nccl-tests src/util.cu writeResultHeader and writeBenchmarkLineBody;
src/common.cu@0f8c785a for versions before 2.11), and the launchers'.
"""

from __future__ import annotations

import math
import re
from dataclasses import replace
from pathlib import Path

from costmodel.errors import CostModelError
from costmodel.inputs.bounds import MEASURED, MESSAGE, RATE
from costmodel.inputs.files import shown
from costmodel.record import record

#: what launchers put before each line: srun --label ('0: '), Open MPI --tag-output ('[1,0]<stdout>:'), MPICH and
#: Intel MPI -prepend-rank ('[0] '), pdsh (DeepSpeed's launcher: 'node01: '), kubectl logs --timestamps (RFC
#: 3339), moreutils ts ('Mar 05 22:09:44 ')
_LABEL = re.compile(r"^\s*(?:\d+:\s|\[\d+,\d+\]<std(?:out|err)>:\s?|\[\d+\]\s|[A-Za-z][\w.-]*:\s"
                    r"|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)?\s"
                    r"|[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d\s)")
#: a data row's timestamp column (nccl-tests -S 1: TIME_STRING_FORMAT "%Y-%m-%d %H:%M:%S", src/util.cu)
_STAMP = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$")


def _number(token, path, lineno: int | None, what: str) -> float:
    """A finite, non-negative number from a log column (or a JSON value)."""
    try:
        value = float(token) if isinstance(token, (str, int, float)) and not isinstance(token, bool) else math.nan
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        where = path if lineno is None else f"{path}:{lineno}"
        raise CostModelError(f"{where}: {what}: expected a finite number >= 0, found {shown(token, 20)}")
    return value


def unlabelled(line: str) -> str:
    """The line without the labels and timestamps launchers put before it (a timestamp, then a rank label)."""
    for _ in range(3):
        stripped = _LABEL.sub("", line, count=1)
        if stripped == line:
            return line
        line = stripped
    return line


def is_row(tokens: list[str], layout) -> bool:
    """Whether a line is a row of the table: it starts with a size, or with a malformed one followed by as many
    numbers as its header's measurement columns. NCCL_DEBUG lines ('host:pid:tid [0] NCCL INFO Channel 00/24 :
    0 1 2 3 ...') and notices do neither."""
    if _STAMP.match(" ".join(tokens[-2:])):
        tokens = tokens[:-2]
    if not tokens:
        return False
    if tokens[0].isascii() and tokens[0].isdigit():
        return True
    width = (layout or _DEFAULT).width  # a malformed size ('nan', '-8', '1e3') before a row's measurements
    return (_is_number(tokens[0]) and len(tokens) >= 2 + width
            and all(t == "N/A" or _is_number(t) for t in tokens[-width:]))


def _is_number(token: str) -> bool:
    try:
        float(token)
    except ValueError:
        return False
    return True


@record
class _Layout:
    """Where a data row's measurements sit, read from its column header: each placement's (out-of-place,
    in-place) columns, time first, from the end of the row (older nccl-tests print fewer leading columns:
    no root, no redop, or a blank redop for all-to-all); a row's -S timestamp is taken off before."""

    widths: tuple  # columns per placement: time algbw busbw [#wrong | error] [i_min i_max i_p99 i_cv%]
    wrong: tuple  # the #wrong / error column's offset in each, or None
    lead: int | None = None  # the header's columns before the first time (size count type redop root: 5)
    delta: bool = False  # the column is 'error' (before 2.13): the largest deviation from the expected result
    placements: tuple = ("out-of-place", "in-place")  # what each group times, as the banner above the header says

    @property
    def width(self) -> int:
        return sum(self.widths)


def layout_of(columns: list[str], path, lineno: int, banner: str | None = None) -> _Layout:
    """A column header ('size count type redop root time algbw busbw #wrong time ...') as a :class:`_Layout`; the
    line above it (``banner``: '#   out-of-place   in-place') names what each group of columns times, in order
    (nccl-tests' trace replay prints the in-place group alone); without one, out-of-place comes first."""
    if "cputime" in columns:
        raise CostModelError(f"{path}:{lineno}: the log reports 'cputime' (nccl-tests -C 1): the host's time to "
                             "launch each operation, not the collective's; rerun without -C")
    end = len(columns) - (columns[-1] == "timestamp")
    starts = [i for i, name in enumerate(columns) if name == "time"]
    groups = [columns[s:e] for s, e in zip(starts, starts[1:] + [end])]
    if not groups or any(g[:3] != ["time", "algbw", "busbw"] for g in groups):
        raise CostModelError(f"{path}:{lineno}: a column header without 'time algbw busbw' after each placement: "
                             f"{shown(' '.join(columns))}")
    unknown = [name for g in groups for name in g if name not in _MEASURED_COLUMNS]
    if unknown:
        raise CostModelError(f"{path}:{lineno}: the column header names {shown(unknown[0], 20)}, which no nccl-tests "
                             f"version prints after 'time': {shown(' '.join(columns))}")
    wrong = tuple(next((j for j, name in enumerate(g) if name in ("#wrong", "error")), None) for g in groups)
    named = tuple(re.findall(r"(?<![\w-])(out-of-place|in-place)\b", banner or ""))
    placements = named if len(named) == len(groups) else ("out-of-place", "in-place")[:len(groups)]
    return _Layout(tuple(len(g) for g in groups), wrong, starts[0], delta="error" in groups[0], placements=placements)


#: what nccl-tests prints after each placement's time (util.cu writeResultHeader; 'error' before 2.13)
_MEASURED_COLUMNS = frozenset({"time", "algbw", "busbw", "#wrong", "error", "i_min", "i_max", "i_p99", "i_cv%"})
#: the columns of a row under no header: size count type redop root | time algbw busbw #wrong (x 2)
_DEFAULT = _Layout((4, 4), (3, 3))


def data_row(line: str, path: Path, lineno: int, layout: _Layout | None = None) -> list[dict]:
    """One row of the table, read by its header's layout (today's columns when the log has none)."""
    tokens = line.split()
    if _STAMP.match(" ".join(tokens[-2:])):  # -S 1 (its header says 'timestamp' at the end)
        tokens = tokens[:-2]
    if layout is None:
        fields = tokens[5:]  # no header: today's five leading columns; '#wrong' is absent in some versions
        layout = _DEFAULT if len(fields) >= 8 else _Layout((3, 3), (None, None))
        tokens = tokens[:5 + layout.width]
    if layout.lead is not None and len(layout.widths) == 2 and len(tokens) == layout.lead + layout.widths[1]:
        layout = replace(layout, widths=layout.widths[1:], wrong=layout.wrong[1:], placements=layout.placements[1:])
        # nccl-tests' blank out-of-place columns (util.cu writeBenchMarkLineNullBody: trace replay runs in-place only)
    if len(tokens) < 2 + layout.width:
        raise CostModelError(f"{path}:{lineno}: a data row needs at least {2 + layout.width} columns, found "
                             f"{len(tokens)}: {shown(line.strip())}")
    if not tokens[0].isascii() or not tokens[0].isdigit() or int(tokens[0]) > MESSAGE:
        raise CostModelError(f"{path}:{lineno}: size {shown(tokens[0], 20)}: expected a whole number of bytes "
                             f"up to {MESSAGE:,}")
    if layout.lead is not None and not layout.lead - 1 <= len(tokens) - layout.width <= layout.lead:
        raise CostModelError(f"{path}:{lineno}: the row has {len(tokens)} columns where its header has "
                             f"{layout.lead + layout.width} (one fewer where a field is blank): "
                             f"{shown(line.strip())}")
    size, lead, fields = int(tokens[0]), tokens[:-layout.width], tokens[-layout.width:]
    count, dtype = _number(lead[1], path, lineno, "count"), lead[2] if len(lead) > 2 else ""
    if dtype and dtype not in TYPES:
        raise CostModelError(f"{path}:{lineno}: type {shown(dtype, 20)}: not one nccl-tests prints "
                             f"({', '.join(TYPES)})")
    if count != int(count) or count > MESSAGE:
        raise CostModelError(f"{path}:{lineno}: count {shown(lead[1], 20)}: expected a whole number of elements "
                             f"up to {MESSAGE:,}")
    count = int(count)
    out, start = [], 0
    for placement, width, wrong in zip(layout.placements, layout.widths, layout.wrong):
        chunk, start = fields[start:start + width], start + width
        if size:
            where = f"{path}:{lineno}"
            if layout.delta and wrong is not None and chunk[wrong] != "N/A":  # a deviation: judged by delta_checked
                row = measurement(size, count, dtype, placement, chunk[:3], None, where)
                out.append({**row, DELTA: (_number(chunk[wrong], where, None, "error"), where)})
            else:
                out.append(measurement(size, count, dtype, placement, chunk[:3],
                                       None if wrong is None else chunk[wrong], where))
    return out


#: a row's key for its 'error' column (before nccl-tests 2.13) and line, until :func:`delta_checked` takes it
DELTA = "_max_delta"
#: the largest deviation per rank nccl-tests before 2.13 accepts for each type (src/common.cu DeltaMaxValue, at
#: NVIDIA/nccl-tests@51af557^ L110-126; integers: 1e-200, i.e. none); its check: delta > this x (n - 1), L464
#: the element types nccl-tests names in its rows (src/common.cu test_typenames: NCCL 2 and, last two, NCCL 1's)
TYPES = ("int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float", "double", "bfloat16", "f8e4m3",
         "f8e5m2", "char", "int")
DELTA_MAX = {"half": 1e-2, "bfloat16": 1e-2, "float": 1e-5, "double": 1e-12}


def delta_checked(rows: list[dict], ranks: int) -> list[dict]:
    """The rows without their 'error' deviations, each refused where nccl-tests itself counted it wrong: above its
    type's tolerance times n - 1 (n: the ranks)."""
    out = []
    for row in rows:
        if DELTA in row:
            delta, where = row[DELTA]
            if delta > DELTA_MAX.get(row["dtype"], 1e-200) * (ranks - 1):
                raise CostModelError(f"{where}: error = {delta:g} ({row['placement']}): above nccl-tests' own "
                                     f"tolerance for {row['dtype'] or 'its type'} on {ranks} ranks, so it counted "
                                     "wrong results in this row; rerun before timing it")
            row = {k: v for k, v in row.items() if k != DELTA}
        out.append(row)
    return out


def measurement(size: int, count: int, dtype: str, placement: str, values, wrong, where: str) -> dict:
    """One placement's row from its (time us, algbw GB/s, busbw GB/s) and #wrong (None or 'N/A': not
    checked), each as the log printed it; ``where`` names the line for the errors."""
    if wrong not in (None, "N/A") and _number(wrong, where, None, "#wrong") != 0:
        raise CostModelError(f"{where}: #wrong = {shown(wrong, 20)} ({placement}): nccl-tests found wrong results "
                             "in this row; rerun before timing it")
    time_us = _number(values[0], where, None, f"{placement} time")
    lo, hi = (1e6 * t for t in MEASURED)
    if not lo <= time_us <= hi:
        raise CostModelError(f"{where}: {placement} time {shown(values[0], 20)} us: a measured time is positive, "
                             f"from {lo:g} to {hi:g} us")
    algbw, busbw = (_number(v, where, None, f"{placement} bandwidth") for v in values[1:3])
    if max(algbw, busbw) * 1e9 > RATE:  # what a results file may hold (measure/document.py)
        raise CostModelError(f"{where}: {placement} bandwidth {max(algbw, busbw):g} GB/s: more than {RATE / 1e9:g} "
                             "GB/s is no measurement")
    return {"bytes": size, "count": count, "dtype": dtype, "placement": placement, "time_s": time_us * 1e-6,
            "algbw_bytes_per_s": algbw * 1e9, "busbw_bytes_per_s": busbw * 1e9}
