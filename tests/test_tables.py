"""Tables that fit the width (costmodel/report/tables.py): plain when piped or with --plain, rich boxes on a
terminal; prose wraps, names and numbers are never cut (issue 14)."""

import io
import os
import pty
import re
import subprocess
import sys

import pytest

from costmodel.report.tables import PlainConsole, Table, longest_piece, strip_markup, wrap

COMM = ["comm", "--model", "llama3-70b", "--hardware", "h100-sxm", "--tp", "8", "--tokens", "8192"]
BOX = re.compile("[\u2500-\u257f]")  # box drawing
ANSI = re.compile("\x1b\\[")


def cost4d(*args, columns=80):
    env = {**os.environ, "COLUMNS": str(columns)}
    return subprocess.run([sys.executable, "-m", "costmodel", *args], capture_output=True, text=True, env=env,
                          check=True).stdout


def on_a_terminal(*args, columns=80) -> str:
    """What `cost4d ARGS` writes to a terminal of ``columns`` columns (a pseudo-terminal)."""
    leader, follower = pty.openpty()
    env = {**os.environ, "COLUMNS": str(columns), "LINES": "50", "TERM": "xterm"}
    proc = subprocess.Popen([sys.executable, "-m", "costmodel", *args], stdout=follower, stderr=subprocess.PIPE,
                            env=env)
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the terminal closed: the process is done
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    assert proc.wait(timeout=60) == 0, proc.stderr.read()
    return b"".join(chunks).decode().replace("\r\n", "\n")


@pytest.mark.parametrize("text, width, lines", [
    ("embedding output (vocabulary-parallel) (forward)", 12,
     ["embedding", "output", "(vocabulary-", "parallel)", "(forward)"]),  # spaces, then after the hyphen
    ("nvlink+infiniband", 10, ["nvlink+", "infiniband"]),
    ("a\nbb cc dd\n\neee", 5, ["a", "bb cc", "dd", "", "eee"]),  # newlines kept
    ("communication_accounting", 8, ["communic", "ation_", "accounti", "ng"]),  # longer than the column: folds,
    # after an '_' where one falls in the line
    ("huggingface/nanotron@e24d2483a4e5 scripts", 24, ["huggingface/nanotron@", "e24d2483a4e5 scripts"]),
    ("--tp 8 llama3-70b", 4, ["--tp", "8", "llam", "a3-7", "0b"]),  # no break after '--' or before a digit: folds
    ("ZeRO-3, 50 GB/s", 8, ["ZeRO-3,", "50 GB/s"]),  # no break before a digit or after a slash
])
def test_wrap(text, width, lines):
    assert wrap(text, width) == lines


@pytest.mark.parametrize("text, piece", [
    ("reduce-scatter nvlink+infiniband", "infiniband"),  # names break after a hyphen or plus before a letter
    ("fsdp=4, cp=2, ZeRO-3, 50 GB/s", "fsdp=4,"),  # not before a digit ('ZeRO-|3') or after a slash ('GB/|s')
    ("heads=12/12 --recompute", "--recompute"),
])
def test_longest_piece_is_the_narrowest_a_prose_column_goes_unfolded(text, piece):
    assert longest_piece(text) == len(piece)


def test_markup_is_stripped_as_rich_renders_it():
    assert strip_markup("[bold]x[/] (y) [1,0]<stdout> \\[test]") == "x (y) [1,0]<stdout> [test]"


def _table():
    t = Table("A title", "axis", "collective", ">bytes", "what (pass)")
    t.add_row("fsdp", "reduce-scatter", "134.2 MB", "gradients (blocks) (backward)")
    t.add_row("tp", "[bold]all-gather[/]", "1.0 GB", "weights (root: embeddings, norm, output) (forward)")
    return t


def test_plain_table_fits_and_keeps_names_and_numbers_whole():
    lines = _table().plain_lines(50)
    assert lines[0] == "A title" and not any(BOX.search(line) for line in lines)
    assert max(map(len, lines)) <= 50
    text = "\n".join(lines)
    assert all(whole in text for whole in ("reduce-scatter", "all-gather", "134.2 MB", "1.0 GB", "embeddings,"))
    assert "[bold]" not in text
    assert lines[2] == "----  --------------  --------  " + "-" * 18  # the rule under the headers


@pytest.mark.parametrize("room, widths, why", [
    (200, [4, 14, 8, 50], "each column at its longest line"),
    (40, [4, 14, 8, 14], "prose narrows first"),
    (33, [4, 10, 8, 11], "prose at its longest word ('embeddings,'), then names wrap after hyphens ('reduce-')"),
    (30, [4, 10, 8, 11], "no word folds: the table stacks instead"),
    (5, [4, 10, 8, 11], "the first column and numbers never narrow either"),
])
def test_widths_narrow_prose_then_names_and_never_fold(room, widths, why):
    assert _table().widths(room) == widths, why
    assert _table().stacks(room) == (sum(widths) > room)  # what does not fit is shown as blocks


def test_rich_table_fits_80_columns_with_boxes():
    from rich.console import Console

    out = io.StringIO()
    Console(file=out, width=80, color_system=None).print(_table())
    lines = out.getvalue().splitlines()
    assert max(map(len, lines)) <= 80 and any(BOX.search(line) for line in lines)
    assert "reduce-scatter" in out.getvalue() and "…" not in out.getvalue()


