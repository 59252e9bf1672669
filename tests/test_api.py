"""costmodel.api: what a notebook gets for bad arguments is one CostModelError naming the field, as the CLI
names its flag; the checks the CLI makes hold here too; devices may be names or Hardware specs."""

from __future__ import annotations

import pytest

from costmodel import api
from costmodel.errors import CostModelError


@pytest.mark.parametrize("call, needle", [
    (lambda: api.memory("xxl", fsdpp=3), "fsdpp = 3: Extra inputs are not permitted"),
    (lambda: api.memory("xxl", fsdp=0), "fsdp = 0"),
    (lambda: api.memory("xxl", fsdp="4"), "valid integer"),
    (lambda: api.memory(None), "give a built-in name"),
    (lambda: api.cost("llama3-8b", tokens=8192, seq=3000), "not a whole number of --seq"),
    (lambda: api.plan("xxl", "h100-sxm", gpus=16, global_batch=65536), "xxl has no sequence length"),
    (lambda: api.plan("llama3-8b", "h100-sxm", gpus=8, global_batch=65536, headroom=1.5), "headroom = 1.5"),
    (lambda: api.solve_batch("xxl", "tpu-v5p", fsdp=16, tp=4, mx=1.5), "mx must be a positive integer"),
    (lambda: api.solve_batch("xxl", "tpu-v5p", fsdp=16, tp=4, bandwidth=float("inf")), "positive finite"),
    (lambda: api.explain_batch("xxl", "tpu-v5p", fsdp=1, tp=64), "never compute-bound"),
    (lambda: api.solve_batch("xxl", 3, fsdp=16), "give a device name"),
])
def test_bad_arguments_are_one_clear_error(call, needle):
    with pytest.raises(CostModelError) as raised:
        call()
    assert needle in str(raised.value)


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
