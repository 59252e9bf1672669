"""The aggregator evaluated with letters: the formulas ``--symbolic``, ``explain`` and the solvers show.

Nothing here is a formula: :func:`formula` calls :func:`costmodel.cost.evaluate.evaluate` with the
model's widths and the layout's degrees as sympy symbols, and :func:`at` evaluates any resulting
expression at the layout's values. Imported only when a formula is asked for (sympy is slow to load).
"""

from __future__ import annotations

from dataclasses import replace

import sympy as sp
from sympy.printing.latex import greek_letters_set as _GREEK

from costmodel.cost import memory as cm
from costmodel.cost.evaluate import Cost, evaluate, layout_shape
from costmodel.cost.point import LETTERS as POINT_LETTERS, Point
from costmodel.cost.shape import ALL_LETTERS as SHAPE_LETTERS
from costmodel.mathops import exact_fraction, letter
from costmodel.record import record

MEANINGS = {
    "D": "model width (residual stream)", "F": "MLP hidden width", "L": "layers", "a": "attention heads",
    "k": "KV heads", "d_h": "head width", "V": "vocabulary", "s": "sequence length",
    "N": "FSDP shards", "R": "DP replicas", "Y": "TP degree", "p": "pipeline stages", "c": "CP degree",
    "B": "tokens per replica per micro-batch", "m": "micro-batches", "v": "interleaved chunks",
    "k_a": "gradient-accumulation steps", "M_X": "torus axes of the data axis", "M_Y": "torus axes of the TP axis",
    "K": "every K-th layer recomputed",
    "E": "routed experts per MoE layer", "k_e": "experts each token is routed to", "F_e": "expert MLP width",
    "F_s": "shared experts' MLP width", "L_d": "dense (non-MoE) first layers", "E_p": "expert-parallel degree",
    "r_q": "MLA query latent width", "r_kv": "MLA key/value latent width", "d_r": "MLA rotary query/key width per head",
    "d_v": "MLA value width per head", "e_mm": "matmul efficiency (measured table at this shape)",
    "e_e": "routed experts' matmul efficiency (measured table at an expert's shape)",
    "R_fwd": "flash attention's forward FLOP/s (measured table at this head dim and length, causal)",
    "R_bwd": "flash attention's backward FLOP/s (measured table at this head dim and length, causal)",
    "P": "parameters on this device before data-axis sharding",
    "P_e": "of P, routed experts' (sharded over N / min(E_p, N) expert shards)",
    "P_c": "of P, the matmul weights whose autocast copy is saved (no norms or biases; none of a recomputed layer)",
    "A": "activation bytes on this device before data-axis sharding",
    "U": "parameters whose low-precision copy autograd does not save (first matmuls of a stack fed with data)",
}


@record
class Formula:
    """The aggregator's result in letters, and the letters' values at the layout."""

    cost: Cost
    values: dict  # Symbol -> number

    def at(self, expr):
        """``expr`` evaluated at the layout (exact rational arithmetic, then a float)."""
        return at(expr, self.values)

    def legend(self, *exprs) -> dict:
        """Letter -> (meaning, value) for the letters the expressions use."""
        used = set().union(*(sp.sympify(e).free_symbols for e in exprs)) if exprs else set(self.values)
        return {str(s): (MEANINGS.get(str(s), ""), self.values[s]) for s in sorted(used, key=str) if s in self.values}

    @staticmethod
    def functions(*exprs) -> dict:
        """Function name -> what it stands for, for the opaque functions the expressions use: NCCL's tuner's time
        (cost/nccl.py nccl_seconds), which becomes a number once its arguments are."""
        found = set().union(*(sp.sympify(e).atoms(sp.Function) for e in exprs))
        return {name: _nccl_meaning(name) for name in sorted({type(f).__name__ for f in found})
                if name.startswith("t_NCCL_")}


def _nccl_meaning(name: str) -> str:
    """What t_NCCL_<op>[_<algorithm>][_fitted](S, N, g) stands for."""
    rest, fitted = name.removeprefix("t_NCCL_"), name.endswith("_fitted")
    rest = rest.removesuffix("_fitted")
    ops = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "reduce", "send_recv")
    op = max((o for o in ops if rest.startswith(o)), key=len, default=rest)
    algorithm = rest[len(op) + 1:] or "the algorithm and protocol NCCL's tuner picks"
    return (f"seconds of one {op.replace('_', '-')} of an S-byte buffer (nccl-tests' size; the 1st argument) over n nodes "
            f"of g GPUs (the 2nd and 3rd), by NCCL's tuning "
            f"model ({algorithm}){' with the spec calibration' if fitted else ''}: a number once S, N, g are")


def symbol(name: str):
    """The symbol of a letter, with the assumptions the shape and point give it."""
    if name in ("e_mm", "e_e", "R_fwd", "R_bwd"):
        return sp.Symbol(name, positive=True)
    return letter(name)


def formula(model, recipe, layout, hardware=None, **options) -> Formula:
    """:func:`evaluate` with letters; ``values`` holds each letter's value for this layout."""
    shape, point = layout_shape(model, layout), Point.of(layout)
    cost = evaluate(shape.symbolic(), recipe, point.symbolic(), hardware, **options)
    values = {symbol(SHAPE_LETTERS[f]): v for f, v in shape.values().items()}
    values.update({symbol(POINT_LETTERS[f]): v for f, v in point.values().items()})
    if cost.step is not None and isinstance(cost.step.matmul_efficiency, sp.Basic):
        numeric = evaluate(shape, recipe, point, hardware, **options)
        values[symbol("e_mm")] = numeric.step.matmul_efficiency
        if isinstance(cost.step.expert_efficiency, sp.Basic):
            values[symbol("e_e")] = numeric.step.expert_efficiency
        for name, rate in zip(("R_fwd", "R_bwd"), numeric.step.attention_rates or ()):
            values[symbol(name)] = rate
    return Formula(cost, values)


