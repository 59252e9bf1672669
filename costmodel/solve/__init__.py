"""Solvers: inverse questions answered from the formulas (smallest N_FSDP, compute-bound batch, split)."""
