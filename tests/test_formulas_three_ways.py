"""Every formula gives the same value as a number, a numpy array and a sympy expression.

(shared/reference/style.md, "One formula, three uses".) Structural arguments (booleans, enums)
are enumerated; quantities are drawn at random by hypothesis.
"""

import inspect
import itertools

import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from costmodel.formulas import activations, comms, flops, memory, memory_bound, overheads, params, pipeline, scaling

STRUCTURE = {
    "gated": [False, True], "bias": [False, True], "with_bias": [False, True],
    "norm_bias": [False, True], "tied": [False, True], "qkv_bias": [False, True], "dropout": [False, True],
    "out_bias": [False, True], "mlp_bias": [False, True], "in_place": [False, True], "eager": [False, True],
    "flash": [False, True], "policy": ["none", "selective"],
    "schedule": ["gpipe", "1f1b", "interleaved", "zb-h1"], "overlap": ["sum", "max"], "sp": [False, True],
    "input_requires_grad": [False, True], "activation": ["none", "relu", "gelu", "silu"],
    "op": list(comms.MODELLED), "shared_gate": [False, True], "q_latent": [False, True], "upcast": [False, True],
    "fused_swiglu": [False, True],
}


def _formulas():
    for module in (params, flops, memory, comms, activations, pipeline, scaling, overheads, memory_bound):
        for name, fn in inspect.getmembers(module, inspect.isfunction):
            if fn.__module__ == module.__name__ and not name.startswith("_"):
                yield pytest.param(fn, id=f"{module.__name__.split('.')[-1]}.{name}")


def _split(fn):
    names = [p for p in inspect.signature(fn).parameters]
    structural = [n for n in names if n in STRUCTURE]
    quantities = [n for n in names if n not in STRUCTURE]
    return structural, quantities


@pytest.mark.parametrize("fn", list(_formulas()))
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_number_array_and_symbol_agree(fn, data):
    structural, quantities = _split(fn)
    assert quantities, "a formula without quantities is a constant"
    draw = st.integers(min_value=1, max_value=10**6)
    values = {q: data.draw(draw, label=q) for q in quantities}
    for name in ("fraction", "tp_share"):  # quantities that live in [0, 1] ([0, 1) for the share)
        if name in values:
            values[name] = data.draw(st.sampled_from([0, 0.25, 0.5] + ([1] if name == "fraction" else [])),
                                     label=name)
    symbols = {q: sp.Symbol(q, positive=True) for q in quantities}
    for combo in itertools.product(*(STRUCTURE[s] for s in structural)):
        fixed = dict(zip(structural, combo))
        number = fn(**values, **fixed)
        expression = sp.sympify(fn(**symbols, **fixed))
        assert expression.free_symbols <= set(symbols.values())
        substituted = float(expression.subs({symbols[q]: v for q, v in values.items()}))
        assert substituted == pytest.approx(number, rel=1e-12)  # float rounding only
        arrays = {q: np.array([v, v], dtype=float) for q, v in values.items()}  # sweeps use floats
        assert np.allclose(fn(**arrays, **fixed), number, rtol=1e-12)


def test_integer_coefficients_stay_exact():
    """Symbolic output keeps integer coefficients: the XXL parameter count is 2 D F L, not 2.0 D F L."""
    D, F, L = sp.symbols("D F L", positive=True)
    assert params.ffn_stack_params(d_model=D, d_ff=F, layers=L) == 2 * D * F * L
    assert flops.ffn_forward_flops_per_token(d_model=D, d_ff=F, layers=L) == 4 * D * F * L
