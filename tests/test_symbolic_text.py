"""cost.symbolic.text: formulas in ordinary notation, not sympy's Python syntax."""

import sympy as sp

from costmodel.cost.symbolic import text


def test_conditions_mod_and_min_read_as_written():
    L, p, a, b = sp.symbols("L p a b", positive=True)
    expr = sp.Piecewise((a, sp.Mod(L, p) > 1), (b, True)) + sp.Min(a, b, evaluate=False)
    out = text(expr)
    assert "Piecewise" not in out and "Mod(" not in out and "Min(" not in out
    assert "(a if (L mod p) > 1 else b)" in out and "min(a, b)" in out
    assert text(sp.Eq(sp.Symbol("alpha"), sp.Symbol("C") / sp.Symbol("W"))) == "alpha = C/W"
