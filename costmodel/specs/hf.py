"""Hugging Face config.json -> Transformer spec, for Llama, Mistral and Qwen2/3-style models and the
mixtures of experts Mixtral, Qwen2-MoE, Qwen3-MoE and DeepSeek-V3 (multi-head latent attention).

Keys as in transformers' LlamaConfig / MistralConfig / Qwen2Config / Qwen3Config / MixtralConfig /
Qwen2MoeConfig / Qwen3MoeConfig / DeepseekV3Config (whose multi-token-prediction layers, like
transformers' model, are not built: 671B, not the checkpoint's 685B). ``seq_len`` is taken from max_position_embeddings (the trained
context; pass a shorter --tokens/--seq where you train shorter).
"""

from __future__ import annotations

from costmodel.errors import CostModelError
from costmodel.inputs.files import shown

SUPPORTED = ("llama", "mistral", "qwen2", "qwen3", "mixtral", "qwen2_moe", "qwen3_moe", "deepseek_v3")
#: model_type -> (experts, experts per token, expert width) keys of its MoE config
_MOE_KEYS = {"mixtral": ("num_local_experts", "num_experts_per_tok", "intermediate_size"),
             "qwen2_moe": ("num_experts", "num_experts_per_tok", "moe_intermediate_size"),
             "qwen3_moe": ("num_experts", "num_experts_per_tok", "moe_intermediate_size"),
             "deepseek_v3": ("n_routed_experts", "num_experts_per_tok", "moe_intermediate_size")}
#: multi-head latent attention's keys (DeepSeek-V3; q_lora_rank may be null: no query latent)
_MLA_KEYS = ("q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")
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
    missing = [key for key in _REQUIRED + _MOE_KEYS.get(kind, ()) + (_MLA_KEYS if kind == "deepseek_v3" else ())
               if key not in data]
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
    qkv_bias = kind == "qwen2" or (kind == "qwen2_moe" and data.get("qkv_bias", True) is True)
    return dict(
        kind="transformer", name=name, hidden=data["hidden_size"], ffn_hidden=data["intermediate_size"],
        layers=data["num_hidden_layers"], heads=heads, kv_heads=heads if kv_heads is None else kv_heads,
        head_dim=data.get("head_dim"), vocab=data["vocab_size"],
        tied_embeddings=data.get("tie_word_embeddings", False), mlp="swiglu", norm="rmsnorm",
        bias=False, qkv_bias=qkv_bias, attention_bias=not qkv_bias and data.get("attention_bias", False) is True,
        mlp_bias=data.get("mlp_bias", False) is True, position="rope",
        seq_len=data["max_position_embeddings"], qk_norm=kind in ("qwen3", "qwen3_moe"),
        moe=_moe(data, kind, where) if kind in _MOE_KEYS else None,
        mla=_mla(data) if kind == "deepseek_v3" else None,
        description=f"{', '.join(architectures)[:200]} from {where}", source=where)


def _moe(data: dict, kind: str, where: str) -> dict:
    """The MoE fields of a Mixtral / Qwen2-MoE / Qwen3-MoE config (transformers' modeling code: Qwen2-MoE
    has one shared expert of shared_expert_intermediate_size with a D -> 1 sigmoid gate; a layer is
    dense when listed in mlp_only_layers, or when (index + 1) % decoder_sparse_step != 0)."""
    experts, top_k, width = (data[key] for key in _MOE_KEYS[kind])
    if kind == "deepseek_v3":  # shared experts as one MLP of n_shared x the expert width; MTP layers not built
        if data.get("moe_layer_freq", 1) != 1:
            raise CostModelError(f"{where}: moe_layer_freq {shown(data['moe_layer_freq'], 20)}: cost4d models MoE in "
                                 "every layer after the first dense ones (moe_layer_freq 1)")
        return dict(experts=experts, top_k=top_k, expert_ffn_hidden=width,
                    shared_ffn_hidden=data.get("n_shared_experts", 0) * width,
                    dense_layers=data.get("first_k_dense_replace", 0))
    dense = _dense_prefix(data, where)
    shared = data.get("shared_expert_intermediate_size", 0) if kind == "qwen2_moe" else 0
    return dict(experts=experts, top_k=top_k, expert_ffn_hidden=width, shared_ffn_hidden=shared,
                shared_gate=bool(shared), dense_layers=dense)


def _dense_prefix(data: dict, where: str) -> int:
    """How many first layers are dense; refuses other patterns (cost4d's dense layers come first)."""
    step = data.get("decoder_sparse_step", 1)
    only = data.get("mlp_only_layers", [])
    if not (isinstance(only, list) and all(isinstance(i, int) and not isinstance(i, bool) for i in only)):
        raise CostModelError(f"{where}: 'mlp_only_layers' must be a list of layer indices, found {shown(only, 40)}")
    if step != 1:
        raise CostModelError(f"{where}: decoder_sparse_step {shown(step, 20)}: cost4d models MoE in every layer "
                             "after the first dense ones (decoder_sparse_step 1)")
    if sorted(only) != list(range(len(only))):
        raise CostModelError(f"{where}: mlp_only_layers {shown(only, 40)}: cost4d models the dense layers as the "
                             "first ones (0, 1, ...)")
    return len(only)


def _mla(data: dict) -> dict:
    """DeepSeek-V3's multi-head latent attention (transformers' DeepseekV3Attention; a null
    q_lora_rank projects queries from the hidden state directly)."""
    return dict(q_lora_rank=data["q_lora_rank"] or 0, kv_lora_rank=data["kv_lora_rank"],
                qk_nope_head_dim=data["qk_nope_head_dim"], qk_rope_head_dim=data["qk_rope_head_dim"],
                v_head_dim=data["v_head_dim"])