def at(expr, values: dict):
    """An expression evaluated at ``values`` (exact where the expression is)."""
    result = sp.sympify(expr).xreplace({k: sp.Integer(v) if isinstance(v, int) else sp.Float(v, 30)
                                        for k, v in values.items()})
    return float(result)


def memory_in_p_and_a(model, recipe, layout) -> tuple[dict, dict]:
    """The heaviest stage's components in P, A, U and N (the CS336 view), and their values.

    The same component functions as the numbers, with P, A and U for the stage's parameters,
    activation bytes and unsaved weight copies: evaluated at the values, they give the same total.
    """
    shape, point = layout_shape(model, layout), Point.of(layout)
    numeric = evaluate(shape, recipe, point).heaviest
    fsdp = symbol("N") if point.fsdp != 1 else 1
    ep = symbol("E_p") if point.ep != 1 else 1
    lettered = replace(point, fsdp=fsdp, ep=ep, shard_activations=exact_fraction(point.shard_activations))
    P, A, U, P_e, P_c = symbol("P"), symbol("A"), symbol("U"), symbol("P_e"), symbol("P_c")
    unsaved_value = cm.unsaved_params(shape, point, numeric.stage)
    unsaved = U if unsaved_value else 0
    routed = P_e if numeric.stage.expert_params else 0
    copied_value = numeric.stage.copied_params
    copied = P if copied_value is None or copied_value == numeric.stage.params else P_c
    comps = cm.components(recipe, lettered, params=P, activation_bytes=A, expert_params=routed,
                          weight_copies=cm.weight_copy_bytes(recipe, lettered, params=P, unsaved=unsaved, copied=copied))
    values = {P: numeric.stage.params, A: numeric.activation_bytes, U: unsaved_value,
              P_e: numeric.stage.expert_params, P_c: copied_value if copied == P_c else 0}
    for letter_, value in ((fsdp, point.fsdp), (ep, point.ep)):
        if letter_ != 1:
            values[letter_] = value
    comps = {k: sp.sympify(v) for k, v in comps.items()}
    if ep != 1 and fsdp != 1 and point.fsdp >= point.ep:  # N shards the experts further: min(E_p, N) is E_p
        comps = {k: v.replace(lambda e: isinstance(e, sp.Min) and set(e.args) == {ep, fsdp}, lambda e: ep)
                 for k, v in comps.items()}
    return comps, values


def collect_total(components: dict):
    """The total with the 1/N terms gathered: e.g. (16 P + A/2)/N + A/2."""
    total = sp.expand(sum(components.values()))
    n = symbol("N")
    return sp.collect(total, 1 / n) if total.has(n) else total


def text(expr) -> str:
    """A formula as a person writes it in plain text: 'alpha = C/W' (not Eq(alpha, C/W)), positive terms
    first ('M_max - A', not '-A + M_max'), '(x if c else y)', 'L mod p', 'min(a, b)'; without conditions or
    mod it is still readable by sympy's parser."""
    return _Text().doprint(expr)


class _Text(sp.printing.str.StrPrinter):
    """sympy's str printer with ordinary notation: 'a = b', '(x if c else y)', 'L mod p', 'min(a, b)'."""

    def _print_Equality(self, expr):
        return f"{self._print(expr.lhs)} = {self._print(expr.rhs)}"

    def _print_Piecewise(self, expr):
        parts = [self._print(value) if cond is sp.true else f"{self._print(value)} if {self._print(cond)}"
                 for value, cond in expr.args]
        return "(" + " else ".join(parts) + ")"

    def _print_Mod(self, expr):
        return f"({self._print(expr.args[0])} mod {self._print(expr.args[1])})"

    def _print_Min(self, expr):
        return "min(" + ", ".join(self._print(a) for a in expr.args) + ")"

    def _print_Max(self, expr):
        return "max(" + ", ".join(self._print(a) for a in expr.args) + ")"

    def _print_Add(self, expr, order=None):
        terms = sorted(expr.as_ordered_terms(), key=lambda term: term.could_extract_minus_sign())
        out = self._print(terms[0])
        for term in terms[1:]:
            out += f" - {self._print(-term)}" if term.could_extract_minus_sign() else f" + {self._print(term)}"
        return out


def latex(expr) -> str:
    """LaTeX of a formula with every multi-letter name set as one name (:func:`latex_name`)."""
    names = {sym: latex_name(sym.name) for sym in getattr(expr, "free_symbols", ())}
    return sp.latex(expr, symbol_names={sym: name for sym, name in names.items() if name is not None})


def latex_name(name: str) -> str | None:
    """A letter's LaTeX where sympy's would set a name of several letters as a product of italic ones: a
    lower-case word (grads, master_weights) as text, 'master weights'; a base or subscript of several
    letters upright (T_{\\mathrm{math}}, e_{\\mathrm{mm}}, M_{\\mathrm{max}}); Greek names as Greek (alpha_Y).
    None for a name that is not letters and underscores, such as '(B/N)' (sympy's own then)."""
    base, _, sub = name.partition("_")
    if not (base.isalpha() and (sub.replace("_", "").isalpha() or not sub)):
        return None
    if len(base) > 1 and base.islower() and base not in _GREEK:
        return r"\text{" + name.replace("_", " ") + "}"
    return _upright(base) + (f"_{{{_upright(sub)}}}" if sub else "")


def _upright(word: str) -> str:
    if len(word) == 1:
        return word
    return "\\" + word if word in _GREEK else r"\mathrm{" + word.replace("_", r"\_") + "}"

