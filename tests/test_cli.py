"""The command line: JSON contract, human output naming units, and bad input (one line, exit 2)."""

import json
import re
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from costmodel.cli import app

runner = CliRunner()


def run_json(*args):
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def cost4d(*args):
    """The real console entry point in a fresh interpreter."""
    return subprocess.run([sys.executable, "-m", "costmodel", *args], capture_output=True, text=True)


def test_memory_xxl_json_contract():
    out = run_json("memory", "--model", "xxl")
    assert out["params"] == 219_848_638_464
    assert out["recipe"] == "cs336"
    assert {"master_weights", "grads", "optimizer", "activations"} <= set(out["components"])
    state = sum(out["components"][k] for k in ("master_weights", "grads", "optimizer"))
    assert state == 3_517_578_215_424
    assert out["activation_bytes_per_token"] == 17_547_264
    assert out["total_bytes"] == sum(out["components"].values())
    devices = {r["convention"]: r["devices"] for r in out["devices_worth"]["readings"]}
    assert devices["si"] == 44 and devices["nominal"] == 41  # 80e9 B vs 80 GiB per H100


def test_memory_xxl_human_output_names_units():
    result = cost4d("memory", "--model", "xxl")
    assert result.returncode == 0, result.stderr
    text = " ".join(result.stdout.split())
    for expected in ("219,848,638,464", "3,517,578,215,424", "3,517.6 GB", "3,276.0 GiB",
                     "44 x h100-sxm at 80 GB = 80e9 B", "41 x h100-sxm at 80.0 GiB", "17,547,264 B",
                     "cs336"):
        assert expected in text


def test_symbolic_fsdp_formula_and_numbers_agree():
    """(16P + A/2)/N + A/2 with P = 2DFL and A = 2B(D + F)L (CS336 (b), by hand), and its value is the total."""
    import sympy as sp

    out = run_json("memory", "--model", "xxl", "--fsdp", "38", "--tokens", "4096",
                   "--shard-activations", "0.5", "--symbolic")
    D, F, L, N, B = sp.symbols("D F L N B", positive=True)
    total = sp.parse_expr(out["symbolic"]["total"], local_dict={"D": D, "F": F, "L": L, "N": N, "B": B})  # our output
    P, A = 2 * D * F * L, 2 * B * (D + F) * L
    assert sp.simplify(total - ((16 * P + A / 2) / N + A / 2)) == 0
    values = {D: 16384, F: 53248, L: 126, N: 38, B: 4096}
    assert float(total.subs(values)) == pytest.approx(out["total_bytes"], rel=1e-12)
    assert out["symbolic"]["total_evaluated"] == pytest.approx(out["total_bytes"], abs=0.5)  # float rounding only


def test_symbolic_is_printed_before_the_numbers():
    result = runner.invoke(app, ["memory", "--model", "xxl", "--fsdp", "8", "--shard-activations", "0.5",
                                 "--tokens", "16", "--symbolic"])
    assert result.exit_code == 0
    assert result.stdout.index("Formula") < result.stdout.index("Memory per device")


def test_units_iec():
    result = runner.invoke(app, ["memory", "--model", "xxl", "--units", "iec"])
    assert "GiB" in result.stdout and "2^30" in result.stdout


def test_hardware_fit_verdict():
    out = run_json("memory", "--model", "xxl", "--fsdp", "64", "--hardware", "h100-sxm")
    assert out["fits"]["fits"] is True
    out = run_json("memory", "--model", "xxl", "--hardware", "h100-sxm")
    assert out["fits"]["fits"] is False


def test_flops_json():
    out = run_json("flops", "--model", "xxl", "--tokens", "10")
    D, F, L = 16384, 53248, 126
    assert out["forward_flops_per_token"] == 4 * D * F * L
    assert out["backward_flops_per_token"] == 8 * D * F * L - 2 * D * F  # first layer: no input grad
    assert out["total_flops"] == 10 * (12 * D * F * L - 2 * D * F)


