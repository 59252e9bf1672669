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
#: a figure in a comment: comma-grouped (46,702,792,704), decimal (37.03) or whole (38); not part of a name (llama3-8b)
NUMBER = re.compile(r"(?<![\w.,-])(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)(?![\w])")


def whole_in(number: str, text: str) -> bool:
    """Whether ``number`` is in ``text`` as a whole number (not 8 in 38, nor 7.27 in 27.27, nor 5,302 in 25,302)."""
    return bool(re.search(rf"(?<![\d.,]){re.escape(number)}(?![\d]|[.,]\d)", text))


#: command lines that name files a reader supplies (a cluster's benchmark output, a rendezvous address)
PLACEHOLDERS = ("mine.json", "HOST:PORT")
#: a Hugging Face config the README's path/to/config.json stands for: a MoE one where the line uses --ep
HF_CONFIG = {False: ROOT / "tests" / "fixtures" / "hf" / "llama-3-8b.json",
             True: ROOT / "tests" / "fixtures" / "hf" / "mixtral-8x7b-v0.1.json"}


def _lines() -> list[str]:
    """The README's bash blocks' lines, continuations joined."""
    out, block, pending = [], False, ""
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
        out.append(line)
    return out


def readme_commands() -> list[tuple]:
    """(command, comment, output, writes, needs) for each cost4d line of the README's bash blocks.
    ``cost4d X Y ... --more`` stands for the arguments of the last full command line (``...`` expanded); a
    comment line right under a command (``#   text  ...``) is text its output prints; ``cost4d ... > FILE``
    writes FILE, and a command naming a FILE another line writes runs that line first (``needs``)."""
    lines = _lines()
    writers = {}
    for line in lines:
        code = line.partition("#")[0]
        if code.startswith("cost4d ") and ">" in code:
            command, _, target = code.partition(">")
            writers[target.strip()] = " ".join(command.split())
    out, last_args, under = [], [], False
    for line in lines:
        if line.startswith("#") and under:  # the line right under a command
            command, comment, _, writes, needs = out[-1]
            out[-1] = (command, comment, line.lstrip("# ").split("  ...")[0].strip(), writes, needs)
        under = False
        if line.startswith("#"):
            continue
        code, _, comment = line.partition("#")
        code, _, writes = code.partition(">")
        words = code.split()
        if words[:1] != ["cost4d"] or any(p in code for p in PLACEHOLDERS):
            continue
        if "..." in words:
            at = words.index("...")
            words = words[:at] + last_args + words[at + 1:]
        else:
            first_option = next((i for i, w in enumerate(words) if w.startswith("-")), len(words))
            last_args = words[first_option:]
        needs = [(file, writers[file]) for file in words if file in writers]
        out.append((" ".join(words), comment.strip(), None, writes.strip() or None, needs))
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
@pytest.mark.parametrize("command, comment, output, writes, needs", readme_commands(),
                         ids=lambda v: v[:60] if isinstance(v, str) else "")
def test_readme_command_runs_from_an_install(installed, tmp_path, command, comment, output, writes, needs):
    env = {**os.environ, "PYTHONPATH": str(installed)}

    def run(line):
        return subprocess.run([sys.executable, "-m", "costmodel", *shlex.split(line)[1:]], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=300)

    for file, writer in needs:  # the README's line that writes it, first
        (tmp_path / file).write_text(run(writer).stdout)
    if "path/to/config.json" in command:
        (tmp_path / "path" / "to").mkdir(parents=True)
        (tmp_path / "path" / "to" / "config.json").write_text(HF_CONFIG["--ep" in command].read_text())
    result = run(command)
    assert result.returncode == 0, result.stderr
    if writes:
        (tmp_path / writes).write_text(result.stdout)
    assert str(installed) in subprocess.run([sys.executable, "-c", "import costmodel; print(costmodel.__file__)"],
                                            cwd=tmp_path, env=env, capture_output=True, text=True).stdout
    for number in NUMBER.findall(comment):  # each figure it states, as a whole number in the output (not 8 in 38)
        assert whole_in(number, result.stdout), (number, result.stdout[-2000:])
    if output:  # spacing aside (tables align their columns)
        assert " ".join(output.split()) in " ".join(result.stdout.split()), (output, result.stdout[-2000:])


def test_a_figure_must_appear_whole():
    """The figures a comment states are matched as whole numbers: a wrong README figure fails its test."""
    out = "N_FSDP = 38 (N > 37.03); bubble 27.27%; B = 25,302 tokens"
    assert [n for n in NUMBER.findall("fits: 38 (N > 37.03), 27.27%, 25,302, llama3-8b") if whole_in(n, out)] == \
        ["38", "37.03", "27.27", "25,302"]
    assert not any(whole_in(n, out) for n in ("8", "7.03", "7.27", "5,302", "25,30"))
