"""Derivations as numbered steps: the formula in Scaling Book letters, the values, the result.

The formulas are the library's own functions called with sympy symbols; the numbers are the same
functions called with numbers (the solvers' answers), so the two cannot drift apart.
"""

from __future__ import annotations

from dataclasses import field

import sympy as sp

from costmodel.formulas import scaling as sc
from costmodel.record import record
from costmodel.solve.render import latex, render


@record
class Step:
    """One step of a derivation: the formula in letters, the values substituted, the result."""

    title: str
    formula: object | None  # sympy expression or relation, in letters
    values: str  # the letters' values, substituted
    result: str  # the number, with its unit


@record
class Derivation:
    """Numbered steps that render themselves: text for print(), Markdown + LaTeX in Jupyter."""

    title: str
    steps: list
    conventions: list
    meanings: dict = field(default_factory=dict)  # letter -> what it stands for, its unit and value

    def render(self, fmt: str = "text") -> str:
        return render(self.steps, fmt, self.title, self.conventions, self.legend())

    def legend(self) -> dict:
        """Every letter the steps' formulas use, in order of first use -> what it stands for: the derivation's
        meanings, else the step that defines it (its formula's left side), else costmodel.cost.symbolic.MEANINGS."""
        from costmodel.cost.symbolic import MEANINGS

        defined, used = {}, {}  # dicts keep the order of first use
        for i, s in enumerate(self.steps, 1):
            if isinstance(s.formula, sp.Eq) and isinstance(s.formula.lhs, sp.Symbol):
                defined.setdefault(s.formula.lhs.name, f"{s.title} (step {i})")
            used.update(dict.fromkeys(sorted(sym.name for sym in getattr(s.formula, "free_symbols", ()))))
        return {name: self.meanings.get(name) or defined.get(name) or MEANINGS.get(name, "") for name in used}

    def __str__(self) -> str:
        return self.render("text")

    def as_dict(self) -> dict:
        """The derivation as data (``--json``): each step's formula as text and as LaTeX."""
        from costmodel.cost.symbolic import text

        return {"title": self.title, "conventions": list(self.conventions),
                "steps": [{"title": s.title, "formula": None if s.formula is None else text(s.formula),
                           "latex": None if s.formula is None else latex(s.formula), "values": s.values,
                           "result": s.result} for s in self.steps],
                "legend": [{"symbol": name, "latex": latex(sp.Symbol(name)), "meaning": meaning}
                           for name, meaning in self.legend().items()]}

    def _repr_markdown_(self) -> str:
        return self.render("markdown")


C, W, B, D, F, N, X, Y, MX, MY, alpha = sp.symbols("C W B D F N X Y M_X M_Y alpha", positive=True)


