"""The one place cost4d reads files: regular files only, bounded size, UTF-8, bounded nesting.

A FIFO, directory or device is refused before it is read (opened non-blocking, so a FIFO never
hangs), a file over its limit is refused before it is read whole, and text that is not UTF-8
names the byte and line where it stops being so. Documents (JSON, TOML) are parsed here too.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from costmodel.errors import CostModelError
from costmodel.inputs.bounds import DEPTH

#: largest spec or results file (real ones are kilobytes)
SPEC_LIMIT = 4 * 2**20
#: largest log or table: an nccl-tests sweep is ~10 kB, so this holds hundreds of sweeps, and the
#: longest log cost4d accepts is read, checked and priced in about a second
LOG_LIMIT = 4 * 2**20
#: longest path accepted (Linux's PATH_MAX)
PATH_LIMIT = 4096


def shown(value, limit: int = 60) -> str:
    """``value`` quoted for a message (a string in quotes, anything else as Python writes it), shortened:
    a 100,000-character argument is not echoed whole."""
    text = value if isinstance(value, str) else repr(value)
    quote = repr if isinstance(value, str) else str
    return quote(text) if len(text) <= limit else quote(text[:limit]) + f"... ({len(text):,} characters)"


def where(path, limit: int = 160) -> str:
    """A path for a message: as given, or its last ``limit`` characters when it is longer."""
    text = os.fspath(path)
    tail = text if text.isprintable() else repr(text)[1:-1]
    return tail if len(tail) <= limit else "..." + tail[-limit:]


def check_path(path) -> Path:
    """``path`` as a Path, or one line if no file system could hold such a name."""
    text = os.fspath(path)
    if not text:
        raise CostModelError("an empty file name")
    if "\0" in text:
        raise CostModelError(f"file name {shown(text)} contains a NUL byte")
    if len(text) > PATH_LIMIT or any(len(os.fsencode(part)) > 255 for part in Path(text).parts):
        raise CostModelError(f"file name {shown(text)} is too long (at most 255 bytes per part, "
                             f"{PATH_LIMIT} in all)")
    return Path(text)


def read_bytes(path, what: str = "file", limit: int = SPEC_LIMIT) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes."""
    path = check_path(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except OSError as err:
        raise CostModelError(f"cannot read {what} {where(path)}: {err.strerror}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = "a directory" if stat.S_ISDIR(info.st_mode) else "a FIFO" if stat.S_ISFIFO(
                info.st_mode) else "not a regular file"
            raise CostModelError(f"{what} {where(path)} is {kind}: give a file")
        if info.st_size > limit:
            raise CostModelError(f"{what} {where(path)} is {info.st_size:,} bytes; cost4d reads at most "
                                 f"{limit:,} (split it, or trim it to the part you need)")
        with os.fdopen(os.dup(fd), "rb") as handle:
            data = handle.read(limit + 1)
    except OSError as err:
        raise CostModelError(f"cannot read {what} {where(path)}: {err.strerror}") from None
    finally:
        os.close(fd)
    if len(data) > limit:
        raise CostModelError(f"{what} {where(path)} is over {limit:,} bytes, the most cost4d reads")
    return data


def decode(data: bytes, where: str) -> str:
    """UTF-8 text (a leading byte-order mark is dropped), or one line naming where it is not."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise CostModelError(f"{where}: the file is UTF-16; save it as UTF-8")
    data = data.removeprefix(b"\xef\xbb\xbf")
    nul = data.find(b"\0")
    if nul >= 0:
        raise CostModelError(f"{where}: a NUL byte at offset {nul:,}: this is a binary file, not text")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise CostModelError(f"{where}:{line}: byte 0x{data[err.start]:02x} is not UTF-8 text; "
                             "save the file as UTF-8") from None


def read_text(path, what: str = "file", limit: int = SPEC_LIMIT) -> str:
    """A UTF-8 text file, checked as :func:`read_bytes` and :func:`decode` say."""
    return decode(read_bytes(path, what, limit), where(path))


def depth(value, limit: int = DEPTH) -> int:
    """How deep lists and tables nest in ``value`` (walked without recursion); stops past ``limit``."""
    deepest, todo = 0, [(value, 1)]
    while todo:
        item, level = todo.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, level)
            if deepest > limit:
                return deepest
            todo += [(child, level + 1) for child in (item.values() if isinstance(item, dict) else item)]
    return deepest


def parse_document(text: str, where: str, kind: str) -> dict:
    """A JSON or TOML document (``kind``) as a dict of fields, or one line saying where it is malformed.

    Numbers too long for Python (> 4,300 digits) and nesting too deep to parse are malformed too."""
    try:
        data = _parse_json(text, where) if kind == "json" else _parse_toml(text, where)
    except CostModelError:
        raise
    except RecursionError:
        raise CostModelError(f"{where}: nested too deeply to read (at most {DEPTH} levels)") from None
    except ValueError as err:  # e.g. an integer of more than 4,300 digits (the parser says not where)
        raise CostModelError(f"{where}{_line_of_long_number(text)}: malformed {kind.upper()}: "
                             f"{str(err).split(';')[0]}") from None
    if not isinstance(data, dict):
        raise CostModelError(f"{where}: expected a table of fields at the top level, found "
                             f"{type(data).__name__}")
    if not data:  # an empty file, or only comments: every field at its default is never what was meant
        raise CostModelError(f"{where}: holds no fields (an empty {kind.upper()} document)")
    if depth(data) > DEPTH:
        raise CostModelError(f"{where}: nested more than {DEPTH} levels deep (cost4d's files nest 3)")
    return data


def _line_of_long_number(text: str) -> str:
    """':LINE' of the first run of more than 4,300 digits in ``text`` (Python's limit for int()), or ''."""
    import re

    found = re.search(r"\d{4301}", text)
    return f":{text.count(chr(10), 0, found.start()) + 1}" if found else ""


def _parse_json(text: str, where: str):
    import json  # imported here, as the TOML parser: most commands read no file of its kind

    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise CostModelError(f"{where}:{err.lineno}:{err.colno}: malformed JSON: {err.msg}") from None


def _parse_toml(text: str, where: str):
    try:  # imported here: the parser compiles its patterns at import, and most commands read no file
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise CostModelError(f"{where}: malformed TOML: {err}") from None


def read_document(path, what: str = "spec file", limit: int = SPEC_LIMIT) -> dict:
    """A .json or .toml file (by suffix; anything else is read as TOML) as a dict of fields."""
    path = check_path(path)
    kind = "json" if path.suffix.lower() == ".json" else "toml"
    return parse_document(read_text(path, what, limit), where(path), kind)