@pytest.mark.parametrize("pp, last_layers", [(4, 8), (3, 10)])  # even split of 32 layers: 8 each; 11, 11, 10
def test_flops_per_device_is_the_busiest_pipeline_stage(pp, last_layers):
    """--pp promises the heaviest stage's figures: the last stage's layers and the output layer, on one device
    (Llama 3 8B by hand: per layer Q, O D a d_h, K, V D k d_h, SwiGLU 3 D F, Q K^T and A V 2 s a d_h, each
    matmul 2 FLOPs per weight forward and 4 backward; the output layer V D; the embedding a lookup)."""
    D, F, a, k, d_h, V, s, T = 4096, 14336, 32, 8, 128, 128256, 8192, 8192
    layer = 2 * (D * d_h * (2 * a + 2 * k) + 3 * D * F) + 4 * s * a * d_h  # forward FLOPs per token
    last_stage = 3 * (last_layers * layer + 2 * V * D) * T  # forward + backward: 3 x forward
    out = run_json("flops", "--model", "llama3-8b", "--pp", str(pp), "--tokens", str(T))
    assert out["total_flops"] == 3 * (32 * layer + 2 * V * D) * T  # the whole model, once
    assert out["flops_per_device"] == pytest.approx(last_stage, rel=1e-12)  # float division only
    assert out["stage_imbalance"] == pytest.approx(pp * last_stage / out["total_flops"], rel=1e-12)
    assert out["stage_imbalance"] > 1


def test_comm_json():
    out = run_json("comm", "--model", "xxl", "--hardware", "tpu-v5p", "--fsdp", "16", "--tp", "4",
                   "--mx", "2", "--tokens", "4096")
    ops = {(c["op"], c["axis"], c["phase"]) for c in out["collectives"]}
    assert ("all-gather", "fsdp", "forward") in ops and ("all-reduce", "tp", "forward") in ops
    assert out["total_seconds"] == pytest.approx(sum(c["seconds"] for c in out["collectives"]))


@pytest.mark.parametrize("axis", ["--tp", "--pp", "--cp"])
def test_comm_without_tokens_leaves_out_what_moves_nothing_and_says_so(axis):
    """--tokens 0 (the default): the activations' collectives are empty buffers, no calls (no latency either, as the
    array path prices them); the FSDP rows stay; the text says why the axis has no rows."""
    args = ("--model", "llama3-8b", "--hardware", "h100-sxm", "--fsdp", "4", axis, "2")
    out = run_json("comm", *args)
    assert out["collectives"] and all(c["buffer_bytes_per_call"] > 0 for c in out["collectives"])
    text = " ".join(runner.invoke(app, ["comm", *args]).output.split())
    assert f"the activations' collectives ({axis[2:].upper()}) move nothing and are left out" in text
    sized = run_json("comm", *args, "--tokens", "8192")
    rows = [sum(c["axis"] == axis[2:] for c in found["collectives"]) for found in (out, sized)]
    assert rows[1] > rows[0]  # CP's gradient all-reduce carries weights, with tokens or without


@pytest.mark.parametrize("ep", ["8", "2"])
def test_comm_symbolic_lists_the_rows_the_table_lists(ep):
    """--symbolic's formulas are the table's rows: expert-data traffic, 0 where E_p = R, is in neither."""
    out = run_json("comm", "--model", "mixtral-8x7b", "--hardware", "h100-sxm", "--dp", "8", "--ep", ep,
                   "--tokens", "4096", "--symbolic")
    table = [(c["op"], c["axis"], c["purpose"], c["phase"]) for c in out["collectives"]]
    formulas = [(c["op"], c["axis"], c["purpose"], c["phase"]) for c in out["symbolic"]["collectives"]]
    assert sorted(formulas) == sorted(table)
    assert ("expert-data" in {c[1] for c in table}) is (ep == "2")


