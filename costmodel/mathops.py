"""max and min that work on numbers, numpy arrays and sympy expressions alike.

Formulas call these instead of the builtins so one function body serves three uses
(``shared/reference/style.md``, "One formula, three uses"). The type test looks at the
module name, so neither numpy nor sympy is imported on the numeric path.
"""

from __future__ import annotations


def _family(*values) -> str:
    for v in values:
        module = type(v).__module__
        if module.startswith("sympy"):
            return "sympy"
        if module.startswith("numpy"):
            return "numpy"
    return "number"


def maximum(a, b):
    """max(a, b), elementwise for arrays, ``Max`` for symbols."""
    family = _family(a, b)
    if family == "sympy":
        import sympy

        return sympy.Max(a, b)
    if family == "numpy":
        import numpy

        return numpy.maximum(a, b)
    return max(a, b)


def minimum(a, b):
    """min(a, b), elementwise for arrays, ``Min`` for symbols."""
    family = _family(a, b)
    if family == "sympy":
        import sympy

        return sympy.Min(a, b)
    if family == "numpy":
        import numpy

        return numpy.minimum(a, b)
    return min(a, b)

