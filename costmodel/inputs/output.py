"""The one place cost4d writes files given with ``--out``: checked before the work, atomic, umask kept.

``writable(path)`` is called when a command starts, so a bad ``--out`` fails before anything runs;
``write_json(path, document)`` writes a temporary file beside the target (created with mode 0666
less the user's umask, like any file a shell makes) and renames it over the target, so readers
never see half a file, and a failure or a kill (SIGTERM, Ctrl-C) leaves the old file as it was.
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path

from costmodel.errors import CostModelError
from costmodel.inputs.files import check_path, where


def writable(path, flag: str = "--out") -> Path:
    """``path`` if a file can be written there, else one line saying why (naming ``flag``)."""
    path = check_path(path)
    if path.is_dir():
        raise CostModelError(f"{flag} {where(path)} is a directory: give a file name")
    parent = path.parent
    if not parent.exists():
        raise CostModelError(f"{flag} {where(path)}: folder {where(parent)} does not exist")
    if not parent.is_dir():
        raise CostModelError(f"{flag} {where(path)}: {where(parent)} is not a folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise CostModelError(f"{flag} {where(path)}: folder {where(parent)} is not writable")
    return path


def write_json(path, document) -> None:
    """``document`` as JSON in ``path``, atomically (NaN and infinity are refused: JSON has none)."""
    write_text(path, json.dumps(document, indent=1, allow_nan=False) + "\n")


def write_text(path, text: str) -> None:
    """``text`` in ``path``, atomically, with the umask's permissions."""
    path = writable(path)
    tmp = path.parent / f".{path.name[:200]}.{secrets.token_hex(4)}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # the kernel applies the umask
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except OSError as err:
        _remove(tmp)
        raise CostModelError(f"cannot write {where(path)}: {err.strerror}") from None
    except BaseException:
        _remove(tmp)
        raise


def _remove(tmp: Path) -> None:
    try:
        tmp.unlink()
    except OSError:
        pass
