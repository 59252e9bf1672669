"""Tables and prose that fit the width: rich on a terminal, plain text (no box drawing, no colour) elsewhere.

A table is data (a title, columns, rows); the console it is printed on lays it out, with widths computed
here once for both: names and numbers are never broken or cut, prose wraps at spaces and after hyphens.
A table whose columns cannot fit without folding a word is shown as one block per row instead (its first
cell, then each other cell under its header), so nothing is cut at any width a word fits in.
"""

from __future__ import annotations

import re
import sys

#: rich's markup tags (rich.markup.RE_TAGS), so plain output needs no rich
_TAG = re.compile(r"(\\*)\[([a-z#/@][^[]*?)]")
_WORD = re.compile(r"\S+")
#: a list item's marker at the start of a line ('3. ', '- ', '-> ')
_ITEM = re.compile(r"(\d+\.|-|->)\s+")
#: where a word may break: after a hyphen or plus between a letter or digit and a letter ('reduce-|scatter',
#: 'nvlink+|infiniband'); not '--|tp', 'ZeRO-|3', 'llama3-|70b' or 'GB/|s'
_BREAK = re.compile(r"(?<=[^\W_][-+])(?=[^\W\d_])")
#: where a piece too long for its line folds, if it can (after one of these), rather than at the width
_FOLDS = frozenset("/@._:")
#: columns between cells in plain tables
GAP = 2


def literal(text) -> str:
    """``text`` from a spec or a user, escaped so that rich (and :func:`strip_markup`) print it as written:
    a model named '[red]' or a source citing '[nccl]' is not a style (rich.markup.escape's rule)."""
    return _TAG.sub(lambda tag: f"{tag.group(1)}{tag.group(1)}\\[{tag.group(2)}]", str(text))


def strip_markup(text: str) -> str:
    """``text`` as rich would show it, without its styles ('[bold]x[/]' -> 'x'; '\\[x]' -> '[x]')."""
    def plain(tag: re.Match) -> str:
        slashes, escaped = divmod(len(tag.group(1)), 2)
        return "\\" * slashes + (f"[{tag.group(2)}]" if escaped else "")

    return _TAG.sub(plain, text)


def _pieces(text: str):
    """(start, end) of each unbreakable piece: a word, or its parts after a hyphen or plus (_BREAK)."""
    for word in _WORD.finditer(text):
        cuts = [word.start() + m.start() for m in _BREAK.finditer(word.group())]
        edges = [word.start(), *cuts, word.end()]
        yield from zip(edges, edges[1:])


def line_starts(text: str, width: int) -> list[int]:
    """Where each line of ``text`` wrapped to ``width`` starts: after newlines, at spaces (which the line
    before drops) and after hyphens and pluses inside words (_BREAK); a piece longer than the width folds."""
    starts, offset, width = [0], 0, max(width, 1)
    for k, paragraph in enumerate(text.split("\n")):
        if k:
            starts.append(offset)
        start = end = offset
        for s, e in _pieces(paragraph):
            s, e = s + offset, e + offset
            if e - start > width and end > start:
                start = s
                starts.append(s)
            while e - start > width:  # a piece wider than the line folds, after a '/', '@', '.', '_' or ':' where
                cut = max((i + 1 for i in range(start + 1, start + width) if paragraph[i - offset] in _FOLDS), default=0)
                start = cut if cut > start else start + width  # one falls in the line, else at the width
                starts.append(start)
            end = e
        offset += len(paragraph) + 1
    return starts


def wrap(text: str, width: int) -> list[str]:
    """``text`` (no markup) as lines of at most ``width`` characters, by :func:`line_starts`."""
    starts = line_starts(text, width)
    return [text[a:b].rstrip() for a, b in zip(starts, [*starts[1:], len(text)])] or [""]


