"""Every command's --json holds the top-level keys the README's "JSON output" table documents: those of its
second column always, those of its third only when their option is given, and no others (issue 14)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from costmodel.cli import app

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()
HOMEWORK = ("xxl", "zero", "bubble", "tpu-batch")
BATCH = ["--model", "xxl", "--hardware", "tpu-v5p", "--fsdp", "16", "--tp", "4", "--mx", "2"]
SHIPPED = "shipped:h100-8gpu-together-nccl-tests"

#: plot kind -> a command line (the figure goes to a temporary file)
PLOTS = {
    "pipeline": ["--pp", "4", "--microbatches", "8", "--schedule", "zb-h1"],
    "memory": ["--model", "llama3-8b", "--pp", "2", "--tokens", "4096"],
    "fsdp": ["--model", "xxl", "--limit", "95GB"],
    "batch": [*BATCH, "--peak-flops", "4.6e14", "--ici-bandwidth", "1.8e11"],
    "roofline": ["--model", "llama3-8b", "--hardware", "h100-sxm", "--tp", "2", "--tokens", "4096"],
    "validate": [SHIPPED, "--hardware", "h100-sxm"],
    "plan": ["--model", "llama3-8b", "--hardware", "h100-sxm", "--gpus", "8", "--global-batch", "65536", "--seq", "8192"],
}
#: command -> argument lists that, between them, give every optional key the README names
CASES = {
    "models": [[]], "hardware": [[]], "recipes": [[]], "frameworks": [[]],
    "memory": [["--model", "xxl"],
               ["--model", "xxl", "--fsdp", "8", "--tokens", "16", "--symbolic"],
               ["--model", "nanotron-1b", "--framework", "nanotron", "--pp", "2", "--fsdp", "4", "--zero", "1",
                "--tokens", "16384", "--microbatches", "16", "--hardware", "h100-sxm"]],
    "flops": [["--model", "llama3-8b", "--tokens", "8192"], ["--model", "xxl", "--tokens", "10", "--symbolic"]],
    "comm": [["--model", "xxl", "--hardware", "tpu-v5p", "--fsdp", "16", "--tp", "4", "--mx", "2", "--tokens", "4096"],
             ["--model", "xxl", "--hardware", "tpu-v5p", "--fsdp", "16", "--tokens", "4096", "--symbolic"]],
    "step": [["--model", "llama3-8b", "--hardware", "h100-sxm", "--tp", "8", "--tokens", "8192"]],
    "plan": [["--model", "llama3-8b", "--hardware", "h100-sxm", "--gpus", "8", "--global-batch", "65536", "--seq",
              "8192", "--top", "2"]],
    "validate": [[SHIPPED, "--hardware", "h100-sxm"], [SHIPPED, "--hardware", "h100-sxm", "--fit", "--out", "{tmp}/c.json"]],
    "solve fsdp": [["--model", "xxl", "--limit", "95GB"], ["--model", "xxl", "--limit", "95GB", "--symbolic"]],
    "solve ep": [["--model", "mixtral-8x7b", "--fsdp", "8", "--zero", "1", "--pp", "4", "--tokens", "4096", "--recompute",
                  "full", "--recipe", "megatron", "--limit", "40GB"]],
    "solve batch": [BATCH, [*BATCH, "--optimize-split", "--slice", "4x4x4", "--what-if"]],
    "explain batch": [BATCH],
    "explain fsdp": [["--model", "xxl", "--limit", "95GB"]],
    "explain memory": [["--model", "xxl", "--fsdp", "8", "--tokens", "4096"]],
    "import nccl-tests": [[SHIPPED], [SHIPPED, "--out", "{tmp}/r.json"]],
    "homework list": [[]],
    **{f"plot {kind}": [[*args, "--out", "{tmp}/f.svg"]] for kind, args in PLOTS.items()},
    **{f"homework {kind}": [["--seed", "3"]] for kind in HOMEWORK},
}
#: run in a subprocess with torch, in the slow tier (a run takes 10-20 s on CPU)
BENCH = {
    "bench collectives": [["--out", "{tmp}/b.json", "--max-bytes", "4KiB", "--iters", "1", "--warmup", "0",
                           "--ops", "all-reduce"]],
    "bench gpu": [["--out", "{tmp}/g.json", "--device", "cpu", "--small", "--iters", "1"]],
}


def documented() -> dict[str, tuple[set, set]]:
    """README command -> (keys always there, keys some option adds), from the "JSON output" table."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index("### JSON output"):]
    section = section[:section.index("\n### ", 5)]
    table = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].startswith("`cost4d "):
            name = cells[0].strip("`").removeprefix("cost4d ")
            table[name] = tuple(set(re.findall(r"`([a-z_0-9]+)`", cell)) for cell in cells[1:])
    return table