def test_plain_console_wraps_prose_with_its_indent(capsys):
    PlainConsole(30).print("  = 43.97 -> 44 x h100-sxm at 80 GB = 80e9 B, [bold]the end[/]")
    lines = capsys.readouterr().out.splitlines()
    assert all(line.startswith("  ") and len(line) <= 30 for line in lines) and "[bold]" not in lines[-1]


@pytest.mark.parametrize("args", [COMM, ["models"], ["hardware"], ["memory", "--model", "llama3-70b", "--pp", "4",
                                                                    "--tokens", "8192"]])
def test_piped_output_is_plain_fits_80_columns_and_names_whole(args):
    """COLUMNS=80 when piped: plain text (no boxes, no colour), every line fits, no name cut or folded."""
    out = cost4d(*args)
    lines = out.splitlines()
    assert not BOX.search(out) and not ANSI.search(out) and "…" not in out
    assert max(map(len, lines)) <= 80
    if args[0] == "models":
        names = [line.split()[0] for line in lines[3:] if line and not line.startswith(" ")]
        assert {"llama3-405b", "mixtral-8x7b", "qwen3-30b-a3b", "deepseek-v3"} <= set(names)  # whole, first column
    if args[0] == "comm":
        table = out[:out.index("Time model:")]  # the time model names the ops it priced as well
        assert table.count("all-reduce") == 5  # the collective column never folds ('all-redu' / 'ce')


@pytest.mark.slow
def test_terminal_gets_boxes_and_plain_forces_them_off():
    boxed = on_a_terminal(*COMM)
    assert BOX.search(boxed) and "all-reduce" in boxed and "…" not in boxed
    assert max(len(ANSI.sub("", re.sub("\x1b\\[[0-9;]*m", "", line))) for line in boxed.splitlines()) <= 80
    for plain in (on_a_terminal(*COMM, "--plain"), on_a_terminal("--plain", *COMM)):  # on the command, or global
        assert not BOX.search(plain) and not ANSI.search(plain) and "all-reduce" in plain
        assert plain == cost4d(*COMM)  # the same text as piped at the same width
    # a command group takes it before its command's name too
    assert BOX.search(on_a_terminal("homework", "list")) and not BOX.search(on_a_terminal("homework", "--plain", "list"))


def test_a_table_too_narrow_for_its_words_is_shown_as_blocks():
    """Where the columns cannot fit without folding a word, each row is a block: its first cell, then each
    other cell under its header, prose wrapped at spaces; no word is cut, every line fits."""
    table = _table()
    assert not table.stacks(33) and table.stacks(24)
    lines = table.plain_lines(30)
    assert max(map(len, lines)) <= 30 and not any(BOX.search(line) for line in lines)
    assert lines[:3] == ["A title", "", "fsdp"] and lines[3].split() == ["collective", "reduce-scatter"]
    words = {w for row in table.rows for cell in row for w in strip_markup(cell).split()}
    assert words <= set(" ".join(lines).split())  # every word whole


@pytest.mark.parametrize("command", ["models", "frameworks"])
def test_catalogs_at_80_columns_keep_every_word_of_their_sources_whole(command):
    """Each source prints whole: the output, its line breaks read as spaces (and one after a hyphen as none),
    holds the source's text."""
    import json

    out = cost4d(command)
    rows = next(v for v in json.loads(cost4d(command, "--json")).values() if isinstance(v, list))
    sources = [str((row.get("spec") or row).get("source", "")) for row in rows]

    def flat(text):
        return re.sub(r"- ", "-", " ".join(text.split()))

    assert max(map(len, out.splitlines())) <= 80
    assert all(flat(source) in flat(out) for source in sources), command


def test_a_wrapped_command_is_still_one_shell_command():
    from costmodel.report.tables import command_lines

    command = "cost4d step --model llama3-70b --hardware h100-sxm --recipe megatron --tp 4 --sp --pp 4 --cp 2 " \
              "--fsdp 16 --zero 1 --tokens 8192 --seq 8192 --schedule interleaved --chunks 4 --microbatches 32"
    lines = command_lines(command, 60)
    assert len(lines) > 1 and max(map(len, lines)) <= 60 and all(line.endswith(" \\") for line in lines[:-1])
    assert " ".join(" ".join(line.removesuffix("\\").split()) for line in lines) == command  # what a shell reads
    assert command_lines("cost4d models", 60) == ["cost4d models"]
    for width in range(40, 120):  # never inside an option: '--grad-' and 'accum' would be two words to a shell
        lines = command_lines(command + " --grad-accum 4 --cp-kind allgather", width)
        assert " ".join(" ".join(line.removesuffix("\\").split()) for line in lines) == \
            command + " --grad-accum 4 --cp-kind allgather", width


def test_rich_prefers_the_light_box_to_folding_a_word():
    """At a width where only the boxed table would need a word folded, rich draws the light one, words whole."""
    from rich.console import Console

    out = io.StringIO()
    Console(file=out, width=40, color_system=None).print(_table())
    text = out.getvalue()
    assert "embeddings," in text and "weights" in text and max(map(len, text.splitlines())) <= 40


def test_a_wrapped_command_keeps_a_quoted_path_whole():
    """A quoted argument with spaces ('/tmp/my models/x.json') is one word: no width wraps inside it."""
    import shlex

    from costmodel.report.tables import command_lines

    argv = ["cost4d", "step", "--model", "/tmp/my models/x.json", "--hardware", "a b;c$(d).toml", "--tp", "2"]
    for width in range(20, 100):
        lines = command_lines(shlex.join(argv), width)
        assert shlex.split(" ".join(line.removesuffix("\\") for line in lines)) == argv, width