def command_lines(command: str, width: int, indent: str = "    ") -> list[str]:
    """A shell command wrapped between its words to ``width``, each line but the last ending in ' \\' and the rest
    indented: still one command when pasted into a shell (wrapping it as prose would cut it in two)."""
    import shlex

    # whole words only: never inside an option (--grad-accum) or a quoted path ('my models/x.json')
    lines: list[str] = []
    for word in map(shlex.quote, shlex.split(command)):
        room = max(width - 2 - (len(indent) if len(lines) > 1 else 0), 20)
        if lines and len(lines[-1]) + 1 + len(word) <= room:
            lines[-1] += " " + word
        else:
            lines.append(word)
    lines = lines[:1] + [indent + line for line in lines[1:]]
    return [line + " \\" for line in lines[:-1]] + lines[-1:]


def hanging(paragraph: str, width: int) -> list[str]:
    """One line of prose wrapped to ``width``: continuation lines keep its indent, and under a list item
    ('3. ', '- ') start below the item's text."""
    if not paragraph.strip():
        return [""]
    indent = paragraph[:len(paragraph) - len(paragraph.lstrip())]
    marker = _ITEM.match(paragraph.lstrip())
    under = indent + " " * (len(marker.group()) if marker else 0)
    first, *rest = wrap(paragraph.lstrip(), width - len(indent)) or [""]
    return [indent + first] + ([under + line for line in wrap(" ".join(rest), width - len(under))] if rest else [])


def longest_piece(text: str) -> int:
    """The narrowest ``text`` wraps to without folding a word."""
    return max((e - s for s, e in _pieces(text)), default=0)