def batch_steps(answer) -> list[Step]:
    """solve batch, derived: alpha, the three times, the condition, B/N and B."""
    p = answer.problem
    k = sc.PASS_FACTOR[p.pass_]
    two_levels = p.tp_bandwidth is not None  # GPUs: TP inside the NVLink domain, FSDP across nodes
    w_y, alpha_y = (sp.Symbol("W_Y", positive=True), sp.Symbol("alpha_Y", positive=True)) if two_levels else (W, alpha)
    t_math = sc.math_seconds(batch=B, d_model=D, d_ff=F, devices=N, peak_flops=C, factor=k)
    t_fsdp = sc.fsdp_seconds(d_model=D, d_ff=F, tp=Y, bandwidth=W, mx=MX, factor=k)
    t_tp = sc.tp_seconds(batch=B, d_model=D, fsdp=X, bandwidth=w_y, my=MY, factor=k)
    comms = sc.comms_seconds(fsdp_time=sp.Symbol("T_FSDP"), tp_time=sp.Symbol("T_TP"), overlap=p.overlap)
    per_token = p.times(1)  # T_math and T_TP grow linearly in B (their value at B = 1 is the coefficient), T_FSDP does not
    closed = sc.fsdp_tp_batch_per_device(
        fsdp_bound=sc.fsdp_batch_bound(alpha=alpha, tp=Y, mx=MX),
        tp_share=sc.tp_comm_share(alpha=alpha_y, tp=Y, my=MY, d_ff=F), overlap=p.overlap)
    values = (f"D = {p.d_model}, F = {p.d_ff}, X = {p.fsdp}, Y = {p.tp}, N = X Y = {p.devices}, "
              f"M_X = {p.mx}, M_Y = {p.my}, C = {p.peak_flops:.4g} FLOP/s, W = {p.bandwidth:.4g} B/s"
              + (f", W_Y = {p.w_tp:.4g} B/s (the TP axis's level)" if two_levels else ""))
    steps = [
        Step("arithmetic intensity of the link", sp.Eq(alpha, C / W), values, f"alpha = {p.alpha:,.1f} FLOP/B"),
        *([Step("... and of the TP axis's link", sp.Eq(alpha_y, C / w_y), "", f"alpha_Y = {p.alpha_tp:,.1f} FLOP/B")]
          if two_levels else []),
        Step(f"matmul time per layer ({p.pass_})", sp.Eq(sp.Symbol("T_math"), t_math), "B = the global batch",
             f"T_math = {per_token['math']:.4e} s x B"),
        Step("FSDP weight all-gather per layer", sp.Eq(sp.Symbol("T_FSDP"), t_fsdp), "",
             f"T_FSDP = {per_token['fsdp']:.4e} s" + (" (X = 1: no gather)" if p.fsdp == 1 else "")),
        Step("TP activation collectives per layer", sp.Eq(sp.Symbol("T_TP"), t_tp), "",
             f"T_TP = {per_token['tp']:.4e} s x B" + (" (Y = 1: no TP traffic)" if p.tp == 1 else "")
             + ("" if answer.compute_bound_ever else " >= T_math at every B")),
        Step(f"compute-bound when T_math >= T_comms (overlap '{p.overlap}')",
             sp.GreaterThan(sp.Symbol("T_math"), comms), "", ""),
        Step("with no FSDP gather (T_FSDP = 0) it holds at every batch where", sp.StrictGreaterThan(
            1, sc.tp_comm_share(alpha=alpha_y, tp=Y, my=MY, d_ff=F)), "", f"B/N = 0: {answer.verdict}")
        if answer.any_batch else
        Step("solved for the tokens per device", sp.GreaterThan(B / N, closed), "",
             f"B/N = {answer.per_device_batch:,.1f} tokens per device (binding: {answer.binding_term})"),
        Step("global batch", sp.Eq(B, N * sp.Symbol("(B/N)")), f"N = {p.devices}",
             "B = 0 tokens: any global batch" if answer.any_batch else f"B = {answer.global_batch:,.0f} tokens"),
    ]
    return steps


def fsdp_steps(answer, sym_components: dict, letters: dict) -> list[Step]:
    """solve fsdp, derived: memory as a + b/N, the inequality solved for N, the integer answer."""
    from costmodel.cost.symbolic import collect_total, symbol

    NS = symbol("N")
    total = collect_total(sym_components)
    limit = sp.Symbol("M_max", positive=True)
    solved = [tidy_fraction(root) for root in sp.solve(sp.Eq(total, limit), NS)]
    shown = ", ".join(f"{k} = {v:,}" for k, v in letters.items())
    return [
        Step("memory per device (bytes) with N FSDP shards", sp.Eq(sp.Symbol("M"), total), shown,
             f"M(N) = {answer.replicated_bytes:,.0f} + {answer.sharded_bytes:,.0f} / N bytes"),
        Step("fits when M(N) < M_max, solved for N",
             sp.StrictGreaterThan(NS, solved[0]) if solved else None, f"M_max = {answer.limit_bytes:,.0f} B",
             f"N > {answer.threshold:,.2f}" if answer.n_fsdp else
             "no N: what N does not shard already exceeds M_max"),
        Step("smallest integer N_FSDP", None, "",
             f"N_FSDP = {answer.n_fsdp}" if answer.n_fsdp else
             (f"at most {answer.max_tokens:,} tokens leave room for some N" if answer.max_tokens else
              "nothing fits")),
    ]


def tidy_fraction(expr):
    """-16P/(A - M) -> 16P/(M - A): a fraction with no leading minus signs."""
    num, den = sp.fraction(sp.together(expr))
    if num.could_extract_minus_sign():
        num, den = -num, -den
    return num / den


#: the parts of P a memory derivation names where its components use them: (letter, what, why)
PARTS_OF_P = (("P_e", "of which routed experts (E / E_p per MoE layer), sharded over their own data group",
               "ep = {layout.ep}"),
              ("U", "of which the first matmuls, whose bf16 copy autograd does not save",
               "the stack's input needs no gradient"),
              ("P_c", "of which the matmul weights whose bf16 copy autograd saves",
               "no norms or biases; none of a recomputed layer"))


