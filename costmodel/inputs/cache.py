"""Shipped data files kept parsed between runs, as Python keeps a module's bytecode (issue 14: start-up).

Parsing `hardware/h100-sxm.toml` costs `cost4d step` about 3.5 ms (2.4 of them importing the TOML parser) and
the measured matmul table another 3.7 ms, on every run. A shipped file's parsed form is written, with
``marshal``, to ``$COST4D_CACHE_DIR`` (default ``$XDG_CACHE_HOME/cost4d`` or ``~/.cache/cost4d``), in a
folder for this Python (marshal's format is Python's own), and read back while the file's path, size and
modification time (in nanoseconds) are those recorded: the rule Python's default ``.pyc`` check uses.
Anything else (no entry, a stale, unreadable or foreign one, a value marshal cannot store) parses the file
as if there were no cache; a cache that cannot be written is skipped without a word. ``COST4D_CACHE_DIR=off``
turns it off. Only files under the shipped hardware folder are kept: a user's own files are parsed each
time, so that what they edit is what they get.
"""

from __future__ import annotations

import marshal
import os
import sys
from pathlib import Path
from typing import Callable, TypeVar

T = TypeVar("T")

#: the environment variable naming the cache folder ("off" or "" turns the cache off)
ENV = "COST4D_CACHE_DIR"
#: what a kept entry is about; a change to what the parsers return must change this
FORMAT = 1


def folder() -> Path | None:
    """This Python's cache folder, or None when the cache is off."""
    chosen = os.environ.get(ENV)
    if chosen is not None and chosen.strip().lower() in ("", "off"):
        return None
    if chosen:
        base = Path(chosen)
    else:
        try:
            base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "cost4d"
        except (RuntimeError, KeyError, OSError):  # no home directory to be found: no cache
            return None
    return base / (sys.implementation.cache_tag or "python")


def parsed(path: Path, kind: str, parse: Callable[[], T], shipped: Path) -> T:
    """``parse()``, or what it returned for this same file on an earlier run when ``path`` lies under
    ``shipped`` (the hardware folder) and the cache has an entry for it; ``kind`` tells apart two parses of
    one file (a table read for bf16 and for fp8)."""
    where = folder()
    try:
        resolved = path.resolve()
        relative = resolved.relative_to(shipped.resolve())
        stat = resolved.stat()
    except (OSError, ValueError):  # not a shipped file (or gone): parse, and let parse() say what is wrong
        return parse()
    if where is None:
        return parse()
    key = (FORMAT, kind, str(resolved), stat.st_size, stat.st_mtime_ns)
    entry = where / "".join(c if c.isalnum() or c in "-_." else "~" for c in f"{'~'.join(relative.parts)}.{kind}.marshal")
    try:
        stored_key, value = marshal.loads(entry.read_bytes())
        if stored_key == key:
            return value
    except (OSError, EOFError, ValueError, TypeError):
        pass
    value = parse()
    _write(entry, key, value)
    return value


def _write(entry: Path, key: tuple, value) -> None:
    """Keep ``value`` for ``key``; atomically (a concurrent reader sees the old entry or the new one), or
    not at all."""
    try:
        data = marshal.dumps((key, value))
        entry.parent.mkdir(parents=True, exist_ok=True)
        temporary = entry.with_name(f"{entry.name}.{os.getpid()}.tmp")
        try:
            temporary.write_bytes(data)
            os.replace(temporary, entry)
        finally:
            temporary.unlink(missing_ok=True)
    except (OSError, ValueError):  # read-only home, full disk, or a value marshal cannot store (a TOML date)
        pass
