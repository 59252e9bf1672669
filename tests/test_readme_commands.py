"""Every `cost4d` command line in the README runs from a non-editable install in an empty folder, and
the numbers its comment states are in its output (issue 14)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: command lines that name files a reader supplies
PLACEHOLDERS = ("my_model.toml", "path/to/", "mine.json", "HOST:PORT")


def readme_commands() -> list[tuple[str, str, str]]:
    """(command, comment, output) for each cost4d line of the README's bash blocks, continuations joined.
    ``cost4d X Y ... --more`` stands for the arguments of the last full command line (``...`` expanded); a
    comment line right under a command (``#   text  ...``) is text its output prints."""
    out, block, pending, last_args, under = [], False, "", [], False
    for line in (ROOT / "README.md").read_text().splitlines():
        if line.startswith("```"):
            block = line.startswith("```bash") and not block
            continue
        if not block:
            continue
        line = pending + line.strip()
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        pending = ""
        if line.startswith("#") and under:  # the line right under a command
            command, comment, _ = out[-1]
            out[-1] = (command, comment, line.lstrip("# ").split("  ...")[0].strip())
        under = False
        if line.startswith("#"):
            continue
        code, _, comment = line.partition("#")
        words = code.split()
        if words[:1] != ["cost4d"] or any(p in code for p in PLACEHOLDERS):
            continue
        if "..." in words:
            at = words.index("...")
            words = words[:at] + last_args + words[at + 1:]
        else:
            first_option = next((i for i, w in enumerate(words) if w.startswith("-")), len(words))
            last_args = words[first_option:]
        out.append((" ".join(words), comment.strip(), None))
        under = True
    return out


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """The package as `pip install .` lays it out (a wheel, not the checkout), without dependencies."""
    target = tmp_path_factory.mktemp("site")
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target), str(ROOT)],
                   check=True, capture_output=True, text=True)
    return target


@pytest.mark.slow
def test_readme_lists_commands():
    assert len(readme_commands()) >= 15


@pytest.mark.slow
@pytest.mark.parametrize("command, comment, output", readme_commands(),
                         ids=lambda v: v[:60] if isinstance(v, str) else "")
def test_readme_command_runs_from_an_install(installed, tmp_path, command, comment, output):
    env = {**os.environ, "PYTHONPATH": str(installed)}
    args = shlex.split(command)[1:]
    result = subprocess.run([sys.executable, "-m", "costmodel", *args], cwd=tmp_path, env=env, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert str(installed) in subprocess.run([sys.executable, "-c", "import costmodel; print(costmodel.__file__)"],
                                            cwd=tmp_path, env=env, capture_output=True, text=True).stdout
    for number in re.findall(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+\.\d+|\b\d{2,}\b", comment):  # the figures it
        # states, comma-grouped ones whole
        assert number in result.stdout, (number, result.stdout[-2000:])
    if output:  # spacing aside (tables align their columns)
        assert " ".join(output.split()) in " ".join(result.stdout.split()), (output, result.stdout[-2000:])
