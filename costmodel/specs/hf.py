"""Hugging Face config.json -> Transformer spec, for Llama, Mistral and Qwen2/3-style models, the
mixtures of experts Mixtral, Qwen2-MoE, Qwen3-MoE and DeepSeek-V3 (multi-head latent attention), and the
parallel-block families GPT-NeoX (Pythia) and Falcon.

Keys as in transformers' LlamaConfig / MistralConfig / Qwen2Config / Qwen3Config / MixtralConfig /
Qwen2MoeConfig / Qwen3MoeConfig / DeepseekV3Config (whose multi-token-prediction layers, like
transformers' model, are not built: 671B, not the checkpoint's 685B). ``seq_len`` is taken from max_position_embeddings (the trained
context; pass a shorter --tokens/--seq where you train shorter).
"""

from __future__ import annotations

from costmodel.errors import CostModelError
from costmodel.inputs.files import shown

SUPPORTED = ("llama", "mistral", "qwen2", "qwen3", "mixtral", "qwen2_moe", "qwen3_moe", "deepseek_v3", "gpt_neox",
             "falcon")
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
    architectures = data.get("architectures", [kind])
    if not (isinstance(architectures, list) and all(isinstance(a, str) for a in architectures)):
        raise CostModelError(f"{where}: 'architectures' must be a list of class names (strings), "
                             f"found {shown(architectures, 40)}")
    described = dict(kind="transformer", name=name, description=f"{', '.join(architectures)[:200]} from {where}",
                     source=where)
    if kind in _PARALLEL_FAMILIES:
        return {**described, **_PARALLEL_FAMILIES[kind](_keys(data, kind), where)}
    _require(data, _REQUIRED + _MOE_KEYS.get(kind, ()) + (_MLA_KEYS if kind == "deepseek_v3" else ()), kind, where)
    if data.get("hidden_act", "silu") != "silu":
        raise CostModelError(f"{where}: hidden_act {shown(data['hidden_act'], 40)}: only SiLU (SwiGLU) MLPs are supported")
    heads = data["num_attention_heads"]
    kv_heads = data.get("num_key_value_heads")
    qkv_bias = kind == "qwen2" or (kind == "qwen2_moe" and data.get("qkv_bias", True) is True)
    return dict(
        **described, hidden=data["hidden_size"], ffn_hidden=data["intermediate_size"],
        layers=data["num_hidden_layers"], heads=heads, kv_heads=heads if kv_heads is None else kv_heads,
        head_dim=data.get("head_dim"), vocab=data["vocab_size"],
        tied_embeddings=data.get("tie_word_embeddings", False), mlp="swiglu", norm="rmsnorm",
        bias=False, qkv_bias=qkv_bias, attention_bias=not qkv_bias and data.get("attention_bias", False) is True,
        mlp_bias=data.get("mlp_bias", False) is True, position="rope",
        seq_len=data["max_position_embeddings"], qk_norm=kind in ("qwen3", "qwen3_moe"),
        moe=_moe(data, kind, where) if kind in _MOE_KEYS else None,
        mla=_mla(data) if kind == "deepseek_v3" else None)


#: transformers' FalconConfig.attribute_map: the names older (RW) Falcon configs use
_FALCON_ALIASES = {"n_head": "num_attention_heads", "n_layer": "num_hidden_layers", "n_head_kv": "num_kv_heads"}


def _keys(data: dict, kind: str) -> dict:
    """The config with older key spellings mapped to transformers' names (Falcon's RW configs)."""
    if kind != "falcon":
        return data
    mapped = {_FALCON_ALIASES[k]: v for k, v in data.items() if k in _FALCON_ALIASES}
    return {**mapped, **{k: v for k, v in data.items() if k not in _FALCON_ALIASES}}  # transformers' names win


def _require(data: dict, keys, kind: str, where: str) -> None:
    missing = [key for key in keys if key not in data]
    if missing:
        raise CostModelError(f"{where}: missing {missing[0]!r} (needed for a {kind} config)")


