"""Printers: one module per command group. They format results (bytes, FLOPs, seconds) as rich
tables naming their units, or as JSON; they compute nothing (the numbers come from ``costmodel.cost``)."""

from costmodel.report.common import console, emit_json, emitted_json, layout_text, number, table

__all__ = ["console", "emit_json", "emitted_json", "layout_text", "number", "table"]
