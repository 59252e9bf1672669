"""`cost4d plan` (issue 12): every reported layout's numbers are what `memory` and `step` give for it,
the ranking is by tokens/s, and nothing better was pruned away."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path

import pytest

from costmodel.cost.evaluate import evaluate_layout
from costmodel.errors import CostModelError
from costmodel.solve.plan import plan
from costmodel.solve.plan_candidates import candidates
from costmodel.specs.framework_catalog import FRAMEWORKS
from costmodel.specs.layout import Layout
from costmodel.specs.load import load_hardware, load_model, load_recipe

H100 = load_hardware("h100-sxm")
SEARCHES = [
    pytest.param("llama3-70b", "cs336", None, 512, 4 * 2**20, 8192, 20, marks=pytest.mark.slow),
    ("llama3-8b", "cs336", "torchtitan", 64, 2**20, 8192, 20),
    ("nanotron-1b", "megatron", "nanotron", 16, 2**20, 4096, 20),
    # a sequence shorter than the model's (32,768): each row carries --seq, so `step` reproduces it
    ("mixtral-8x7b", "megatron", "megatron", 64, 2**20, 4096, 8),
    pytest.param("llama3-405b", "megatron", "megatron", 4096, 16 * 2**20, 8192, 20, marks=pytest.mark.slow),
]


@pytest.mark.slow
@pytest.mark.parametrize("model, recipe, framework, gpus, tokens, seq, top", SEARCHES)
def test_reported_layouts_equal_memory_and_step(model, recipe, framework, gpus, tokens, seq, top):
    spec, rec = load_model(model), load_recipe(recipe)
    frame = FRAMEWORKS[framework] if framework else None
    result = plan(spec, rec, H100, devices=gpus, global_tokens=tokens, seq=seq, framework=frame, top=top)
    assert len(result.best) == min(top, result.feasible) > 0
    rates = [p.tokens_per_s for p in result.best]
    assert rates == sorted(rates, reverse=True)
    for p in result.best:
        layout = Layout(**p.layout)
        assert layout.devices == gpus and layout.tokens * layout.m * layout.grad_accum * layout.data == tokens
        cost = evaluate_layout(spec, rec, layout, H100, framework=frame)
        assert p.memory_bytes == pytest.approx(cost.memory_bytes, rel=1e-9)
        assert p.step_s == pytest.approx(cost.step.step_s, rel=1e-9)
        assert p.tokens_per_s == pytest.approx(cost.step.tokens_per_s, rel=1e-9)
        assert p.memory_bytes <= result.capacity_bytes


@pytest.mark.slow
def test_nothing_better_was_pruned():
    """Every candidate of a small search, one layout at a time through the scalar path: the best that
    fits is the planner's first."""
    spec, rec, frame = load_model("nanotron-1b"), load_recipe("megatron"), FRAMEWORKS["nanotron"]
    seq, tokens, gpus = 4096, 2**20, 16
    result = plan(spec, rec, H100, devices=gpus, global_tokens=tokens, seq=seq, framework=frame, top=1)
    best = None
    for (tp, pp, cp, dp, fsdp, mbs, steps, _), recompute, kind in itertools.product(
            candidates(gpus, 16, tokens // seq), ("none", "selective", "full"), ("ring", "a2a")):
        for schedule, chunks in (("1f1b", 1), ("interleaved", 2), ("interleaved", 4)):
            if schedule == "interleaved" and (pp == 1 or steps % pp or 16 % (pp * chunks)):
                continue
            try:
                layout = Layout(tp=tp, sp=tp > 1, pp=pp, cp=cp, dp=dp, fsdp=fsdp, zero=1, tokens=mbs * seq,
                                recompute=recompute, schedule=schedule if pp > 1 else "1f1b", cp_kind=kind,
                                chunks=chunks if pp > 1 else 1, microbatches=steps if pp > 1 else None,
                                grad_accum=1 if pp > 1 else steps)
                cost = evaluate_layout(spec, rec, layout, H100, framework=frame)
            except (CostModelError, ValueError):
                continue
            if cost.memory_bytes <= result.capacity_bytes and (best is None or cost.step.step_s < best):
                best = cost.step.step_s
    assert result.best[0].step_s == pytest.approx(best, rel=1e-12)


@pytest.mark.slow
def test_plan_cli_json_and_the_command_reproduces_it():
    out = subprocess.run([sys.executable, "-m", "costmodel", "plan", "--model", "llama3-8b", "--hardware", "h100-sxm",
                          "--gpus", "16", "--global-batch", str(2**20), "--seq", "8192", "--framework", "megatron",
                          "--top", "3", "--json"], capture_output=True, text=True, check=True)
    data = json.loads(out.stdout)
    assert data["framework"] == "megatron" and len(data["layouts"]) == 3 and data["why"]
    assert data["considered"] == data["feasible"] + sum(data["rejected"].values())
    first = data["layouts"][0]
    again = subprocess.run([sys.executable, "-m", "costmodel", *first["command"].split()[1:], "--json"],
                           capture_output=True, text=True, check=True)
    assert json.loads(again.stdout)["step_s"] == pytest.approx(first["step_s"], rel=1e-9)


@pytest.mark.parametrize("args, needle", [
    (["--global-batch", "1000", "--seq", "4096"], "not a whole number"),
    (["--global-batch", str(2**20), "--seq", "4096", "--gpus", "3"], "no layout"),
    (["--global-batch", str(2**20), "--explain", "9", "--top", "3"], "beyond --top"),
])
def test_plan_refuses_in_one_line(args, needle):
    base = [sys.executable, "-m", "costmodel", "plan", "--model", "nanotron-1b", "--hardware", "h100-sxm"]
    if "--gpus" not in args:
        base += ["--gpus", "8"]
    out = subprocess.run(base + args, capture_output=True, text=True)
    assert out.returncode == 2 and needle in out.stderr and len(out.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_fp8_where_the_spec_has_no_fp8_model_is_one_line():
    for command in (["plan", "--gpus", "64", "--global-batch", str(2**20)], ["step", "--tokens", "8192"]):
        out = subprocess.run([sys.executable, "-m", "costmodel", *command, "--model", "llama3-8b", "--hardware",
                              "a100-80gb", "--precision", "fp8"], capture_output=True, text=True)
        assert out.returncode == 2 and "no fp8 step model" in out.stderr


@pytest.mark.slow
@pytest.mark.parametrize("suffix", ["png", "svg"])
def test_plan_plot(tmp_path, suffix):
    path = tmp_path / f"plan.{suffix}"
    subprocess.run([sys.executable, "-m", "costmodel", "plan", "--model", "llama3-8b", "--hardware", "h100-sxm",
                    "--gpus", "16", "--global-batch", str(2**20), "--seq", "8192", "--top", "2", "--plot", str(path)],
                   capture_output=True, text=True, check=True)
    assert path.stat().st_size > 10_000
    if suffix == "svg":
        text = path.read_text()
        assert "peak memory per device (GiB)" in text and "predicted tokens/s" in text and "Pareto front" in text


def test_pareto_front():
    import numpy as np

    from costmodel.solve.plan import pareto

    memory = np.array([5.0, 3.0, 4.0, 6.0, 3.0])
    rates = np.array([10.0, 4.0, 8.0, 9.0, 2.0])
    assert sorted(pareto(memory, rates).tolist()) == [0, 1, 2]


def test_plan_rows_carry_phase_verdict_and_range():
    out = subprocess.run([sys.executable, "-m", "costmodel", "plan", "--model", "nanotron-3b", "--hardware", "h100-sxm",
                          "--gpus", "16", "--global-batch", str(2**20), "--seq", "4096", "--framework", "nanotron",
                          "--top", "3", "--json"], capture_output=True, text=True, check=True)
    data = json.loads(out.stdout)
    for row in data["layouts"]:
        assert row["peak_phase"] in ("forward-backward", "optimizer step")
        assert row["memory_verdict"] in ("fits", "tight", "oom")
        assert row["step_s_low"] < row["step_s"] < row["step_s_high"]
    assert data["why"].startswith("#1 and #2 tie") or "faster" in data["why"]


def test_tpu_search_places_axes_on_the_torus():
    """On a TPU the search adds (M_X, M_Y), the torus axes the data and TP axes span (the layout rules keep
    those that fit the torus, 3 axes on v5p, and the axes' sizes): a reported layout's numbers equal `step`'s
    with its --mx/--my, and its command line runs."""
    from costmodel.solve.plan import command
    from costmodel.solve.plan_candidates import torus_splits

    v5p = load_hardware("tpu-v5p")
    assert len(torus_splits(v5p)) == 9 and torus_splits(H100) == [(1, 1)]
    spec, rec = load_model("llama3-8b"), load_recipe("cs336")
    result = plan(spec, rec, v5p, devices=64, global_tokens=2**20, seq=8192, top=20)
    assert {(p.layout["mx"], p.layout["my"]) for p in result.best} - {(1, 1)}
    for p in result.best:
        cost = evaluate_layout(spec, rec, Layout(**p.layout), v5p)
        assert p.step_s == pytest.approx(cost.step.step_s, rel=1e-9)
        assert p.layout["mx"] + p.layout["my"] <= 3 or p.layout["tp"] == 1
    line = command("llama3-8b", "tpu-v5p", result.best[0].layout, recipe="cs336", framework=None, precision="bf16")
    again = subprocess.run([sys.executable, "-m", "costmodel", *line.split()[1:], "--json"], capture_output=True,
                           text=True, check=True)
    assert json.loads(again.stdout)["step_s"] == pytest.approx(result.best[0].step_s, rel=1e-9)


@pytest.mark.slow
def test_readme_ultrascale_ranking_figure():
    """The README's 'in the measured top 3 in K of N cells' is what benchmarks/plan_vs_ultrascale.py gives."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    if not (root.parent / "shared" / "data" / "training-runs").is_dir():
        pytest.skip("../shared/data is beside the checkout (CI links it)")
    sys.path.insert(0, str(root / "benchmarks"))
    import plan_vs_ultrascale

    cells = plan_vs_ultrascale.ranking()
    hits = sum(c[2] <= 3 for c in cells)
    assert f"measured top 3 in {hits} of {len(cells)} cells" in " ".join((root / "README.md").read_text().split())


def test_arrays_see_the_heaviest_stage_past_dense_first_layers():
    """DeepSeek-V3's first 3 layers are dense: with 32 stages of 1-2 layers the heaviest holds two expert
    layers (stage 2), not the second stage (a dense and an expert layer); the planner's arrays find it. (The exact
    accounting: Megatron-core refuses 61 layers over 32 or 16 stages.)"""
    import numpy as np

    from costmodel.cost.evaluate import evaluate
    from costmodel.cost.point import Point
    from costmodel.cost.shape import Shape

    spec, rec, h200, frame = load_model("deepseek-v3"), load_recipe("megatron"), load_hardware("h200"), None
    layouts = [dict(pp=pp, fsdp=8, ep=8, zero=1, recompute="full", microbatches=128, tokens=4096) for pp in (32, 16)]
    scalar = [evaluate_layout(spec, rec, Layout(**layout), h200, framework=frame).memory_bytes for layout in layouts]
    columns = {k: np.array([layout[k] for layout in layouts]) for k in ("pp", "fsdp", "ep", "microbatches", "tokens")}
    arrays = evaluate(Shape.of(spec), rec, Point(**columns, zero=1, recompute="full", split="even"), h200,
                      framework=frame)
    assert list(np.asarray(arrays.memory_bytes)) == pytest.approx(scalar, rel=1e-12)


def test_tpu_search_keeps_to_what_the_torus_axes_hold():
    """v5p's largest slice is 16 x 20 x 28: a 64-way data axis cannot lie along one torus axis (M_X = 1)."""
    from costmodel.solve.plan_candidates import _torus_reach

    v5p = load_hardware("tpu-v5p")
    assert max(data for data, _ in _torus_reach(v5p, 1, 1)) == 28
    result = plan(load_model("llama3-8b"), load_recipe("cs336"), v5p, devices=64, global_tokens=2**20, seq=8192, top=20)
    assert all(p.layout["mx"] > 1 for p in result.best if p.layout["dp"] * p.layout["fsdp"] > 28)


def test_why_names_every_part_of_the_step():
    """llama3-8b on 16 GPUs: fsdp 16 beats dp 2 x fsdp 8 by its optimizer step alone (the same GEMMs and
    attention, data traffic hidden either way, half the parameters per device to update), and the one-line
    reason says so rather than naming a part that differs by nothing."""
    from costmodel.solve.plan import WHY_PARTS, why

    found = plan(load_model("llama3-8b"), load_recipe("cs336"), H100, devices=16, global_tokens=2**20, seq=8192,
                 top=2).best
    assert [(row.layout["dp"], row.layout["fsdp"]) for row in found] == [(1, 16), (2, 8)]
    assert why(*found).endswith("the largest difference is the optimizer step: "
                                f"{found[1].parts['optimizer_s'] - found[0].parts['optimizer_s']:.3f} s less per step")
    assert set(WHY_PARTS) | {"data_comm_s"} == set(found[0].parts)  # every part the step adds is named


def test_the_named_parts_and_the_bubble_add_up_to_the_step():
    """What `why` compares is the whole step: the named parts and the bubble's seconds sum to step_s, pipelines
    and framework time included."""
    from costmodel.solve.plan import WHY_PARTS
    from costmodel.specs.load import load_framework

    rows = [row for model, framework, seq in (("llama3-70b", "megatron", 8192), ("nanotron-1b", "nanotron", 4096))
            for row in plan(load_model(model), load_recipe("megatron"), H100, devices=64, global_tokens=2**21, seq=seq,
                            top=5, framework=load_framework(framework)).best]
    assert any(row.bubble > 0 for row in rows) and any(row.parts["framework_s"] > 0 for row in rows)
    for row in rows:
        assert sum(row.parts[k] for k in WHY_PARTS) + row.bubble_s == pytest.approx(row.step_s, rel=1e-12)


@pytest.mark.slow
def test_memory_sure_keeps_only_layouts_whose_band_fits():
    """--memory sure: the capacity check uses the framework's band's high end, so every row's verdict is 'fits'
    and more layouts are rejected by memory than with the default (likely)."""
    import json
    import subprocess
    import sys

    args = [sys.executable, "-m", "costmodel", "plan", "--model", "llama3-8b", "--hardware", "h100-sxm", "--gpus", "16",
            "--global-batch", "1048576", "--seq", "8192", "--framework", "megatron", "--top", "20", "--json"]
    likely, sure = (json.loads(subprocess.run(args + extra, capture_output=True, text=True, check=True).stdout)
                    for extra in ([], ["--memory", "sure"]))
    assert all(row["memory_verdict"] == "fits" for row in sure["layouts"])
    assert sure["feasible"] < likely["feasible"] and sure["capacity_bytes"] < likely["capacity_bytes"]


@pytest.mark.slow
def test_plan_searches_the_frameworks_recompute_modes():
    """torchtitan recomputes none, full or by its op policy (every:K is not searched), never Megatron's selective;
    the exact accounting searches none, selective and full; op is left out for blocks it is not modelled for."""
    spec, rec = load_model("llama3-8b"), load_recipe("fsdp2")
    titan = plan(spec, rec, H100, devices=8, global_tokens=2**19, seq=8192, framework=FRAMEWORKS["torchtitan"], top=10_000)
    assert {p.layout["recompute"] for p in titan.best} == {"none", "full", "op"}
    exact = plan(spec, rec, H100, devices=8, global_tokens=2**19, seq=8192, top=10_000)
    assert {p.layout["recompute"] for p in exact.best} == {"none", "selective", "full"}
    moe = plan(load_model("mixtral-8x7b"), load_recipe("megatron"), H100, devices=64, global_tokens=2**20, seq=4096,
               framework=FRAMEWORKS["torchtitan"], top=10_000)
    assert moe.best and {p.layout["recompute"] for p in moe.best} <= {"none", "full"}
    ffn = plan(load_model("xxl"), load_recipe("cs336"), H100, devices=64, global_tokens=2**18, seq=1024, top=10_000)
    assert {p.layout["recompute"] for p in ffn.best} == {"none", "full"}  # selective drops an attention core it has not


@pytest.mark.slow
def test_plan_takes_kernels_and_its_commands_reproduce_them():
    """--kernels fused under torchtitan (a compiled model): the search prices fused memory-bound ops, says so, and
    each row's `cost4d step` command carries --kernels fused and gives the row's step time."""
    base = [sys.executable, "-m", "costmodel", "plan", "--model", "llama3-8b", "--hardware", "h100-sxm", "--gpus", "8",
            "--framework", "torchtitan", "--seq", "8192", "--global-batch", "524288", "--top", "2", "--json"]
    fused, eager = (json.loads(subprocess.run([*base, *extra], capture_output=True, text=True, check=True).stdout)
                    for extra in (["--kernels", "fused"], []))
    assert (fused["kernels"], eager["kernels"]) == ("fused", "eager")
    assert fused["layouts"][0]["tokens_per_s"] > eager["layouts"][0]["tokens_per_s"]
    row = fused["layouts"][0]
    assert row["command"].endswith("--framework torchtitan --kernels fused")
    args = row["command"].split()[2:]  # after "cost4d step"
    out = json.loads(subprocess.run([sys.executable, "-m", "costmodel", "step", *args, "--json"], capture_output=True,
                                    text=True, check=True).stdout)
    assert out["kernels"] == "fused" and out["step_s"] == pytest.approx(row["step_s"], rel=1e-9)


def test_tp_degrees_that_divide_the_heads_are_searched_with_kv_heads_copied():
    """PaLM 540B (48 heads, one KV head) on 6,144 TPU v4 chips: TP 3, 6, 12, 24 and 48 divide the heads and the
    chips, so they are searched beside the powers of two; the exact profile copies the KV head to the TP ranks that
    read it (--tp-kv replicate), and each reported row equals `step` and `memory` on its own layout."""
    from costmodel.solve.plan_candidates import tp_degrees

    assert tp_degrees(6144, 48) == [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64]
    assert tp_degrees(64, 32) == [1, 2, 4, 8, 16, 32, 64]
    spec, rec, tpu = load_model("palm-540b"), load_recipe("megatron"), load_hardware("tpu-v4")
    result = plan(spec, rec, tpu, devices=6144, global_tokens=2048 * 2048, seq=2048, top=5)
    assert result.best and all(p.layout["tp"] % 3 == 0 for p in result.best)  # 6,144 = 3 x 2,048
    for p in result.best:
        layout = Layout(**p.layout)
        assert layout.tp_kv == "replicate"
        cost = evaluate_layout(spec, rec, layout, tpu)
        assert p.step_s == pytest.approx(cost.step.step_s, rel=1e-9)
        assert p.memory_bytes == pytest.approx(cost.memory_bytes, rel=1e-9)


def test_reproduce_commands_quote_spec_paths_with_spaces(tmp_path):
    """A spec file's path with a space or a shell metacharacter is quoted in each 'Reproduce a row' command, so that
    the printed lines (wrapped, ' \\' continued) give a shell the very arguments the user gave; plain ones stay bare."""
    import shlex

    from typer.testing import CliRunner

    from costmodel.cli import app
    from costmodel.specs.catalog import BUILTIN_MODELS

    (tmp_path / "my models").mkdir()
    model = tmp_path / "my models" / "x.json"
    model.write_text(json.dumps(dict(BUILTIN_MODELS["nanotron-1b"], name="my-1b")))
    hardware = tmp_path / "hw (mine).toml"
    hardware.write_text('extends = "h100-sxm"\nname = "my-h100"\n')
    args = ["plan", "--model", str(model), "--hardware", str(hardware), "--gpus", "8", "--global-batch", str(2**20),
            "--seq", "4096", "--top", "2"]
    result = CliRunner().invoke(app, args, terminal_width=60)
    assert result.exit_code == 0, result.output
    printed = result.stdout.split("Reproduce a row:\n")[1].split("# 2\n")[0].removeprefix("# 1\n")
    argv = shlex.split(printed.replace(" \\\n", " "))
    assert argv[:8] == ["cost4d", "step", "--model", str(model), "--hardware", str(hardware), "--recipe", "cs336"]
    assert len(printed.splitlines()) > 1  # wrapped at 60 columns, and still one command to a shell:
    shell = subprocess.run(["sh", "-c", "cost4d() { printf '%s\\n' cost4d \"$@\"; }\n" + printed],
                           capture_output=True, text=True, check=True)
    assert shell.stdout.splitlines() == argv
    data = json.loads(CliRunner().invoke(app, [*args, "--json"]).stdout)
    assert shlex.split(data["layouts"][0]["command"]) == argv
    assert "--recipe cs336 " in data["layouts"][0]["command"]  # a plain argument prints as typed


@pytest.mark.parametrize("units, unit, size", [(None, "GB", 1e9), ("iec", "GiB", 2**30), ("si", "GB", 1e9)])
def test_plan_prints_memory_in_the_units_it_names(units, unit, size):
    """The table's memory column names its unit in its header, and --units picks GB (1e9 B, the default, as
    `memory`, `comm` and `step` print) or GiB (2^30 B); the memory rule's limit follows. JSON stays bytes."""
    from typer.testing import CliRunner

    from costmodel.cli import app

    args = ["plan", "--model", "nanotron-1b", "--hardware", "h100-sxm", "--gpus", "8", "--global-batch", str(2**20),
            "--seq", "4096", "--top", "3"] + (["--units", units] if units else [])
    data = json.loads(CliRunner().invoke(app, [*args, "--json"]).stdout)
    result = CliRunner().invoke(app, args, terminal_width=200)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    header = next(line for line in lines if line.startswith("#  tokens/s"))
    assert header.split()[3:5] == ["memory", f"({unit})"]
    for row in data["layouts"]:
        cells = next(line for line in lines if line.startswith(f"{row['rank']} ")).split()
        assert float(cells[3]) == pytest.approx(row["memory_bytes"] / size, abs=0.05)  # printed to 0.1
    assert f"by memory (over {data['capacity_bytes'] / size:,.1f} {unit})" in " ".join(result.stdout.split())
    assert any(key.endswith(" GiB)") for key in data["rejected"])  # --json's keys do not follow --units


def test_plan_split_ends_searches_the_interleaved_layouts_megatron_runs_and_its_commands_reproduce_them():
    """Llama 3.1 405B's 126 layers divide over no pipeline of 4 or more stages, which Megatron-core asserts, so under
    --framework megatron plan searches the ends split too (126 + 2 = 128 slots, as NeMo's recipe splits them): its
    best row on 512 H100s is interleaved with `split ends`, where --split even finds no layout that fits; that row's
    `cost4d step` command gives its time. The API takes split= too; a bad value is one line."""
    base = [sys.executable, "-m", "costmodel", "plan", "--model", "llama3-405b", "--hardware", "h100-sxm", "--gpus",
            "512", "--framework", "megatron", "--seq", "8192", "--global-batch", "2097152", "--top", "1", "--json"]
    both, ends = (json.loads(subprocess.run([*base, *extra], capture_output=True, text=True, check=True).stdout)
                  for extra in ([], ["--split", "ends"]))
    row = both["layouts"][0]
    assert row["layout"]["split"] == "ends" and row["layout"]["schedule"] == "interleaved"
    assert row == ends["layouts"][0]
    even = subprocess.run([*base, "--split", "even"], capture_output=True, text=True)
    assert even.returncode != 0 and "no layout of 512 x h100-sxm fits llama3-405b" in even.stderr
    assert "--split ends" in even.stderr  # the hint
    readme = " ".join((Path(__file__).resolve().parents[1] / "README.md").read_text().split())
    assert "on 512 H100s its best layout is interleaved over 16 stages of 128 slots" in readme
    assert row["layout"]["pp"] == 16
    assert "--split ends" in row["command"]
    out = json.loads(subprocess.run([sys.executable, "-m", "costmodel", "step", *row["command"].split()[2:], "--json"],
                                    capture_output=True, text=True, check=True).stdout)
    assert out["step_s"] == pytest.approx(row["step_s"], rel=1e-9)
    bad = subprocess.run([*base, "--split", "middle"], capture_output=True, text=True)
    assert bad.returncode != 0 and bad.stderr.strip() == "error: --split 'middle': use even, ends or compute"
    from costmodel import api

    rows = api.plan("llama3-405b", "h100-sxm", gpus=512, global_batch=2097152, seq=8192, framework="megatron", top=1,
                    split="ends")
    first = rows[0] if isinstance(rows, list) else rows.iloc[0].to_dict()
    assert first["split"] == "ends" and first["step_s"] == pytest.approx(row["step_s"], rel=1e-12)
    with pytest.raises(CostModelError, match="split = 'middle': use even, ends or compute"):
        api.plan("llama3-405b", "h100-sxm", gpus=512, global_batch=2097152, seq=8192, split="middle")


@pytest.mark.parametrize("split", ["even", "ends"])
def test_moe_layer_traffic_comes_from_the_stage_with_the_most_moe_layers(split):
    """DeepSeek-V3 (3 dense layers) over 16 stages: the first stage holds the dense layers, so its experts' all-to-alls
    are not the pipeline's: the step's come from the stage with the most MoE layers (4 a micro-batch on 16
    micro-batches: 64 calls; a review found 16 under even and none under ends, which the planner then favoured).
    The planner's arrays (first, middle, last stages) price the same as single layouts."""
    import numpy as np

    from costmodel.cost.evaluate import evaluate
    from costmodel.cost.point import Point
    from costmodel.cost.shape import Shape
    from costmodel.parallel.pipeline.stages import every_stage, stage_layers, stage_start

    spec, rec, h100 = load_model("deepseek-v3"), load_recipe("megatron"), load_hardware("h100-sxm")
    shape = Shape.of(spec)
    pps = (16, 8, 4)
    for pp in pps:
        layout = Layout(pp=pp, fsdp=128, ep=64, zero=1, recompute="full", microbatches=16, tokens=4096, split=split)
        cost = evaluate_layout(spec, rec, layout, h100)
        roles = every_stage(pp)
        moe = max(stage_layers(shape.layers, pp, r, split) - max(0, min(shape.dense_layers, stage_start(
            shape.layers, pp, r, split) + stage_layers(shape.layers, pp, r, split)) - stage_start(shape.layers, pp, r,
                                                                                                   split)) for r in roles)
        dispatch = [c for c in cost.collectives if c.collective.op == "all-to-all"
                    and c.collective.purpose.startswith("dispatch: tokens")]
        assert dispatch and dispatch[0].collective.calls == 16 * moe, (pp, split)
    columns = dict(pp=np.array(pps), microbatches=np.full(3, 16), fsdp=np.full(3, 128), ep=np.full(3, 64),
                   tokens=np.full(3, 4096))
    arrays = evaluate(shape, rec, Point(**columns, zero=1, recompute="full", split=split), h100)
    single = [evaluate_layout(spec, rec, Layout(pp=pp, fsdp=128, ep=64, zero=1, recompute="full", microbatches=16,
                                                tokens=4096, split=split), h100).step.step_s for pp in pps]
    assert list(np.asarray(arrays.step.step_s)) == pytest.approx(single, rel=1e-9)
