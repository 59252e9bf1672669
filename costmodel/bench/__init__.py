"""Benchmarks of real hardware. Imports torch lazily; never imported by the calculator path."""
