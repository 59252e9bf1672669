"""costmodel.api: what a notebook gets for bad arguments is one CostModelError naming the field, as the CLI
names its flag; the checks the CLI makes hold here too; devices may be names or Hardware specs."""

from __future__ import annotations

import pytest

from costmodel import api
from costmodel.errors import CostModelError


Q = dict(fsdp=16, tp=4, mx=2)  # the README's XXL question on a TPU v5p 4x4x4 slice
PLAN = dict(gpus=8, global_batch=65536)  # llama3-8b on one H100 node


@pytest.mark.parametrize("call, needle", [
    (lambda: api.memory("xxl", fsdpp=3), "memory: no argument 'fsdpp'; closest: fsdp"),
    (lambda: api.memory("xxl", fsdp=0), "fsdp = 0"),
    (lambda: api.memory("xxl", fsdp="4"), "valid integer"),
    (lambda: api.memory(None), "give a built-in name"),
    (lambda: api.cost("llama3-8b", tokens=8192, seq=3000), "not a whole number of --seq"),
    (lambda: api.plan("xxl", "h100-sxm", gpus=16, global_batch=65536), "xxl has no sequence length"),
    (lambda: api.plan("llama3-8b", "h100-sxm", **PLAN, headroom=1.5), "headroom = 1.5"),
    (lambda: api.solve_batch("xxl", "tpu-v5p", fsdp=16, tp=4, mx=1.5), "mx = 1.5: give a whole number from 1 to 8"),
    (lambda: api.solve_batch("xxl", "tpu-v5p", fsdp=16, tp=4, bandwidth=float("inf")), "bandwidth = inf"),
    (lambda: api.explain_batch("xxl", "tpu-v5p", fsdp=1, tp=64), "never compute-bound"),
    (lambda: api.solve_batch("xxl", 3, fsdp=16), "give a device name"),
])
def test_bad_arguments_are_one_clear_error(call, needle):
    with pytest.raises(CostModelError) as raised:
        call()
    assert needle in str(raised.value)


@pytest.mark.parametrize("arguments, needle", [
    # `cost4d plan` refuses each of these (--gpus, --global-batch, --seq: whole numbers from 1; --top 1 to 1000, the
    # API returning up to every feasible layout)
    (dict(gpus=8, global_batch=-65536), "global_batch = -65,536 is out of range"),
    (dict(**PLAN, seq=-8192), "seq = -8,192 is out of range"),
    (dict(**PLAN, seq=0), "seq = 0 is out of range"),
    (dict(gpus=-8, global_batch=65536), "gpus = -8 is out of range"),
    (dict(gpus=0, global_batch=65536), "gpus = 0 is out of range"),
    (dict(gpus=float("nan"), global_batch=65536), "gpus = nan: give a whole number"),
    (dict(gpus=8.0, global_batch=65536), "gpus = 8.0: give a whole number"),
    (dict(gpus=True, global_batch=65536), "gpus = True: give a whole number"),
    (dict(gpus="8", global_batch=65536), "gpus = '8': give a whole number"),
    (dict(**PLAN, top=0), "top = 0 is out of range: allowed from 1 to 1,000,000,000"),
    (dict(**PLAN, headroom=float("nan")), "headroom = nan"),
    (dict(**PLAN, headroom="0.1"), "headroom = '0.1': give a number"),
    (dict(**PLAN, precision="fp4"), "precision = 'fp4': use bf16 or fp8"),
    (dict(**PLAN, document=0), "document = 0 is out of range: allowed from 1 to 8,192"),
    (dict(**PLAN, document=16384), "document = 16,384 is out of range: allowed from 1 to 8,192"),
    (dict(gpus=8, global_batch=65537), "global_batch = 65,537 is not a whole number of seq = 8,192 sequences"),
    (dict(gpus=8), "plan: missing a required argument: 'global_batch'"),
    (dict(**PLAN, bogus=1), "plan: no argument 'bogus'"),
    (dict(**PLAN, global_batch_=1), "closest: global_batch"),
])
def test_plan_refuses_what_the_cli_refuses_naming_the_parameter(arguments, needle):
    with pytest.raises(CostModelError) as raised:
        api.plan("llama3-8b", "h100-sxm", **arguments)
    assert needle in str(raised.value) and "--" not in str(raised.value)