def memory_steps(model, layout, heaviest, sym_components: dict, letters: dict) -> list[Step]:
    """cost4d memory, derived: parameters, each component, the total."""
    from costmodel.cost.symbolic import collect_total

    st = heaviest.stage
    used = {sym.name for expr in sym_components.values() for sym in sp.sympify(expr).free_symbols}
    parts = [Step("parameters on this device before data-axis sharding", sp.Symbol("P"),
                  f"{model.name}, tp = {layout.tp}, pp = {layout.pp}", f"P = {st.params:,}")]
    parts += [Step(title, sp.Symbol(name), why.format(layout=layout), f"{name} = {letters[name]:,}")
              for name, title, why in PARTS_OF_P if letters.get(name) and name in used]
    if st.activation_bytes_per_token:
        parts.append(Step("activation bytes saved for backward", sp.Symbol("A"),
                          f"{st.activation_bytes_per_token:,.0f} B per token x {layout.tokens:,} tokens"
                          + (f" / cp {layout.cp}" if layout.cp > 1 else ""),
                          f"A = {heaviest.activation_bytes:,.0f} B"))
    for name, expr in sym_components.items():
        if expr != 0:
            value = heaviest.components[name]
            parts.append(Step(name.replace("_", " "), sp.Eq(sp.Symbol(name), expr), "", f"{value:,.0f} B"))
    total = collect_total(sym_components)
    shown = {k: v for k, v in letters.items() if v and k in used}
    parts.append(Step("total per device", sp.Eq(sp.Symbol("M"), total),
                      ", ".join(f"{k} = {v:,}" for k, v in shown.items()),
                      f"M = {heaviest.total_bytes:,.0f} B = {heaviest.total_bytes / 1e9:,.2f} GB "
                      f"= {heaviest.total_bytes / 2**30:,.2f} GiB"))
    return parts


def memory_derivation(model, recipe, layout) -> Derivation:
    """`cost4d memory`, derived: the components in P, A, N (and U), their values, the total."""
    from costmodel.cost.evaluate import evaluate_layout
    from costmodel.cost.memory import weight_copy_kind
    from costmodel.cost.symbolic import memory_in_p_and_a

    cost = evaluate_layout(model, recipe, layout)
    comps, values = memory_in_p_and_a(model, recipe, layout)
    letters = {str(k): _whole(v) for k, v in values.items()}
    conventions = [f"recipe {recipe.name}: {recipe.description}",
                   f"weight copies: {weight_copy_kind(recipe, cost.point)}", "GB = 1e9 B, GiB = 2^30 B"]
    return Derivation(f"Memory per device: {model.name}", memory_steps(model, layout, cost.heaviest, comps, letters),
                      conventions, memory_meanings(letters, comps))


def fsdp_derivation(model, recipe, layout, answer, limit_source: str) -> Derivation:
    """`cost4d solve fsdp`, derived: memory as a + b/N, the inequality solved for N, the integer."""
    from costmodel.cost.symbolic import collect_total, memory_in_p_and_a
    from costmodel.solve.fsdp import regime_layout

    comps, values = memory_in_p_and_a(model, recipe, regime_layout(layout))
    used = collect_total(comps).free_symbols
    letters = {str(k): _whole(v) for k, v in values.items() if k in used and str(k) != "N"}
    conventions = [f"recipe {recipe.name}: {recipe.description}", f"limit from {limit_source}",
                   f"{layout.shard_activations:g} of the activations sharded over N"]
    meanings = {**memory_meanings(letters, comps), "N": "FSDP shards, the unknown",
                "M_max": f"the memory a device may hold = {answer.limit_bytes:,.0f} B"}
    return Derivation(f"Smallest N_FSDP: {model.name}", fsdp_steps(answer, comps, letters), conventions, meanings)


#: the unit a memory view's letter counts in (the degrees N, E_p count devices)
_UNITS = {"A": "B", "P": "parameters", "P_e": "parameters", "P_c": "parameters", "U": "parameters"}


def memory_meanings(letters: dict, components: dict) -> dict:
    """Letter -> 'what it stands for = value unit' for a memory view's letters (P, A, U, P_e, P_c, N, E_p), its
    components' names and M."""
    from costmodel.cost.symbolic import MEANINGS

    meanings = {k: f"{MEANINGS[k]} = {v:,}" + (f" {_UNITS[k]}" if k in _UNITS else "") for k, v in letters.items()}
    named = {name: f"bytes of {name.replace('_', ' ')} on one device" for name in components}
    return {**meanings, **named, "M": "bytes on one device of the heaviest pipeline stage"}


