"""The one aggregator: memory, FLOPs, collectives and step time of a model, recipe and layout.

Evaluated unchanged with numbers (one layout: the CLI), numpy arrays (one element per layout: the
planner) and sympy symbols (the printed formula, ``explain``, the solvers). Entry points:
:func:`costmodel.cost.evaluate.evaluate` and the per-quantity modules.
"""
