"""Problem sets that generate themselves: a problem in the original's wording with other numbers, and
its answer key computed by the same solvers and derivations the commands print.

Each kind (:data:`KINDS`) is a module with ``TITLE``, ``SOURCE`` and ``problem(seed) -> Homework``;
seed 0 is the original problem (the XXL problem's answers are in shared/reference/conventions.md),
any other seed a variant drawn with ``random.Random(seed)``, so the same seed gives the same problem.
"""

from __future__ import annotations

import json
import math
from dataclasses import field

from costmodel.errors import CostModelError
from costmodel.inputs.files import shown
from costmodel.record import record

FORMATS = ("text", "markdown", "latex", "ipynb")


@record
class Part:
    """One question of a problem and its worked answer."""

    label: str  # "(a)"
    question: str
    answer: list[str]  # lines of the worked answer, each step with its formula, values and result
    values: dict = field(default_factory=dict)  # the answer's numbers, by name (what the tests compare)


@record
class Homework:
    """One generated problem set: its parts, conventions and worked answer key."""

    kind: str
    seed: int
    title: str
    intro: str
    parts: list[Part]
    conventions: list[str]
    params: dict

    def render(self, fmt: str = "text", answers: bool = False) -> str:
        """The problem (and with ``answers`` its key) as text, Markdown, LaTeX or a notebook (JSON)."""
        if fmt not in FORMATS:
            raise CostModelError(f"--format {shown(fmt)}: use {', '.join(FORMATS)}")
        if fmt == "ipynb":
            return _notebook(self, answers)
        if fmt == "latex":
            return _latex(self, answers)
        md = fmt == "markdown"
        lines = [f"## {self.title}" if md else self.title, "", self.intro, ""]
        for part in self.parts:
            lines.append(f"**{part.label}** {part.question}" if md else f"{part.label} {part.question}")
            if answers:
                lines += ["", "*Answer:*" if md else "Answer:"] + [f"    {line}" for line in part.answer]
            lines.append("")
        if answers:
            lines += ["Conventions: " + "; ".join(self.conventions) + "."]
        return "\n".join(lines).rstrip() + "\n"

    def as_dict(self) -> dict:
        return {"kind": self.kind, "seed": self.seed, "title": self.title, "intro": self.intro,
                "params": self.params, "conventions": self.conventions,
                "parts": [{"label": p.label, "question": p.question, "answer": p.answer, "values": p.values}
                          for p in self.parts]}


def derivation_lines(derivation) -> list[str]:
    """An `explain` derivation's steps as answer lines (its title and conventions are the problem's)."""
    from costmodel.solve.render import LETTERS

    text = derivation.render("text").splitlines()
    return [line for line in text[1:] if line.strip() and not line.startswith(("Conventions", LETTERS, "- "))]


def _latex(hw: Homework, answers: bool) -> str:
    from costmodel.solve.render import latex_text

    lines = [rf"\section*{{{latex_text(hw.title)}}}", latex_text(hw.intro), r"\begin{enumerate}"]
    for part in hw.parts:
        lines.append(rf"  \item[{part.label}] {latex_text(part.question)}")
        if answers:
            lines.append(r"  \begin{itemize}")
            lines += [rf"    \item \texttt{{{latex_text(line)}}}" for line in part.answer]
            lines.append(r"  \end{itemize}")
    lines.append(r"\end{enumerate}")
    if answers:
        lines.append("Conventions: " + latex_text("; ".join(hw.conventions)) + ".")
    return "\n".join(lines) + "\n"


def _notebook(hw: Homework, answers: bool) -> str:
    """A Jupyter notebook (nbformat 4): the problem in Markdown, a cell that recomputes each part's key
    with the library (so the numbers come from the formulas, not from this text), and asserts."""
    def markdown(text):
        return {"cell_type": "markdown", "metadata": {}, "source": text}

    def code(text):
        return {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [], "source": text}

    cells = [markdown(f"# {hw.title}\n\n{hw.intro}"),
             code(f"from costmodel.homework import problem\nhw = problem({hw.kind!r}, seed={hw.seed})")]
    for i, part in enumerate(hw.parts):
        cells.append(markdown(f"**{part.label}** {part.question}"))
        cells.append(code(f"# your answer here; the key: hw.parts[{i}].values\nanswer = None"))
        if answers:
            cells.append(markdown("*Answer:*\n\n```\n" + "\n".join(part.answer) + "\n```"))
        for name, value in part.values.items():  # the part's first number (or yes/no) as the checked answer
            if isinstance(value, (int, float)):
                literal = f"float({str(value)!r})" if isinstance(value, float) and not math.isfinite(value) else repr(value)
                cells.append(code(f"assert hw.parts[{i}].values[{name!r}] == {literal}"))
                break
    for i, cell in enumerate(cells):
        cell["id"] = f"cell-{i}"
    notebook = {"cells": cells, "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                             "language": "python"}},
                "nbformat": 4, "nbformat_minor": 5}
    return json.dumps(notebook, indent=1) + "\n"


def kinds() -> dict:
    """Kind name -> module (imported on first use)."""
    from costmodel.homework import bubble, tpu_batch, xxl, zero

    return {"xxl": xxl, "zero": zero, "bubble": bubble, "tpu-batch": tpu_batch}


def problem(kind: str, seed: int = 0) -> Homework:
    """The problem of ``kind`` for ``seed`` (0: the original)."""
    from costmodel.specs.load import unknown

    known = kinds()
    if kind not in known:
        raise unknown("homework", kind, list(known))
    if not (isinstance(seed, int) and 0 <= seed < 2**31):
        raise CostModelError(f"--seed {shown(seed)}: use a whole number from 0 to 2^31 - 1")
    return known[kind].problem(seed)
