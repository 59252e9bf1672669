"""Hugging Face config.json -> Transformer spec, for Llama, Mistral and Qwen2-style models.

Keys as in transformers' LlamaConfig / MistralConfig / Qwen2Config. ``seq_len`` is taken from
max_position_embeddings (the trained context; pass a shorter --tokens/--seq where you train shorter).
"""

from __future__ import annotations

from costmodel.errors import CostModelError
from costmodel.inputs.files import shown

SUPPORTED = ("llama", "mistral", "qwen2")
_REQUIRED = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "vocab_size",
             "max_position_embeddings")


def is_hf_config(data: dict) -> bool:
    return "model_type" in data or "architectures" in data


def from_hf_config(data: dict, name: str, where: str) -> dict:
    """The Transformer spec fields of a config.json, or one line naming what is missing or unsupported."""
    kind = data.get("model_type")
    if kind not in SUPPORTED:
        raise CostModelError(f"{where}: model_type {shown(kind, 40)} is not supported; cost4d reads "
                             f"{', '.join(SUPPORTED)} configs")
    missing = [key for key in _REQUIRED if key not in data]
    if missing:
        raise CostModelError(f"{where}: missing {missing[0]!r} (needed for a {kind} config)")
    if data.get("hidden_act", "silu") != "silu":
        raise CostModelError(f"{where}: hidden_act {shown(data['hidden_act'], 40)}: only SiLU (SwiGLU) MLPs are supported")
    heads = data["num_attention_heads"]
    kv_heads = data.get("num_key_value_heads")
    architectures = data.get("architectures", [kind])
    if not (isinstance(architectures, list) and all(isinstance(a, str) for a in architectures)):
        raise CostModelError(f"{where}: 'architectures' must be a list of class names (strings), "
                             f"found {shown(architectures, 40)}")
    return dict(
        kind="transformer", name=name, hidden=data["hidden_size"], ffn_hidden=data["intermediate_size"],
        layers=data["num_hidden_layers"], heads=heads, kv_heads=heads if kv_heads is None else kv_heads,
        head_dim=data.get("head_dim"), vocab=data["vocab_size"],
        tied_embeddings=data.get("tie_word_embeddings", False), mlp="swiglu", norm="rmsnorm",
        bias=False, qkv_bias=kind == "qwen2", attention_bias=kind != "qwen2" and data.get("attention_bias", False) is True,
        mlp_bias=data.get("mlp_bias", False) is True, position="rope",
        seq_len=data["max_position_embeddings"],
        description=f"{', '.join(architectures)[:200]} from {where}", source=where)