@pytest.mark.parametrize("call, needle", [
    # a TPU slice: whole numbers of chips per axis, fsdp x tp of them, at most the torus's axes
    (lambda: api.optimize_split("xxl", "tpu-v5p", torus=(-4, -4, 4), **Q), "torus = (-4, -4, 4): every axis needs 1"),
    (lambda: api.optimize_split("xxl", "tpu-v5p", torus=(4.0, 4, 4), **Q), "torus = (4.0, 4, 4): give the torus shape"),
    (lambda: api.optimize_split("xxl", "tpu-v5p", torus="4by4", **Q), "torus = '4by4': give the torus shape"),
    (lambda: api.optimize_split("xxl", "tpu-v5p", torus=(), **Q), "torus = (): give the torus shape"),
    (lambda: api.optimize_split("xxl", "tpu-v5p", torus=(4, 4, 2), **Q), "torus = 4x4x2 has 32 chips, but fsdp x tp"),
    (lambda: api.optimize_split("xxl", "tpu-v5p", torus=(2,) * 6, **Q), "has 6 axes; the torus has at most 3"),
    (lambda: api.what_if("xxl", "tpu-v5p", torus=(-4, -4, 4), **Q), "torus = (-4, -4, 4)"),
    # the layout as given on that slice (solve.split.check_slice), in the API's names
    (lambda: api.optimize_split("xxl", "tpu-v5p", torus="4x4x4", fsdp=8, tp=8), "torus = 4x4x4: X = 8 (Y = 8) is not"),
    (lambda: api.what_if("xxl", "tpu-v5p", torus="4x4x4", fsdp=4, tp=16, mx=2), "mx = 2: on torus = 4x4x4"),
    (lambda: api.optimize_split("xxl", "h100-sxm", torus=(4, 4, 4), fsdp=16, tp=4),
     "torus maps the split onto a TPU torus; h100-sxm is a GPU"),
    (lambda: api.optimize_split("xxl", "h100-sxm", fsdp=8, tp=8), "optimize_split trades X for Y at one bandwidth"),
    # a recipe and a framework are names, files or specs
    (lambda: api.memory("xxl", recipe=5), "recipe = 5: give a recipe name"),
    (lambda: api.cost("xxl", recipe=["cs336"]), "recipe = ['cs336']: give a recipe name"),
    (lambda: api.memory("xxl", framework=5), "framework = 5: give a framework name"),
    (lambda: api.plan("llama3-8b", "h100-sxm", **PLAN, recipe=5), "recipe = 5"),
    (lambda: api.plan("llama3-8b", "h100-sxm", **PLAN, framework=[1]), "framework = [1]"),
    # a question needs a device
    (lambda: api.solve_batch("xxl", None), "hardware = None"),
    (lambda: api.explain_batch("xxl", None), "hardware = None"),
    (lambda: api.optimize_split("xxl", None), "hardware = None"),
    (lambda: api.what_if("xxl", None), "hardware = None"),
    (lambda: api.batch_problem("xxl", None), "hardware = None"),
    (lambda: api.plan("llama3-8b", None, **PLAN), "hardware = None"),
    # the compute-bound question under the CLI's rules, named as the API names them
    (lambda: api.solve_batch("xxl", "tpu-v5p", fsdp=0), "fsdp = 0 is out of range"),
    (lambda: api.solve_batch("xxl", "tpu-v5p", tp=-4), "tp = -4 is out of range"),
    (lambda: api.solve_batch("xxl", "tpu-v5p", fsdp=16, tp=4, my=9), "my = 9 is out of range: allowed from 1 to 8"),
    (lambda: api.solve_batch("xxl", "tpu-v5p", bandwidth=-1), "bandwidth = -1 is out of range"),
    (lambda: api.solve_batch("xxl", "tpu-v5p", peak_flops="4.6e14"), "peak_flops = '4.6e14': give a number"),
    (lambda: api.solve_batch("xxl", "tpu-v5p", overlap="min"), "overlap = 'min': use sum or max"),
    (lambda: api.solve_batch("xxl", "tpu-v5p", pass_="backward"), "pass_ = 'backward': use forward or step"),
    (lambda: api.solve_fsdp("xxl", [95]), "limit [95]: give a size"),
    (lambda: api.solve_fsdp("xxl", None), "limit None: give a size"),
    (lambda: api.solve_fsdp("xxl", "95"), "limit '95': give a unit"),
])
def test_questions_name_the_api_parameter_not_a_cli_flag(call, needle):
    with pytest.raises(CostModelError) as raised:
        call()
    assert needle in str(raised.value) and "--" not in str(raised.value)