def test_catalogs():
    names = {m["name"]: m["params"] for m in run_json("models")["models"]}
    assert names["llama3-8b"] == 8_030_261_248  # Meta's release / Hugging Face model card
    hardware = {h["name"] for h in run_json("hardware")["hardware"]}
    assert {"h100-sxm", "h200", "b200", "a100-80gb", "tpu-v4", "tpu-v5e", "tpu-v5p", "tpu-v6e",
            "mi325x", "trn2"} <= hardware


BAD = [
    (["memory", "--model", "nope"], "closest"),
    (["memory", "--model", "xxl", "--tp", "3"], "--tp 3 does not divide d_ff"),
    (["memory", "--model", "xxl", "--tp", "0"], "--tp"),
    (["memory", "--model", "xxl", "--tokens", "-5"], "--tokens"),
    (["memory", "--model", "xxl", "--units", "furlongs"], "--units"),
    (["memory", "--model", "xxl", "--hardware", "h100"], "closest: "),
    (["memory", "--model", "xxl", "--zero", "7", "--fsdp", "2"], "--zero"),
    (["memory", "--model", "xxl", "--pp", "500"], "--pp 500"),
    (["comm", "--model", "xxl"], "--hardware"),
    (["memory", "--model", "missing/spec.toml"], "cannot read"),
]


@pytest.mark.parametrize("args, needle", BAD)
def test_bad_input_is_one_line_and_exit_2(args, needle):
    result = cost4d(*args)
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert needle in lines[0]
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("content, needle", [
    ('kind = "ffn"\nd_model = 64\nd_ff = -3\nlayers = 2\n', "d_ff"),
    ('kind = "ffn"\nd_model = 64\nd_ff = [\n', "malformed TOML"),
    ('kind = "ffn"\nd_model = 64\nd_ff = 8\nlayers = 2\ncolour = "red"\n', "colour"),
    ('d_model = 64\n', "'kind' must be one of ffn, transformer"),
])
def test_malformed_spec_file(tmp_path, content, needle):
    path = tmp_path / "spec.toml"
    path.write_text(content)
    result = cost4d("memory", "--model", str(path))
    assert result.returncode == 2
    assert needle in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("name, content, says", [
    ("spec.toml", 'kind = "ffn"\nd_ff = [\n', ": malformed TOML: "),
    ("spec.json", '{"kind": [1,\n', ":2:1: malformed JSON: "),
])
def test_a_malformed_document_is_named_once(tmp_path, name, content, says):
    path = tmp_path / name
    path.write_text(content)
    line = cost4d("memory", "--model", str(path)).stderr.strip()
    assert line.startswith(f"error: {path}{says}") and line.count(": malformed ") == 1 and line.count(str(path)) == 1


def test_spec_file_works_where_a_name_does(tmp_path):
    path = tmp_path / "mine.toml"
    path.write_text('kind = "ffn"\nd_model = 16384\nd_ff = 53248\nlayers = 126\n')
    assert run_json("memory", "--model", str(path))["params"] == 219_848_638_464


TRANSFORMER_BAD = [
    (["memory", "--model", "llama3-8b", "--tp", "3"], "--tp 3 does not divide the attention heads"),
    (["memory", "--model", "llama3-8b", "--tp", "16"], "--tp 16 does not divide the KV heads"),
    (["memory", "--model", "llama3-8b", "--pp", "33"], "more than the model's 32 layers"),
    (["memory", "--model", "llama3-8b", "--cp", "3", "--tokens", "8192"], "--cp 3 does not divide --tokens"),
    (["memory", "--model", "llama3-8b", "--cp", "4", "--tokens", "8196", "--seq", "4098"],
     "does not divide the sequence length 4,098"),
    (["memory", "--model", "llama3-8b", "--tokens", "8192", "--seq", "3000"], "not a whole number of --seq 3000"),
    (["memory", "--model", "llama3-8b", "--pp", "4", "--microbatches", "2", "--schedule", "zb-h1"],
     "needs --microbatches >= --pp"),
    (["memory", "--model", "llama3-8b", "--recompute", "every:x"], "every:K"),
]


@pytest.mark.parametrize("args, needle", TRANSFORMER_BAD)
def test_transformer_layouts_that_cannot_run(args, needle):
    result = cost4d(*args)
    assert result.returncode == 2 and result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], result.stderr