def split_steps(problem, split, rows: list | None) -> list[Step]:
    """`solve batch --optimize-split [--slice] [--what-if]`, derived: X_opt and its B/N, the best whole split of
    the slice, and what each change of the what-if table gives (each row the same solve, one input changed)."""
    p, steps = problem, []
    if split is not None:
        from costmodel.solve.split import clamp_note

        x_opt = sc.optimal_fsdp_degree(batch=B, devices=N, mx=MX, my=MY, d_ff=F)
        at_opt = sc.optimal_split_batch_per_device(alpha=alpha, mx=MX, my=MY, d_ff=F, overlap=p.overlap)
        note = clamp_note(p, split)
        steps += [
            Step("the split of N = X Y that minimises the communication (T_FSDP = T_TP there)",
                 sp.Eq(sp.Symbol("X_opt"), x_opt), f"B = the compute-bound global batch at that split, N = {p.devices}",
                 f"X_opt = {split.x_opt:.2f}" if not note else
                 f"{note}: X_opt = {split.x_opt:.2f}"),
            Step("compute-bound at the optimal split", sp.GreaterThan(B / N, at_opt) if not note else None,
                 f"M_X = {p.mx}, M_Y = {p.my}", f"B/N = {split.continuous_per_device_batch:,.1f} tokens per device"),
        ]
        if split.best is not None:
            tried = "; ".join(f"X = {c.x} (M_X = {c.mx}), Y = {c.y} (M_Y = {c.my}): "
                              + (f"{c.per_device_batch:,.1f}" if c.per_device_batch != float("inf") else "never")
                              for c in sorted(split.candidates, key=lambda c: c.per_device_batch))
            b = split.best
            steps.append(Step("the best split of the slice (whole torus axes per logical axis)", None, tried,
                              f"X = {b.x} (M_X = {b.mx}), Y = {b.y} (M_Y = {b.my}): B/N = {b.per_device_batch:,.1f}"))
    for row in rows or []:
        steps.append(Step(f"what if: {row.change}", None, row.assumption,
                          "no such layout" if row.per_device_batch is None else
                          f"B/N = {row.per_device_batch:,.1f}, global B = {row.global_batch:,.0f}"))
    return steps


def batch_derivation(answer, device_name: str, split=None, rows: list | None = None) -> Derivation:
    """`cost4d solve batch`, derived, with the conventions it used (and, given them, the split and what-if
    rows `solve batch --optimize-split --what-if` prints)."""
    p = answer.problem
    sum_or_max = "T_FSDP + T_TP" if p.overlap == "sum" else "max(T_FSDP, T_TP)"
    from costmodel.solve.batch import MLP_ONLY

    conventions = [MLP_ONLY, f"overlap '{p.overlap}': T_comms = {sum_or_max}", f"pass '{p.pass_}'",
                   "bf16 weights and activations on the wire (2 bytes)",
                   "the (n-1)/n ring factor is dropped, as in the Scaling Book",
                   f"C and W from {device_name} unless overridden"]
    return Derivation(f"Compute-bound batch on {device_name}, X = {p.fsdp}, Y = {p.tp}",
                      batch_steps(answer) + split_steps(p, split, rows), conventions, batch_meanings(p))


def batch_meanings(p) -> dict:
    """The Scaling Book's letters of a batch question, with their values and units."""
    return {"B": "global batch (tokens)", "(B/N)": "tokens per device, the least the bound solved for B/N allows",
            "D": f"model width = {p.d_model:,}", "F": f"MLP hidden width = {p.d_ff:,}",
            "N": f"devices, X Y = {p.devices:,}", "X": f"FSDP degree = {p.fsdp:,}", "Y": f"TP degree = {p.tp:,}",
            "M_X": f"torus axes the FSDP axis spans = {p.mx}", "M_Y": f"torus axes the TP axis spans = {p.my}",
            "C": f"peak FLOP/s of one device = {p.peak_flops:.4g} FLOP/s",
            "W": f"link bandwidth of one device on the FSDP axis = {p.bandwidth:.4g} B/s",
            **({"W_Y": f"link bandwidth of one device on the TP axis = {p.w_tp:.4g} B/s"}
               if p.tp_bandwidth is not None else {})}


def _whole(value):
    """Whole floats as ints, so they print without a trailing .0."""
    return int(value) if isinstance(value, float) and value.is_integer() else value