class Table:
    """Rows under a title; a column whose name starts with '>' holds numbers (right-aligned, never wrapped)."""

    def __init__(self, title: str, *columns: str):
        self.title = title
        self.headers = [c.lstrip(">") for c in columns]
        self.numeric = [c.startswith(">") for c in columns]
        self.rows: list[list[str]] = []

    def add_row(self, *cells) -> None:
        self.rows.append([str(c) for c in cells] + [""] * (len(self.headers) - len(cells)))

    def _limits(self) -> tuple[list[int], ...]:
        """Per column: its longest line; what it narrows to keeping names whole (prose at its longest word,
        names and numbers at their longest cell); with names wrapped after hyphens. No word folds: a table
        narrower than the last is shown as blocks (:meth:`stacks`)."""
        cells = [[line for row in self.rows for line in strip_markup(row[i]).split("\n")]
                 for i in range(len(self.headers))]
        head = [longest_piece(h) for h in self.headers]
        full = [max([len(h), *map(len, col)]) for h, col in zip(self.headers, cells)]
        whole = [self.numeric[i] or all(len(_WORD.findall(c)) <= 1 for c in col) for i, col in enumerate(cells)]
        piece = [max([head[i], *map(longest_piece, col)]) for i, col in enumerate(cells)]
        cell = [max([head[i], *map(len, col)]) for i, col in enumerate(cells)]
        n = range(len(full))
        keep = [cell[i] if whole[i] else piece[i] for i in n]
        names_wrap = [cell[i] if self.numeric[i] or i == 0 else piece[i] for i in n]
        return full, keep, names_wrap

    def widths(self, room: int) -> list[int]:
        """Cell widths summing to at most ``room`` where possible: every column at its longest line; else
        the widest narrowed first, prose down to its longest word and names and numbers to their longest
        cell (headers wrap); else names wrap after hyphens. Numbers and the first column (what a row is)
        never wrap and no word folds, so the widths can sum to more than ``room``: then :meth:`stacks`."""
        full, *limits = self._limits()
        widths, n = list(full), range(len(full))
        for limit in limits:
            while sum(widths) > room:
                narrower = [i for i in n if widths[i] > limit[i]]
                if not narrower:
                    break
                widths[max(narrower, key=lambda i: widths[i])] -= 1
        return widths

    def stacks(self, room: int) -> bool:
        """Whether the table is shown as one block per row (:meth:`stacked_lines`): its columns do not fit in
        ``room`` without folding a word."""
        return sum(self._limits()[2]) > room

    def stacked_lines(self, width: int) -> list[tuple[str, str]]:
        """The table as blocks, one per row: its first cell, then each other non-empty cell under its header,
        prose wrapped beside it. (line, style) pairs; style 'bold' for what a row is."""
        label = max(len(h) for h in self.headers[1:])
        room = max(width - 2 - label - GAP, 1)
        out = [(line, "bold") for line in wrap(strip_markup(self.title), width)] if self.title else []
        for k, row in enumerate(self.rows):
            if k or self.title:
                out.append(("", ""))
            out += [(line, "bold") for line in wrap(strip_markup(row[0]), width)]
            for header, cell in zip(self.headers[1:], row[1:]):
                text = strip_markup(cell)
                if not text.strip() or text.strip() == "-":
                    continue
                for j, line in enumerate(line for part in text.split("\n") for line in wrap(part, room)):
                    out.append(("  " + (header if j == 0 else "").ljust(label) + " " * GAP + line, ""))
        return out

    def plain_lines(self, width: int) -> list[str]:
        """The table as plain text: title, headers, a dashed rule, rows; columns GAP spaces apart (or as blocks,
        when the columns cannot fit without folding a word)."""
        if self.stacks(width - GAP * (len(self.headers) - 1)):
            return [line.rstrip() for line, _ in self.stacked_lines(width)]
        widths = self.widths(width - GAP * (len(self.headers) - 1))
        out = wrap(strip_markup(self.title), width) if self.title else []
        out += self._plain_row(self.headers, widths)
        out.append((" " * GAP).join("-" * w for w in widths))
        for row in self.rows:
            out += self._plain_row(row, widths)
        return out

    def _plain_row(self, row: list[str], widths: list[int]) -> list[str]:
        cells = [wrap(strip_markup(c), w) for c, w in zip(row, widths)]
        lines = []
        for k in range(max(len(c) for c in cells)):
            parts = [(c[k] if k < len(c) else "") for c in cells]
            lines.append((" " * GAP).join(part.rjust(w) if right else part.ljust(w)
                                          for part, w, right in zip(parts, widths, self.numeric)).rstrip())
        return lines

    def __rich_console__(self, console, options):
        """The table as rich draws it on a terminal: heavy box when it fits, else a lighter one."""
        from rich import box
        from rich.table import Table as RichTable
        from rich.text import Text

        n, width = len(self.headers), options.max_width
        boxed = 3 * n + 1  # '┃ ' + cell + ' ' per column, and the closing '┃'
        light = 2 * (n - 1)  # no edges, one space and one rule column between cells
        if self.stacks(width - light):
            yield Text("\n").join(Text(line.rstrip(), style=style) for line, style in self.stacked_lines(width))
            return
        widths = self.widths(width - boxed)
        heavy = sum(widths) + boxed <= width
        if not heavy:
            widths = self.widths(width - light)
        table = RichTable(title=self.title or None, title_justify="left", title_style="bold",
                          **({} if heavy else dict(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False,
                                                   collapse_padding=True)))
        for header, w, right in zip(self.headers, widths, self.numeric):
            table.add_column("\n".join(wrap(header, w)), justify="right" if right else "left", width=w,
                             overflow="fold")
        for row in self.rows:
            table.add_row(*(_wrapped(Text.from_markup(c), w) for c, w in zip(row, widths)))
        yield table


def _wrapped(text, width: int):
    """A rich Text broken into lines at :func:`line_starts`, its styles kept."""
    from rich.text import Text

    lines = text.divide(line_starts(text.plain, width)[1:])
    for line in lines:
        line.rstrip()
    return Text("\n").join(lines) if len(lines) > 1 else text


class PlainConsole:
    """What the printers call on a console (``print``), writing plain text of at most ``width`` columns."""

    def __init__(self, width: int):
        self.width = width

    def print(self, *objects, **_) -> None:
        lines = []
        for obj in objects:
            if isinstance(obj, Table):
                lines += obj.plain_lines(self.width)
                continue
            for paragraph in strip_markup(str(obj)).split("\n"):
                lines += hanging(paragraph, self.width)
        sys.stdout.write("\n".join(lines) + "\n")