@pytest.mark.parametrize("args", [
    ["explain", "batch", "--model", "xxl", "--hardware", "tpu-v5p", "--fsdp", "16", "--tp", "4", "--mx", "2"],
    ["explain", "fsdp", "--model", "xxl", "--limit", "95GB"],
    ["explain", "memory", "--model", "xxl", "--fsdp", "8", "--tokens", "4096"],
])
def test_explain_json_holds_the_steps_of_the_text(args):
    """--json: the same steps as the text, each formula in plain text (no Eq(...)) and LaTeX."""
    steps = run_json(*args, "--json")["steps"]
    text = runner.invoke(app, args).stdout
    assert steps and all(s["title"] in text for s in steps)
    assert all("Eq(" not in (s["formula"] or "") for s in steps)
    assert any(s["latex"] for s in steps)


EXPLAINED = [
    ["explain", "batch", "--model", "xxl", "--hardware", "tpu-v5p", "--fsdp", "16", "--tp", "4", "--mx", "2",
     "--optimize-split"],
    ["explain", "fsdp", "--model", "xxl", "--limit", "95GB"],
    ["explain", "memory", "--model", "xxl", "--fsdp", "8", "--tokens", "4096"],
    ["explain", "memory", "--model", "llama3-8b", "--tokens", "4096", "--recompute", "full"],  # P_c: saved copies
    ["explain", "memory", "--model", "mixtral-8x7b", "--tokens", "4096", "--ep", "2", "--fsdp", "4"],  # P_e, E_p
]
FUNCTIONS = {"min", "max", "sqrt", "ceiling", "floor", "mod", "if", "else"}  # names in formulas that are no letter


@pytest.mark.parametrize("args", EXPLAINED)
def test_explain_defines_every_letter_its_formulas_use(args):
    """Each name in a step's formula (text) has a legend line saying what it is, in JSON, text and LaTeX."""
    out = run_json(*args, "--json")
    legend = {row["symbol"]: row for row in out["legend"]}
    names = {name for s in out["steps"] for name in re.findall(r"[A-Za-z_][A-Za-z_0-9]*", s["formula"] or "")}
    assert names - FUNCTIONS and names - FUNCTIONS <= set(legend)
    assert all(row["meaning"] for row in legend.values())
    # letters given values (not the options tp = 1, ep = 2 the values also name)
    given = r"\b([A-Z][A-Za-z_0-9]*|[a-z](?:_\w+)?) = "
    shown = {name for s in out["steps"] for name in re.findall(given, s["values"])}
    assert shown and shown <= set(legend)  # no value printed for a letter no formula uses
    text = runner.invoke(app, args).stdout
    latex = runner.invoke(app, [*args, "--format", "latex"]).stdout
    assert "Letters:" in text and "Letters:" in latex
    for name, row in legend.items():
        assert f"- {name}: " in text and f"${row['latex']}$: " in latex


@pytest.mark.parametrize("args", EXPLAINED)
def test_explain_latex_sets_a_name_of_several_letters_as_one(args):
    """grads, T_math, M_max: upright or text, never a product of italic letters (g r a d s)."""
    out = run_json(*args, "--json")
    for latex in [s["latex"] for s in out["steps"] if s["latex"]] + [row["latex"] for row in out.get("legend", [])]:
        bare = re.sub(r"\\(text|mathrm)\{[^}]*\}", "", latex)
        bare = re.sub(r"\\[A-Za-z]+", "", bare)  # commands: \frac, \alpha, \left
        assert not re.search(r"[A-Za-z]{2,}", bare), latex