@pytest.mark.parametrize("name, call", [
    ("memory", lambda: api.memory("xxl", bogus=1)),
    ("cost", lambda: api.cost("xxl", bogus=1)),
    ("formula", lambda: api.formula("xxl", bogus=1)),
    ("solve_fsdp", lambda: api.solve_fsdp("xxl", "95GB", bogus=1)),
    ("batch_problem", lambda: api.batch_problem("xxl", "tpu-v5p", bogus=1)),
    ("solve_batch", lambda: api.solve_batch("xxl", "tpu-v5p", bogus=1)),
    ("optimize_split", lambda: api.optimize_split("xxl", "tpu-v5p", bogus=1)),
    ("explain_batch", lambda: api.explain_batch("xxl", "tpu-v5p", bogus=1)),
    ("explain_memory", lambda: api.explain_memory("xxl", bogus=1)),
    ("explain_fsdp", lambda: api.explain_fsdp("xxl", "95GB", bogus=1)),
    ("what_if", lambda: api.what_if("xxl", "tpu-v5p", bogus=1)),
    ("plan", lambda: api.plan("llama3-8b", "h100-sxm", **PLAN, bogus=1)),
])
def test_an_unknown_argument_is_named_with_the_closest_known_one(name, call):
    with pytest.raises(CostModelError) as raised:
        call()
    assert str(raised.value).startswith(f"{name}: no argument 'bogus'; closest: ")


@pytest.mark.parametrize("call, closest", [
    (lambda: api.solve_batch("xxl", "tpu-v5p", pass_forward="step"), "pass_"),
    (lambda: api.solve_batch("xxl", "tpu-v5p", ici_bandwidth=1.8e11), "bandwidth"),
    (lambda: api.optimize_split("xxl", "tpu-v5p", slice="4x4x4", **Q), "fsdp"),
    (lambda: api.cost("xxl", hardwre="h100-sxm"), "hardware"),
])
def test_the_closest_argument_is_the_one_meant(call, closest):
    with pytest.raises(CostModelError, match=f"closest: {closest} "):
        call()


def test_good_calls_answer_as_before():
    """Whole numbers may be numpy's; a torus may be a tuple, a list or the CLI's text; a limit bytes or text."""
    import numpy as np

    # the README's figures: N_FSDP = 38 under 95 GB; 395.3 tokens per device on the v5p question
    assert api.solve_fsdp("xxl", "95GB").n_fsdp == api.solve_fsdp("xxl", 95e9).n_fsdp == 38
    question = dict(Q, peak_flops=4.6e14, bandwidth=1.8e11)
    assert api.solve_batch("xxl", "tpu-v5p", **question).per_device_batch == pytest.approx(395.3, abs=0.05)
    same = dict(fsdp=np.int64(16), tp=np.int32(4), mx=2, peak_flops=np.float64(4.6e14), bandwidth=180_000_000_000)
    assert (api.solve_batch("xxl", "tpu-v5p", **same).per_device_batch
            == api.solve_batch("xxl", "tpu-v5p", **question).per_device_batch)
    splits = {api.optimize_split("xxl", "tpu-v5p", torus=torus, **Q).best
              for torus in ((4, 4, 4), [4, 4, 4], "4x4x4", (np.int64(4),) * 3)}
    assert len(splits) == 1 and splits.pop().x in (4, 16)
    rows = [api.plan("llama3-8b", "h100-sxm", **arguments, top=2) for arguments in
            (PLAN, dict(gpus=np.int64(8), global_batch=65536, seq=8192, headroom=0))]
    first, second = (r if isinstance(r, list) else r.to_dict("records") for r in rows)
    assert first == second and len(first) == 2 and all(row["step_s"] > 0 and row["grad_accum"] >= 1 for row in first)
    # recipe=None is the default recipe (the framework's, else cs336), as memory's always was; a Recipe spec works too
    assert api.cost("xxl", recipe=None, fsdp=8).memory_bytes == api.cost("xxl", fsdp=8).memory_bytes
    recipe = api.load_recipe("megatron")
    assert api.memory("xxl", recipe=recipe, fsdp=8).total_bytes == api.memory("xxl", recipe="megatron", fsdp=8).total_bytes


def test_a_hardware_spec_works_where_a_name_does():
    spec = api.load_hardware("tpu-v5p")
    question = dict(fsdp=16, tp=4, mx=2, peak_flops=4.6e14, bandwidth=1.8e11)
    assert (api.solve_batch("xxl", spec, **question).per_device_batch
            == api.solve_batch("xxl", "tpu-v5p", **question).per_device_batch)
    assert {row.key for row in api.what_if("xxl", spec, **question)} == {row.key for row in api.what_if("xxl", "tpu-v5p", **question)}


