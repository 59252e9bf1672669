"""Whether a layout can run a model: every divisibility the split needs, with the reason."""

from __future__ import annotations

from costmodel.errors import CostModelError
from costmodel.specs.layout import Layout
from costmodel.specs.model import FFNStack


def _divides(degree: int, flag: str, size: int, what: str) -> None:
    if size % degree:
        raise CostModelError(f"{flag} {degree} does not divide {what} = {size:,}")


def check_layout(model, layout: Layout) -> None:
    """Raise :class:`CostModelError` naming the first divisibility the layout breaks."""
    if layout.pp > model.layers:
        raise CostModelError(f"--pp {layout.pp} is more than the model's {model.layers} layers")
    if layout.tp > 1:
        if isinstance(model, FFNStack):
            _divides(layout.tp, "--tp", model.d_ff, "d_ff (F)")
            if layout.sp:
                _divides(layout.tp, "--tp", model.d_model, "d_model (D), split by --sp")
        else:
            _divides(layout.tp, "--tp", model.heads, "the attention heads")
            _divides(layout.tp, "--tp", model.kv_heads, "the KV heads")
            _divides(layout.tp, "--tp", model.ffn_hidden, "the MLP hidden size (F)")
    if layout.cp > 1 and not isinstance(model, FFNStack) and model.seq_len % layout.cp:
        raise CostModelError(f"--cp {layout.cp} does not divide the sequence length {model.seq_len:,} of {model.name}")
    if layout.sp and layout.tokens % layout.tp:
        raise CostModelError(f"--tp {layout.tp} with --sp does not divide --tokens {layout.tokens}")