def test_explain_memory_legend_gives_each_letters_value():
    """xxl at 4,096 tokens, 8 FSDP shards: P = 219,848,638,464 and A = 17,547,264 B per token x 4,096 tokens."""
    legend = {row["symbol"]: row["meaning"]
              for row in run_json(*EXPLAINED[2], "--json")["legend"]}
    assert "219,848,638,464 parameters" in legend["P"]
    assert f"{17_547_264 * 4096:,} B" in legend["A"]
    assert "FSDP" in legend["N"] and legend["N"].endswith("= 8")
    assert "U" not in legend  # no weight copies: U stands in no formula
    batch = {row["symbol"]: row["meaning"] for row in run_json(*EXPLAINED[0], "--json")["legend"]}
    assert batch["N"].endswith("= 64") and batch["C"].endswith("FLOP/s") and batch["W"].endswith("B/s")


def test_tables_fold_at_80_columns_and_never_cut_a_name():
    """COLUMNS=80 when piped: every line fits and nothing is cut with an ellipsis (long names fold)."""
    import os

    env = {**os.environ, "COLUMNS": "80"}
    out = subprocess.run([sys.executable, "-m", "costmodel", "comm", "--model", "llama3-70b", "--hardware", "h100-sxm",
                          "--tp", "8", "--fsdp", "8", "--tokens", "8192"], capture_output=True, text=True, env=env,
                         check=True).stdout
    assert "…" not in out and max(len(line) for line in out.splitlines()) <= 80


@pytest.mark.parametrize("command, load, example", [
    ("models", "load_model", "llama3-8b"), ("recipes", "load_recipe", "megatron"),
    ("frameworks", "load_framework", "nanotron"), ("hardware", "load_hardware", "h100-sxm"),
])
def test_template_round_trips(tmp_path, command, load, example):
    """`cost4d <catalog> --template` prints a commented TOML file that loads back as the example spec."""
    from costmodel.specs import load as loader

    text = subprocess.run([sys.executable, "-m", "costmodel", command, "--template"], capture_output=True, text=True,
                          check=True).stdout
    assert text.startswith("#")
    path = tmp_path / "mine.toml"
    path.write_text(text)
    mine, shipped = getattr(loader, load)(str(path)), getattr(loader, load)(example)
    assert mine.model_dump(exclude={"name"}) == shipped.model_dump(exclude={"name"})


def test_numeric_path_loads_one_command_module_and_no_heavy_library():
    """Start-up (issue 14): importing the CLI imports no command module; `memory` piped builds its own module's
    commands only, and imports neither rich (plain output) nor sympy, numpy or torch."""
    code = ("import sys\nimport costmodel.cli\n"
            "before = sorted(m for m in sys.modules if m.startswith('costmodel.cli.'))\n"
            "try:\n    costmodel.cli.main(['memory', '--model', 'xxl'])\nexcept SystemExit:\n    pass\n"
            "after = sorted(m for m in sys.modules if m.startswith('costmodel.cli.'))\n"
            "heavy = sorted(m for m in ('rich', 'sympy', 'numpy', 'torch', 'matplotlib') if m in sys.modules)\n"
            "sys.stderr.write(repr((before, after, heavy)))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    before, after, heavy = eval(done.stderr)  # noqa: S307 - our own repr
    assert before == [] and heavy == []
    assert set(after) == {"costmodel.cli.calc", "costmodel.cli.layout", "costmodel.cli.options"}
    assert "219,848,638,464" in done.stdout


def test_help_lists_every_command_in_order():
    from costmodel.cli import COMMANDS

    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    import re

    listed = [name for name in re.findall(r"^\W (\S+) ", result.stdout, re.M) if not name.startswith("-")]
    assert listed == list(COMMANDS)


def _every_command(command, path=()):
    """(path, click command) of the app and every command and sub-group beneath it."""
    yield path, command
    for name in getattr(command, "commands", {}):
        yield from _every_command(command.commands[name], (*path, name))


@pytest.mark.slow
def test_help_shows_what_each_option_takes():
    """A flag takes no value: no help page prints `<bool>` beside one (typer >= 0.2x does by default); a valued
    option names what it takes (NAME|FILE, SIZE, its choices), never a bare Python type (`<str>`, `<path>`)."""
    import re

    import typer.main

    pages = 0
    for path, _ in _every_command(typer.main.get_command(app)):
        result = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "160"})
        assert result.exit_code == 0, path
        assert "<bool>" not in result.stdout, path
        assert not re.search(r"<(str|path|int|float|text|integer)>", result.stdout), path
        pages += 1
    assert pages > 30
    assert "NAME|FILE" in runner.invoke(app, ["memory", "--help"], env={"COLUMNS": "160"}).stdout


