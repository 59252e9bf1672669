"""A derivation's steps as text, Markdown (with $LaTeX$) or a LaTeX enumerate, with its legend and conventions
(costmodel.solve.explain builds the steps)."""

from __future__ import annotations

import sympy as sp

#: the heading of a text derivation's legend
LETTERS = "Letters:"

_LATEX = {"\\": r"\textbackslash{}", "_": r"\_", "%": r"\%", "&": r"\&", "#": r"\#", "$": r"\$", "{": r"\{",
          "}": r"\}", "~": r"\textasciitilde{}", "^": r"\^{}", "<": r"$<$", ">": r"$>$", "\n": " ", "\r": " "}


def latex_text(text: str) -> str:
    """Text-mode LaTeX: every character LaTeX treats specially escaped in one pass, line breaks as
    spaces (so no text leaves a comment or a paragraph); '>=' and '<=' as the signs they stand for."""
    return "".join(_LATEX.get(char, char) for char in text).replace("$>$=", r"$\geq$").replace("$<$=", r"$\leq$")


def readable(expr) -> str:
    """A step's formula as text for people: 'T_math = 4 B D F/(C N)', 'alpha^2' (the JSON keeps
    costmodel.cost.symbolic.text's '4*B*D*F/(C*N)', which sympy reads back)."""
    from costmodel.cost.symbolic import text

    return text(expr).replace("**", "^").replace("*", " ")


def latex(expr) -> str:
    """LaTeX of a step's formula, each name of several letters set as one (cost.symbolic.latex_name)."""
    from costmodel.cost.symbolic import latex as symbolic_latex

    return symbolic_latex(expr)


def render(steps: list, fmt: str, title: str, conventions: list[str], legend: dict | None = None) -> str:
    """Text, Markdown (with $LaTeX$) or a LaTeX enumerate; then each letter's meaning (``legend``) and the
    conventions."""
    legend = legend or {}
    lines = []
    if fmt == "latex":
        lines += [f"% {latex_text(title)}", r"\begin{enumerate}"]
        for s in steps:
            body = f": $ {latex(s.formula)} $" if s.formula is not None else ""
            parts = [latex_text(part) for part in (s.title, s.values, s.result)]
            result = rf" \quad \textbf{{{parts[2]}}}" if s.result else ""
            lines.append(rf"  \item {parts[0]}{body} {parts[1]}{result}".rstrip())
        lines.append(r"\end{enumerate}")
        if legend:
            lines.append(r"Letters: " + "; ".join(f"${latex(sp.Symbol(name))}$: {latex_text(meaning)}"
                                                    for name, meaning in legend.items()) + ".")
        lines.append(r"Conventions: " + "; ".join(latex_text(c) for c in conventions) + ".")
        return "\n".join(lines)
    md = fmt == "markdown"
    lines.append(f"## {title}" if md else title)
    for i, s in enumerate(steps, 1):
        formula = "" if s.formula is None else (f"${latex(s.formula)}$" if md else readable(s.formula))
        step = [f"{i}. {s.title}" + (f": {formula}" if formula else "")]
        if s.values:
            step.append(f"   {s.values}")
        if s.result:
            step.append(f"   -> {'**' + s.result + '**' if md else s.result}")
        lines += [line + "  " for line in step[:-1]] + step[-1:] if md else step  # Markdown: a line break each
    if legend:
        lines += ["", "**Letters**" if md else LETTERS]
        lines += [f"- {'$' + latex(sp.Symbol(name)) + '$' if md else name}: {meaning}"
                  for name, meaning in legend.items()]
    lines.append("")
    lines.append("Conventions:" if not md else "**Conventions**")
    lines += [f"- {c}" for c in conventions]
    return "\n".join(lines)
