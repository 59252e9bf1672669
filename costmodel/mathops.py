"""Operations that work on numbers, numpy arrays and sympy expressions alike.

Formulas and the wiring call these instead of builtins or ``if`` so one function body serves
three uses (``shared/reference/style.md``, "One wiring, three uses"): a number for the CLI, an
array for a sweep (one element per layout), an expression for printing and solving. A choice
that depends on a value is a :func:`where`, never an ``if``. The type test looks at the module
name, so neither numpy nor sympy is imported on the numeric path.

Convention for symbols: a degree that appears as a letter stands for a degree above 1 (the
symbolic view writes a literal 1 for every axis of degree 1), so :func:`above_one` is true for it.
"""

from __future__ import annotations

import functools


def family(*values) -> str:
    """'sympy' if any value is a sympy object, else 'numpy' if any is a numpy one, else 'number'."""
    found = "number"
    for v in values:
        module = type(v).__module__
        if module.startswith("numpy"):
            found = "numpy"
        elif module.startswith("sympy") or (module != "builtins" and _sympy_subclass(type(v))):
            return "sympy"
    return found


@functools.lru_cache(maxsize=None)  # a few classes, asked about on every call
def _sympy_subclass(kind) -> bool:
    """A class of ours built on sympy's (an opaque function such as cost/nccl.py's t_NCCL)."""
    return any(base.__module__.startswith("sympy") for base in kind.__mro__[1:])


def letter(name: str):
    """The sympy symbol of a letter: a positive integer (widths, degrees, counts)."""
    import sympy

    return sympy.Symbol(name, positive=True, integer=True)


def exact_fraction(value):
    """A fraction as a sympy Rational (0.5 -> 1/2), so symbolic output stays exact."""
    from fractions import Fraction

    import sympy

    return sympy.Rational(Fraction(value).limit_denominator(1000))


def square_root(value):
    """The square root of a number, a numpy array or a sympy expression (kept whole: sqrt(B N/F), not the
    B^0.5 N^0.5/F^0.5 a float power prints as, nor sympy's sqrt(B) sqrt(N)/sqrt(F) of positive letters)."""
    if family(value) == "sympy":
        import sympy

        return sympy.Pow(value, sympy.Rational(1, 2), evaluate=False)
    return value ** 0.5


def maximum(a, b):
    """max(a, b), elementwise for arrays, ``Max`` for symbols."""
    kind = family(a, b)
    if kind == "sympy":
        import sympy

        return sympy.Max(a, b, evaluate=False)  # sympy's own simplification of Max can be wrong for floor()
    if kind == "numpy":
        import numpy

        return numpy.maximum(a, b)
    return max(a, b)


def minimum(a, b):
    """min(a, b), elementwise for arrays, ``Min`` for symbols."""
    kind = family(a, b)
    if kind == "sympy":
        import sympy

        return sympy.Min(a, b, evaluate=False)
    if kind == "numpy":
        import numpy

        return numpy.minimum(a, b)
    return min(a, b)


def where(condition, a, b):
    """``a`` where ``condition`` holds, else ``b``: a branch on a value, for all three kinds.

    Python bools pick; numpy masks select elementwise; sympy relations give a ``Piecewise``.
    """
    if isinstance(condition, bool):
        return a if condition else b
    kind = family(condition, a, b)
    if kind == "sympy":
        import sympy

        if condition in (sympy.true, sympy.false):
            return a if condition == sympy.true else b
        if sympy.sympify(a) == sympy.sympify(b):
            return a
        return sympy.Piecewise((a, condition), (b, True))
    if kind == "numpy":
        import numpy

        return numpy.where(condition, a, b)
    return a if condition else b


def above_one(degree):
    """Whether a parallel degree is above 1 (a letter always is, by the convention above)."""
    if family(degree) == "sympy":
        import sympy

        return sympy.true if _letters(degree) else sympy.sympify(degree > 1)
    return degree > 1


def _letters(expr) -> bool:
    """A letter, or a product of letters: a degree above 1 by the convention (not a derived quantity)."""
    import sympy

    if isinstance(expr, sympy.Symbol):
        return True
    return isinstance(expr, sympy.Mul) and all(isinstance(f, sympy.Symbol) for f in expr.args)


def equals(a, b):
    """a == b as a condition: a bool, a mask, or a sympy ``Eq`` (a letter degree is above 1, so not 1)."""
    if family(a, b) == "sympy":
        import sympy

        if b == 1 and _letters(a):
            return sympy.false
        return sympy.Eq(a, b)
    return a == b