def test_unknown_command_suggests_the_close_one():
    result = cost4d("memroy", "--model", "xxl")
    assert result.returncode == 2 and "No such command 'memroy'" in result.stderr and "'memory'" in result.stderr


@pytest.mark.slow
def test_shell_completion_is_on(monkeypatch, capsys):
    """`--show-completion SHELL` prints the script; the script's protocol completes commands and options."""
    from costmodel.cli import main

    monkeypatch.setenv("_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION", "1")
    with pytest.raises(SystemExit) as ended:
        main(["--show-completion", "bash"])
    assert ended.value.code == 0 and "_COST4D_COMPLETE=complete_bash" in capsys.readouterr().out
    env = {**__import__("os").environ, "_COST4D_COMPLETE": "complete_bash", "COMP_WORDS": "cost4d memory --mo",
           "COMP_CWORD": "2"}
    code = "from costmodel.cli import main; main([])"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert done.returncode == 0 and done.stdout.split() == ["--model", "--moe-imbalance"]
    env.update(COMP_WORDS="cost4d so", COMP_CWORD="1")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert done.stdout.split() == ["solve"]
    for words, candidates in (("cost4d memory --schedule ", ["gpipe", "1f1b", "interleaved", "zb-h1"]),
                              ("cost4d memory --model llama3-", ["llama3-8b", "llama3-70b", "llama3-405b"]),
                              ("cost4d step --hardware h1", ["h100-96gb-500w", "h100-sxm"]),
                              ("cost4d memory --recompute e", ["every:"]),
                              ("cost4d memory --framework n", ["nanotron"]),
                              ("cost4d solve batch --overlap ", ["sum", "max"]),
                              ("cost4d plan --model llama3-4", ["llama3-405b"]),  # postponed annotations too
                              ("cost4d plot pipeline --schedule z", ["zb-h1"]),
                              ("cost4d bench collectives --backend ", ["gloo", "nccl"]),
                              ("cost4d bench gpu --device c", ["cuda", "cuda:", "cpu"]),
                              ("cost4d plot pipeline --out ", [])):  # FILE.png|svg names no values
        env.update(COMP_WORDS=words, COMP_CWORD=str(len(words.split()) - (not words.endswith(" "))))
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
        assert done.stdout.split() == candidates, words  # option values complete too


def test_fish_completion_gives_one_line_per_candidate():
    """fish reads each line as a candidate, value TAB help: a help text wrapped at the terminal's width (typer
    renders it through rich) made bogus candidates of its second lines."""
    env = {**__import__("os").environ, "_COST4D_COMPLETE": "complete_fish", "COLUMNS": "80",
           "_TYPER_COMPLETE_ARGS": "cost4d memory --", "_TYPER_COMPLETE_FISH_ACTION": "get-args"}
    done = subprocess.run([sys.executable, "-c", "from costmodel.cli import main; main([])"], capture_output=True,
                          text=True, env=env)
    lines = done.stdout.splitlines()
    assert done.returncode == 0 and len(lines) > 20 and all(line.startswith("--") and "\t" in line for line in lines)


def test_every_command_takes_plain():
    """--plain on the command line of any command (and before it): plain tables even on a terminal
    (tests/test_tables.py checks the output on a pseudo-terminal)."""
    for args in (["models", "--plain"], ["--plain", "models"], ["solve", "fsdp", "--model", "xxl", "--limit", "95GB",
                                                                "--plain"], ["homework", "list", "--plain"],
                 ["solve", "--plain", "fsdp", "--model", "xxl", "--limit", "95GB"], ["homework", "--plain", "list"],
                 ["explain", "--plain", "fsdp", "--model", "xxl", "--limit", "95GB"]):
        result = runner.invoke(app, args)
        assert result.exit_code == 0, (args, result.output)
    from costmodel.report import common

    runner.invoke(app, ["models"])
    assert common.PLAIN is False  # reset by the next invocation


