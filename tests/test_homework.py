"""`cost4d homework`: the original problems reproduce their published answers, and for 200 variants of
each kind the answer key equals what the solver commands print (run in-process, JSON)."""

import json

import pytest
from typer.testing import CliRunner

from costmodel.cli import app
from costmodel.errors import CostModelError
from costmodel.homework import kinds, problem

runner = CliRunner()
VARIANTS = range(1, 201)


def cli_json(*args) -> dict:
    result = runner.invoke(app, [*map(str, args), "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def cli_batch(*args) -> float:
    """`solve batch`'s B/N, or infinity where it refuses: the layout is never compute-bound."""
    result = runner.invoke(app, ["solve", "batch", *map(str, args), "--json"])
    if isinstance(result.exception, CostModelError) and "never compute-bound" in str(result.exception):
        return float("inf")
    assert result.exit_code == 0, result.output
    return json.loads(result.output)["per_device_batch"]


def test_the_original_xxl_problem_has_the_reference_answers():
    """shared/reference/conventions.md, 'The XXL problem' (a)-(d)."""
    values = {p.label: p.values for p in problem("xxl", 0).parts}
    assert values["(a)"] == {"params": 219_848_638_464, "state_bytes": 3_517_578_215_424,
                             "activation_bytes_per_token": 17_547_264, "h100_80gb": 44, "h100_80gib": 41}
    assert values["(b)"]["n_fsdp"] == 38 and round(values["(b)"]["threshold"], 2) == 37.03
    assert round(values["(c)"]["per_device_batch"], 1) == 395.3 and round(values["(c)"]["global_batch"]) == 25_302
    assert round(values["(c)"]["per_device_batch_max"], 1) == 319.4
    assert round(values["(c)"]["global_batch_max"]) == 20_444
    assert round(values["(d)"]["split-continuous"], 1) == 245.3


def test_the_original_zero_problem_is_the_papers_figure():
    """arXiv:1910.02054 Figure 1: Psi = 7.5B, N_d = 64, K = 12: 120 GB, 31.4 GB, 16.6 GB, 1.9 GB."""
    (a, _) = problem("zero", 0).parts
    assert [round(a.values[f"stage_{s}_bytes"] / 1e9, 1) for s in range(4)] == [120.0, 31.4, 16.6, 1.9]


@pytest.mark.parametrize("kind", list(kinds()))
def test_same_seed_same_problem_and_seeds_differ(kind):
    assert problem(kind, 7).render("text", True) == problem(kind, 7).render("text", True)
    assert len({problem(kind, seed).render("text") for seed in range(1, 9)}) > 4


@pytest.mark.parametrize("fmt", ["text", "markdown", "latex", "ipynb"])
def test_every_format_carries_the_questions_and_the_key(fmt):
    hw = problem("xxl", 3)
    out = hw.render(fmt, answers=True)
    assert "6144" in out and "(c)" in out and "B/N" in out
    if fmt == "ipynb":
        assert json.loads(out)["nbformat"] == 4


def test_bad_kind_and_seed_are_one_line():
    with pytest.raises(CostModelError, match="unknown homework 'xl'; closest: xxl"):
        problem("xl")
    with pytest.raises(CostModelError, match="--seed"):
        problem("xxl", -1)


def write_spec(tmp_path, model) -> str:
    path = tmp_path / f"{model.name}.json"
    path.write_text(model.model_dump_json())
    return str(path)


@pytest.mark.slow
def test_xxl_keys_equal_the_commands(tmp_path):
    from costmodel.homework import xxl

    for seed in VARIANTS:
        hw, p = problem("xxl", seed), xxl.params(seed)
        a, b, c, _ = (part.values for part in hw.parts)
        spec = write_spec(tmp_path, xxl.spec(p, seed))
        memory = cli_json("memory", "--model", spec, "--tokens", 1)
        assert (memory["state_bytes_unsharded"], memory["activation_bytes_per_token"]) == \
            (a["state_bytes"], a["activation_bytes_per_token"]), seed
        fsdp = cli_json("solve", "fsdp", "--model", spec, "--limit", f"{p['limit_gb']:g}GB", "--tokens", 0,
                        "--shard-activations", 0.5)
        assert (fsdp["n_fsdp"], fsdp["threshold"]) == (b["n_fsdp"], b["threshold"]), seed
        for overlap, key in (("sum", "per_device_batch"), ("max", "per_device_batch_max")):
            batch = cli_batch("--model", spec, "--hardware", p["hardware"], "--fsdp", p["fsdp"], "--tp", p["tp"],
                              "--mx", p["mx"], "--my", p["my"], "--peak-flops", p["peak_flops"],
                              "--ici-bandwidth", p["bandwidth"], "--overlap", overlap)
            assert batch == c[key], (seed, overlap)


@pytest.mark.slow
def test_zero_keys_equal_the_commands(tmp_path):
    from costmodel.homework import zero

    for seed in VARIANTS:
        (a, _), p = [part.values for part in problem("zero", seed).parts], zero.params(seed)
        spec = write_spec(tmp_path, zero.spec(p, seed))
        for stage in range(4):
            memory = cli_json("memory", "--model", spec, "--recipe", "zero", "--fsdp", p["devices"], "--zero", stage,
                              "--tokens", 0)
            assert memory["total_bytes"] == a[f"stage_{stage}_bytes"], (seed, stage)


@pytest.mark.slow
def test_bubble_keys_equal_the_commands():
    from costmodel.homework import bubble

    for seed in VARIANTS:
        (a, b), p = [part.values for part in problem("bubble", seed).parts], bubble.params(seed)
        for schedule, chunks in bubble.SCHEDULES:
            memory = cli_json("memory", "--model", bubble.MODEL, "--pp", p["stages"], "--microbatches",
                              p["microbatches"], "--schedule", schedule, "--chunks", chunks, "--tokens", p["tokens"])
            assert memory["pipeline"]["bubble_fraction"] == a[f"bubble_{schedule}"], (seed, schedule)
            assert memory["stages"][0]["activation_bytes"] == b[f"activations_{schedule}"], (seed, schedule)


def test_bubble_keys_in_flight_formulas_give_their_numbers():
    """Each schedule's in-flight formula, evaluated at the seed's p, m (v = 2), is the count the key prints: the
    interleaved one is capped at the m v chunks there are (p = m = 4: min(11, 8) / 2 = 4, not 4 x 1.375)."""
    import re

    from costmodel.homework import bubble

    for seed in (0, 2, 15, *range(3, 12)):
        p, m, v = bubble.params(seed)["stages"], bubble.params(seed)["microbatches"], 2
        by_hand = {"m (every forward first)": m, "min(p, m)": min(p, m), "min(p v + p - 1, m v) / v": min(p * v + p - 1,
                                                                                                         m * v) / v}
        (b,) = [part for part in problem("bubble", seed).parts if part.label == "(b)"]
        for line in b.answer:
            schedule, formula, count = re.match(r"(\S+): (.+?) = ([\d.]+) micro-batches", line).groups()
            assert by_hand[formula] == float(count), (seed, schedule, formula)


def test_tpu_batch_poses_mappings_a_slice_has():
    """Every group's chips fit the torus axes it is given (v5p's 16 x 20 x 28: a 28-chip axis holds 16 of a power of
    two), the groups take different axes, and pure FSDP gets the fewest axes that hold all the chips."""
    from costmodel.homework import tpu_batch

    shapes = {"tpu-v5p": [16, 16, 16], "tpu-v4": [16, 16, 16]}  # powers of two each axis holds, by hand
    for seed in range(60):
        p = tpu_batch.params(seed)
        cap = shapes[p["hardware"]]
        assert p["mx"] + p["my"] <= 3 and p["fsdp"] <= 16 ** p["mx"] and p["tp"] <= 16 ** p["my"], (seed, p)
        assert 16 ** (p["mx_all"] - 1) < p["fsdp"] * p["tp"] <= 16 ** p["mx_all"] <= 16 ** len(cap), (seed, p)
    text = " ".join(" ".join(part.question for part in problem("tpu-batch", seed).parts) for seed in range(12))
    assert "1 torus axes" not in text


@pytest.mark.slow
def test_tpu_batch_keys_equal_the_commands():
    from costmodel.homework import tpu_batch

    for seed in VARIANTS:
        (a, _, c), p = [part.values for part in problem("tpu-batch", seed).parts], tpu_batch.params(seed)
        common = ["--model", p["model"], "--hardware", p["hardware"], "--mx", p["mx"], "--my", p["my"]]
        pure = ["--model", p["model"], "--hardware", p["hardware"], "--mx", p["mx_all"], "--my", p["my"]]
        assert cli_batch(*pure, "--fsdp", p["fsdp"] * p["tp"], "--tp", 1) == a["per_device_batch"], seed
        for overlap, key in (("sum", "per_device_batch"), ("max", "per_device_batch_max")):
            mixed = cli_batch(*common, "--fsdp", p["fsdp"], "--tp", p["tp"], "--overlap", overlap)
            assert mixed == c[key], (seed, overlap)


@pytest.mark.slow
def test_a_generated_notebook_runs_and_asserts_its_key(tmp_path):
    import nbformat
    from nbclient import NotebookClient

    path = tmp_path / "hw.ipynb"
    result = runner.invoke(app, ["homework", "tpu-batch", "--seed", "11", "--answers", "--format", "ipynb",
                                 "--out", str(path)])
    assert result.exit_code == 0, result.output
    notebook = nbformat.read(path, as_version=4)
    NotebookClient(notebook, kernel_name="python3", timeout=120).execute()
    assert sum("assert" in cell.source for cell in notebook.cells) == 3
