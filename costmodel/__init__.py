"""cost4d: what 4D-parallel training costs in memory, FLOPs, communication and time.

The import is deliberately light: the numeric path needs neither sympy nor numpy nor torch.
"""

__version__ = "0.1.0"