def test_spec_text_prints_as_written_not_as_markup(tmp_path):
    """A model named '[red]x[/]' and a source citing '[nccl]' are text, not rich styles, in every table."""
    spec = tmp_path / "m.toml"
    spec.write_text('kind = "transformer"\nname = "[red]x[/]"\nhidden = 64\nffn_hidden = 128\nlayers = 2\nheads = 4\n'
                    'kv_heads = 4\nvocab = 100\nseq_len = 16\n')
    for command in (["memory", "--model", str(spec), "--tokens", "16"],
                    ["step", "--model", str(spec), "--hardware", "h100-sxm", "--tokens", "16"],
                    ["flops", "--model", str(spec), "--tokens", "16"]):
        result = runner.invoke(app, command)
        assert result.exit_code == 0, result.output
        assert "[red]x[/]" in result.output, command
    a100 = runner.invoke(app, ["step", "--model", "llama3-8b", "--hardware", "a100-80gb", "--tokens", "8192"])
    assert "([nccl] above)" in a100.output


def test_step_says_whether_the_layout_fits_and_prints_tiny_times():
    """A step on a layout that does not fit says so (its time is no answer); a microsecond part is not 0.0000
    (one token of GPT-2: its matmuls take about a microsecond, its optimizer step about a millisecond)."""
    huge = runner.invoke(app, ["step", "--model", "llama3-8b", "--hardware", "h100-sxm", "--tokens", "1048576"])
    assert "does NOT fit" in huge.output
    fine = runner.invoke(app, ["step", "--model", "llama3-8b", "--hardware", "h100-sxm", "--tp", "8", "--tokens", "8192"])
    assert ": fits" in fine.output
    tiny = runner.invoke(app, ["step", "--model", "gpt2", "--hardware", "h100-sxm", "--tokens", "1"])
    matmul_row = next(line for line in tiny.output.splitlines() if line.startswith("matmul "))
    assert "0.0000" not in matmul_row and "e-06" in matmul_row


def test_a_notebook_goes_to_an_ipynb_file(tmp_path):
    result = runner.invoke(app, ["homework", "xxl", "--format", "ipynb", "--out", str(tmp_path / "x.txt")])
    assert ".ipynb" in str(result.exception) and not (tmp_path / "x.txt").exists()  # main() turns it into exit 2


