"""Pure formulas: arithmetic on keyword arguments, no specs, no I/O.

Every function returns a number for numbers, an array for numpy arrays and an expression for
sympy symbols. Boolean and enum arguments are structure (which terms exist), never quantities.
"""