def _gelu(data: dict, key: str, default: str, where: str) -> None:
    act = data.get(key, default)
    if not (isinstance(act, str) and act.startswith("gelu")):
        raise CostModelError(f"{where}: {key} {shown(act, 40)}: only GeLU MLPs are supported for this family")


def _gpt_neox(data: dict, where: str) -> dict:
    """GPT-NeoX / Pythia (transformers' GPTNeoXLayer): LayerNorms with bias, fused QKV with bias
    (attention_bias), a GeLU MLP with biases, partial rotary (no parameters), untied output by default;
    use_parallel_residual: x + attn(ln1(x)) + mlp(ln2(x)), else sequential."""
    _require(data, _REQUIRED, "gpt_neox", where)
    _gelu(data, "hidden_act", "gelu", where)
    heads, biased = data["num_attention_heads"], data.get("attention_bias", True) is True
    return dict(hidden=data["hidden_size"], ffn_hidden=data["intermediate_size"], layers=data["num_hidden_layers"],
                heads=heads, kv_heads=heads, vocab=data["vocab_size"], seq_len=data["max_position_embeddings"],
                tied_embeddings=data.get("tie_word_embeddings", False) is True, mlp="gelu", norm="layernorm",
                bias=biased, mlp_bias=not biased, position="rope", fused_projections=True,
                block="parallel-two-norms" if data.get("use_parallel_residual", True) is True else "sequential")


def _falcon(data: dict, where: str) -> dict:
    """Falcon (transformers' FalconDecoderLayer): LayerNorms with bias, fused QKV, a GeLU MLP of
    ffn_hidden_size (default 4 D), biases only with ``bias``, tied embeddings by default; multi_query:
    one KV head, new_decoder_architecture: num_kv_heads of them and two norms (ln_attn, ln_mlp) unless
    num_ln_in_parallel_attn is 1 (Falcon2-11B); parallel_attn with one input_layernorm otherwise; without
    parallel_attn, a sequential block. ALiBi and RoPE carry no parameters."""
    _require(data, ("hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size"), "falcon", where)
    _gelu(data, "activation", "gelu", where)
    hidden, heads, new = data["hidden_size"], data["num_attention_heads"], data.get("new_decoder_architecture") is True
    # FalconAttention's query_key_value: (2 num_kv_heads + heads) d_h wide with new_decoder_architecture, else
    # D + 2 d_h (multi_query: one KV head) or 3 D (every head its own K and V, whatever num_kv_heads says)
    kv_heads = (data.get("num_kv_heads") or heads) if new else 1 if data.get("multi_query", True) is True else heads
    # FalconDecoderLayer: two norms (ln_attn, ln_mlp) when num_ln_in_parallel_attn is 2 (its default under the new
    # decoder architecture), else one input_layernorm; no parallel_attn: sequential
    norms = data.get("num_ln_in_parallel_attn") or (2 if new else 1)
    block = ("sequential" if data.get("parallel_attn", True) is not True else
             "parallel-two-norms" if norms == 2 else "parallel")
    return dict(hidden=hidden, ffn_hidden=data.get("ffn_hidden_size") or 4 * hidden, layers=data["num_hidden_layers"],
                heads=heads, kv_heads=kv_heads, vocab=data["vocab_size"],
                seq_len=data.get("max_position_embeddings", 2048), tied_embeddings=data.get("tie_word_embeddings", True)
                is True, mlp="gelu", norm="layernorm", bias=data.get("bias", False) is True, position="rope",
                fused_projections=True, block=block)


_PARALLEL_FAMILIES = {"gpt_neox": _gpt_neox, "falcon": _falcon}


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
    # Qwen2MoeSparseMoeBlock builds shared_expert_gate (D -> 1) whatever the shared expert's width, even 0
    return dict(experts=experts, top_k=top_k, expert_ffn_hidden=width, shared_ffn_hidden=shared,
                shared_gate=kind == "qwen2_moe", dense_layers=dense)


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