def either(a, b):
    """a or b as a condition: bools, masks element by element, or a sympy ``Or``."""
    kind = family(a, b)
    if kind == "sympy":
        import sympy

        return _concrete(sympy.Or(a, b))
    return a | b if kind == "numpy" else bool(a) or bool(b)


def both(a, b):
    """a and b as a condition: bools, masks element by element, or a sympy ``And``."""
    kind = family(a, b)
    if kind == "sympy":
        import sympy

        return _concrete(sympy.And(a, b))
    return a & b if kind == "numpy" else bool(a) and bool(b)


def negation(a):
    """not a as a condition: a bool, a mask, or a sympy ``Not``."""
    kind = family(a)
    if kind == "sympy":
        import sympy

        return _concrete(sympy.Not(a))
    return ~a if kind == "numpy" else not a


def _concrete(condition):
    """A sympy condition that is plainly true or false as a Python bool (letters are degrees above 1); else itself."""
    import sympy

    return bool(condition) if condition in (sympy.true, sympy.false) else condition


def indicator(condition):
    """1 where ``condition`` holds, else 0 (a mask to multiply by)."""
    return where(condition, 1, 0)


def exact_div(a, b):
    """a / b where the layout's checks guarantee b divides a: an int for ints, a fraction for symbols."""
    kind = family(a, b)
    if kind == "sympy" or kind == "numpy" or _is_float(a) or _is_float(b):
        return a / b  # arrays: true division is exact here and much faster than integer floor division
    return a // b


def _is_float(value) -> bool:
    return isinstance(value, float) or getattr(getattr(value, "dtype", None), "kind", "") == "f"


def ceil_div(a, b):
    """ceil(a / b) for positive integers: the larger share of an uneven split."""
    kind = family(a, b)
    if kind == "sympy":
        import sympy

        return sympy.ceiling(a / b)
    if kind == "numpy" and (_is_float(a) or _is_float(b)):
        import numpy

        return numpy.ceil(a / b)  # see floor_div
    return -(-a // b)


def floor_div(a, b):
    """floor(a / b) for positive integers: the smaller share of an uneven split.

    Float arrays (evaluate's) take the floor of the true quotient: exact for integers below 2^53 (a
    quotient that is not whole lies 1/b or more from one, farther than its rounding), and many times
    faster than numpy's floor division of floats, which goes through fmod."""
    kind = family(a, b)
    if kind == "sympy":
        import sympy

        return sympy.floor(a / b)
    if kind == "numpy" and (_is_float(a) or _is_float(b)):
        import numpy

        return numpy.floor(a / b)
    return a // b


def divides(a, b):
    """Whether a divides b, for positive integers: a bool, a mask, or (symbols) sympy's b % a == 0."""
    if family(a, b) == "numpy" and (_is_float(a) or _is_float(b)):
        import numpy

        share = b / a
        return share == numpy.floor(share)  # see floor_div: exact below 2^53, and no fmod
    return b % a == 0


def remainder(a, b):
    """a mod b for positive integers (sympy's ``Mod`` for symbols)."""
    if family(a, b) == "numpy" and (_is_float(a) or _is_float(b)):
        return a - b * floor_div(a, b)  # exact below 2^53 (see floor_div), and no fmod
    return a % b


def is_zero(value) -> bool:
    """The literal 0, structure read off a shape's fields (no MoE, no MLA, an empty part): a number, or a sympy
    zero (0 x a letter); never an array."""
    if isinstance(value, (int, float)):
        return value == 0
    return getattr(value, "is_zero", None) is True


def total(values):
    """Sum that starts from the first term, so a sum of arrays stays an array and of symbols an expression."""
    values = list(values)
    if not values:
        return 0
    out = values[0]
    for v in values[1:]:
        out = out + v
    return out


def prime_factor_count(n):
    """How many prime factors a whole number has, counted with multiplicity (12 = 2 x 2 x 3: 3; 1: 0): the most
    factors of 2 or more it splits into, so the most torus axes a group of n chips spans with 2 or more along each.
    Elementwise for arrays (once per distinct value)."""
    if family(n) == "numpy":
        import numpy

        values, inverse = numpy.unique(numpy.asarray(n, dtype=numpy.int64), return_inverse=True)
        return numpy.array([_prime_factor_count(int(v)) for v in values], dtype=numpy.int64)[inverse].reshape(
            numpy.shape(n))
    return _prime_factor_count(int(n))


def _prime_factor_count(n: int) -> int:
    count, p = 0, 2
    while p * p <= n:
        while n % p == 0:
            n, count = n // p, count + 1
        p += 1
    return count + (n > 1)