def test_plan_rows_name_the_bubble_as_the_cli_does():
    rows = api.plan("llama3-8b", "h100-sxm", gpus=8, global_batch=65536, seq=8192, top=2)
    first = rows[0] if isinstance(rows, list) else rows.iloc[0].to_dict()
    assert "bubble_fraction" in first and "seq" in first


def test_a_step_formula_names_every_letter_and_function_it_uses():
    """The step time in letters: every letter has a meaning and a value, and every opaque function (NCCL's tuner)
    a meaning naming its collective; at the layout it is the numeric step time."""
    import sympy as sp

    g = api.formula("llama3-8b", hardware="h100-sxm", fsdp=8, tokens=8192)
    t = g.cost.step.step_s
    letters = g.legend(t)
    assert {str(s) for s in t.free_symbols} == set(letters) and all(meaning for meaning, _ in letters.values())
    used = {type(f).__name__ for f in t.atoms(sp.Function) if type(f).__name__.startswith("t_NCCL")}
    functions = g.functions(t)
    assert used == set(functions) == {"t_NCCL_all_gather", "t_NCCL_reduce_scatter"}
    assert "one all-gather" in functions["t_NCCL_all_gather"] and "reduce-scatter" in functions["t_NCCL_reduce_scatter"]
    assert g.at(t) == pytest.approx(api.cost("llama3-8b", hardware="h100-sxm", fsdp=8, tokens=8192).step.step_s,
                                    rel=1e-9)


def test_cost_takes_a_framework_and_precision_and_gives_the_step_range_step_prints():
    """api.cost under a framework profile and fp8: its .step_range is the range `cost4d step --json` prints for the
    same layout (step_s_low, step_s_high); a bad precision is one error naming the parameter; a MoE model has none."""
    import json
    import subprocess
    import sys

    got = api.cost("llama3-8b", hardware="h100-sxm", framework="megatron", precision="fp8", cp=2, fsdp=4, zero=1,
                   tokens=8192)
    out = json.loads(subprocess.run(
        [sys.executable, "-m", "costmodel", "step", "--model", "llama3-8b", "--hardware", "h100-sxm", "--framework",
         "megatron", "--precision", "fp8", "--cp", "2", "--fsdp", "4", "--zero", "1", "--tokens", "8192", "--json"],
        capture_output=True, text=True, check=True).stdout)
    assert got.step.step_s == out["step_s"] and got.step_range == (out["step_s_low"], out["step_s_high"])
    assert got.recipe.name == "megatron"  # the framework's recipe where none is given
    assert api.cost("llama3-8b", fsdp=8, tokens=8192).step_range is None  # no hardware: no step
    assert api.cost("qwen3-30b-a3b", hardware="h100-sxm", ep=8, fsdp=8, tokens=4096).step_range is None
    with pytest.raises(CostModelError, match="precision = 'fp8' prices the step's matmuls: give hardware="):
        api.cost("llama3-8b", precision="fp8", fsdp=8, tokens=8192)
    with pytest.raises(CostModelError, match="precision = 'fp4': use bf16 or fp8"):
        api.cost("llama3-8b", hardware="h100-sxm", precision="fp4", fsdp=8, tokens=8192)


def test_solve_fsdp_takes_a_framework_as_the_cli_does():
    """api.solve_fsdp(framework='megatron') answers as `cost4d solve fsdp --framework megatron` (its ZeRO-1 default,
    bisection on the reserved peak); without one, the exact accounting's 38 for the XXL problem."""
    import json
    import subprocess
    import sys

    flags = dict(tp=8, sp=True, tokens=4096, recompute="full")
    got = api.solve_fsdp("llama3-70b", "85GB", framework="megatron", **flags)
    out = json.loads(subprocess.run(
        [sys.executable, "-m", "costmodel", "solve", "fsdp", "--model", "llama3-70b", "--limit", "85GB", "--framework",
         "megatron", "--tp", "8", "--sp", "--tokens", "4096", "--recompute", "full", "--json"],
        capture_output=True, text=True, check=True).stdout)
    assert got.n_fsdp == out["n_fsdp"] == 4 and out["layout"]["zero"] == 1
    assert api.solve_fsdp("xxl", "95GB").n_fsdp == 38
