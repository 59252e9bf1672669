"""Per-model quantities: parameters (by part), FLOPs per token, activations per token, per layer.

Dispatches on the spec's kind (FFN stack or transformer) to the formulas.
"""

from __future__ import annotations

from costmodel.formulas import flops as fl
from costmodel.formulas import params as pa
from costmodel.specs.model import FFNStack, Transformer


def _transformer_shape(model: Transformer) -> dict:
    return dict(hidden=model.hidden, ffn_hidden=model.ffn_hidden, heads=model.heads,
                kv_heads=model.kv_heads, head_dim=model.dim_per_head, gated=model.mlp == "swiglu")


def block_params(model) -> int:
    """Parameters of one repeated block."""
    if isinstance(model, FFNStack):
        return pa.ffn_block_params(d_model=model.d_model, d_ff=model.d_ff, gated=model.gated)
    return pa.transformer_layer_params(**_transformer_shape(model), bias=model.bias,
                                       norm_bias=model.norm == "layernorm", qkv_bias=model.qkv_bias)


def param_parts(model) -> dict[str, int]:
    """Parameters by part; the parts sum to the total."""
    if isinstance(model, FFNStack):
        return {"blocks": model.layers * block_params(model)}
    shape = _transformer_shape(model)
    norm_bias = model.norm == "layernorm"
    parts = {
        "embedding": pa.embedding_params(vocab=model.vocab, hidden=model.hidden),
        "position": pa.position_params(max_position=model.max_position, hidden=model.hidden)
        if model.position == "learned" else 0,
        "attention": model.layers * pa.attention_params(
            hidden=model.hidden, heads=model.heads, kv_heads=model.kv_heads,
            head_dim=model.dim_per_head, bias=model.bias, qkv_bias=model.qkv_bias),
        "mlp": model.layers * pa.mlp_params(hidden=model.hidden, ffn_hidden=model.ffn_hidden,
                                            gated=shape["gated"], bias=model.bias),
        "norms": (2 * model.layers + 1) * pa.norm_params(hidden=model.hidden, with_bias=norm_bias),
        "output": pa.output_params(vocab=model.vocab, hidden=model.hidden, tied=model.tied_embeddings),
    }
    return {name: count for name, count in parts.items() if count}


def total_params(model) -> int:
    """All trainable parameters."""
    return sum(param_parts(model).values())


def _transformer_flops_shape(model: Transformer, seq_len: int | None) -> dict:
    shape = _transformer_shape(model)
    return dict(shape, layers=model.layers, vocab=model.vocab, seq_len=seq_len or model.seq_len)


def forward_flops_per_token(model, seq_len: int | None = None):
    """Forward matmul FLOPs per token (the transformer's attention term uses ``seq_len``)."""
    if isinstance(model, FFNStack):
        return fl.ffn_forward_flops_per_token(d_model=model.d_model, d_ff=model.d_ff,
                                              layers=model.layers, gated=model.gated)
    return fl.transformer_forward_flops_per_token(**_transformer_flops_shape(model, seq_len))


def layer_forward_flops_per_token(model, seq_len: int | None = None):
    """Forward FLOPs per token of one repeated block."""
    if isinstance(model, FFNStack):
        return fl.ffn_forward_flops_per_token(d_model=model.d_model, d_ff=model.d_ff, layers=1, gated=model.gated)
    shape = _transformer_flops_shape(model, seq_len)
    shape.pop("layers"), shape.pop("vocab")
    return fl.transformer_layer_forward_flops_per_token(**shape)


def backward_flops_per_token(model, seq_len: int | None = None):
    """Backward matmul FLOPs per token."""
    if isinstance(model, FFNStack):
        return fl.ffn_backward_flops_per_token(
            d_model=model.d_model, d_ff=model.d_ff, layers=model.layers, gated=model.gated,
            input_requires_grad=model.input_requires_grad)
    return fl.transformer_backward_flops_per_token(**_transformer_flops_shape(model, seq_len))


def first_layer_unsaved_params(model) -> int:
    """Weights whose bf16 copy autograd does not save: the first matmuls of a stack fed with data."""
    if isinstance(model, FFNStack) and not model.input_requires_grad:
        return (2 if model.gated else 1) * model.d_model * model.d_ff
    return 0