@pytest.mark.parametrize("args", [
    ["solve", "fsdp", "--model", "xxl", "--limit", "95GB"],
    ["solve", "batch", "--model", "xxl", "--hardware", "tpu-v5p", "--fsdp", "16", "--tp", "4", "--mx", "2"],
    ["step", "--model", "llama3-8b", "--hardware", "h100-sxm", "--tp", "8", "--tokens", "8192"],
    ["comm", "--model", "xxl", "--hardware", "tpu-v5p", "--fsdp", "16", "--tokens", "4096"],
])
def test_the_other_numeric_commands_import_no_heavy_library(args):
    """Issue 14's numeric commands beside memory: no sympy, numpy, torch or matplotlib (solve batch once imported
    sympy through the derivations' module for one sentence)."""
    code = ("import sys\nimport costmodel.cli\n"
            f"try:\n    costmodel.cli.main({args!r})\nexcept SystemExit:\n    pass\n"
            "sys.stderr.write(repr(sorted(m for m in ('sympy', 'numpy', 'torch', 'matplotlib') if m in sys.modules)))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stderr.strip().splitlines()[-1] == "[]"


@pytest.mark.parametrize("catalog, option, load", [
    ("models", "--model", "load_model"), ("recipes", "--recipe", "load_recipe"),
    ("frameworks", "--framework", "load_framework"),
])
def test_a_catalog_rows_spec_saved_as_a_file_loads_back_as_the_same_spec(catalog, option, load, tmp_path):
    """`cost4d models|recipes|frameworks --json`: each row's `spec` is what a file holds, so a user can save
    one, edit it, and pass it back (a derived figure beside the fields would be refused as an unknown one)."""
    from costmodel.specs import load as loader

    for row in run_json(catalog)[catalog]:
        if (catalog, row["name"]) == ("frameworks", "exact"):
            continue  # adds nothing, and a file named so is refused (its terms would be dropped)
        path = tmp_path / f"{row['name']}.json"
        path.write_text(json.dumps(row["spec"]))
        assert getattr(loader, load)(str(path)) == getattr(loader, load)(row["name"]), (catalog, row["name"])
    assert runner.invoke(app, ["memory", "--model", "llama3-8b", option, str(path), "--tokens", "8192"]).exit_code == 0


@pytest.mark.slow
def test_commands_about_one_layout_take_the_same_layout_options():
    """step takes every layout option memory does (--hsdp-group, --reshard, ...); solve fsdp and explain fsdp
    every one but those that set the unknown --fsdp; explain none that changes no term it derives (--grad-accum)."""
    from costmodel.cli.explain import EXPLAINED
    from costmodel.cli.layout import MEMORY
    from costmodel.cli.solve import FSDP_SOLVE

    def flags(*command):
        text = subprocess.run([sys.executable, "-m", "costmodel", *command, "--help"], capture_output=True, text=True,
                              env={**__import__("os").environ, "COLUMNS": "200"}).stdout
        return set(re.findall(r"--[a-z][a-z-]*", text))

    assert {"--" + name.replace("_", "-") for name in MEMORY} <= flags("step")
    assert {"--" + name.replace("_", "-") for name in FSDP_SOLVE} <= flags("solve", "fsdp")
    assert {"--" + name.replace("_", "-") for name in FSDP_SOLVE if name in EXPLAINED} <= flags("explain", "fsdp")
    assert "--grad-accum" not in flags("explain", "fsdp") | flags("explain", "memory")
    assert "--hsdp-group" not in flags("solve", "fsdp") and {"--seq", "--cp-kind", "--tp-kv"} <= flags("solve", "fsdp")


@pytest.mark.parametrize("command", [["memory"], ["step"], ["solve", "fsdp"], ["explain", "batch"], ["plan"],
                                     ["bench", "collectives"], ["plot", "pipeline"], ["validate"]])
def test_help_at_80_columns_cuts_no_word(command):
    """--help at 80 columns: no cell cut with an ellipsis, no choice list folded mid-word (long lists of choices
    show a name, and the help lists them)."""
    import os

    text = subprocess.run([sys.executable, "-m", "costmodel", *command, "--help"], capture_output=True, text=True,
                          env={**os.environ, "COLUMNS": "80"}).stdout
    assert "…" not in text and max(map(len, text.splitlines())) <= 80
    assert "interleav\n" not in text and not re.search(r"\|[a-z-]*-?\s*│\s*\n", text)


@pytest.mark.parametrize("command", [
    ["solve", "fsdp", "--model", "xxl", "--limit", "95GB"],
    ["explain", "batch", "--model", "xxl", "--hardware", "tpu-v5p", "--fsdp", "16", "--tp", "4", "--mx", "2", "--what-if"],
    ["homework", "xxl", "--answers"],
    ["solve", "ep", "--model", "mixtral-8x7b", "--fsdp", "8", "--zero", "1", "--pp", "4", "--tokens", "4096",
     "--recompute", "full", "--recipe", "megatron", "--limit", "40GB"],
])
@pytest.mark.slow
def test_prose_wraps_at_80_columns(command):
    """Prose answers wrap at spaces to the width (not left to the terminal, which breaks words)."""
    import os

    done = subprocess.run([sys.executable, "-m", "costmodel", *command], capture_output=True, text=True,
                          env={**os.environ, "COLUMNS": "80"})
    assert done.returncode == 0 and max(map(len, done.stdout.splitlines())) <= 80, done.stderr