def leaf_commands() -> dict[str, object]:
    """'solve fsdp' -> its click command, for every command the CLI has."""
    import typer.main

    try:
        import typer._click as click
    except ImportError:
        import click

    root = typer.main.get_command(app)
    out, todo = {}, [("", root)]
    while todo:
        prefix, group = todo.pop()
        with click.Context(group) as ctx:
            for name in group.list_commands(ctx):
                command = group.get_command(ctx, name)
                path = f"{prefix} {name}".strip()
                if hasattr(command, "list_commands"):
                    todo.append((path, command))
                else:
                    out[path] = command
    return out


def _readme_name(command: str) -> str:
    if command.startswith("plot "):
        return "plot KIND"
    return "homework KIND" if command.startswith("homework ") and command != "homework list" else command


def test_every_command_has_json_and_a_readme_row():
    table = documented()
    for command, click_command in leaf_commands().items():
        options = {o for p in click_command.params for o in getattr(p, "opts", [])}
        assert "--json" in options, command
        assert _readme_name(command) in table, f"README's JSON output table lacks {command}"
        assert command in CASES or command in BENCH, f"no test case runs {command} --json"


def _check(command: str, payloads: list[dict]) -> None:
    always, optional = documented()[_readme_name(command)]
    seen = set()
    for payload in payloads:
        keys = set(payload)
        assert always <= keys, (command, always - keys)
        assert keys <= always | optional, (command, keys - always - optional)
        seen |= keys
    assert optional <= seen, (command, "no case shows", optional - seen)  # each optional key really appears


@pytest.mark.parametrize("command", [pytest.param(c, marks=pytest.mark.slow) if c.startswith("plot") else c
                                     for c in sorted(CASES)])
def test_json_keys_are_the_documented_ones(command, tmp_path):
    payloads = []
    for args in CASES[command]:
        args = [a.format(tmp=tmp_path) for a in args]
        result = runner.invoke(app, [*command.split(), *args, "--json"])
        assert result.exit_code == 0, result.output
        payloads.append(json.loads(result.stdout))
    _check(command, payloads)


@pytest.mark.slow
@pytest.mark.parametrize("command", sorted(BENCH))
def test_bench_json_keys_are_the_documented_ones(command, tmp_path):
    pytest.importorskip("torch")
    payloads = []
    for args in BENCH[command]:
        args = [a.format(tmp=tmp_path) for a in args]
        done = subprocess.run([sys.executable, "-m", "costmodel", *command.split(), *args, "--json"],
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        payloads.append(json.loads(done.stdout))
    if command == "bench collectives":  # a failed run adds its reason and log
        done = subprocess.run([sys.executable, "-m", "costmodel", "bench", "collectives", "--out",
                               str(tmp_path / "cut.json"), "--max-bytes", "64MiB", "--iters", "50", "--timeout", "1",
                               "--json"], capture_output=True, text=True, timeout=300)
        assert done.returncode == 1 and done.stderr.startswith("error: bench collectives timeout")
        payloads.append(json.loads(done.stdout))
    _check(command, payloads)


def test_import_json_with_out_prints_the_document_it_writes(tmp_path):
    out = tmp_path / "r.json"
    result = runner.invoke(app, ["import", "nccl-tests", SHIPPED, "--out", str(out), "--json"])
    assert result.exit_code == 0 and json.loads(result.stdout) == json.loads(out.read_text())
    result = runner.invoke(app, ["import", "nccl-tests", SHIPPED, "--out", str(out)])
    assert result.stdout.startswith(f"wrote {out}: ") and len(result.stdout.splitlines()) == 1


def documented_plot_data() -> dict[str, set]:
    """plot kind -> the keys of its `data` the README lists ("- `plot KIND`: `key`, ..."; parentheses are inner keys)."""
    text = (ROOT / "README.md").read_text()
    out = {}
    for kind, keys in re.findall(r"^- `plot ([a-z]+)`: (.*)$", text, flags=re.M):
        out[kind] = set(re.findall(r"`([a-z_0-9]+)`", re.sub(r"\([^)]*\)", "", keys)))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(PLOTS))
def test_plot_data_keys_are_the_documented_ones(kind, tmp_path):
    pytest.importorskip("matplotlib")
    result = runner.invoke(app, ["plot", kind, *PLOTS[kind], "--out", str(tmp_path / "f.png"), "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["kind"] == kind and (tmp_path / "f.png").stat().st_size > 0
    assert set(payload["data"]) == documented_plot_data()[kind]
