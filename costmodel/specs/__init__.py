"""Specs: model, hardware, training recipe and parallel layout (pydantic, frozen, extra='forbid')."""
