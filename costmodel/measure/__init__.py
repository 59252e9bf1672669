"""Measurements: collective benchmark results (our harness, nccl-tests logs), validation and fitting."""
