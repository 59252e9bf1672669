"""Strategies: wire the pure formulas to specs and a layout, one module per concern."""
