"""Parameter counts, one named part per function."""

from __future__ import annotations


def ffn_block_params(*, d_model, d_ff, gated=False):
    """Weights of one FFN block: (2 + gated) D F.

    Source: CS336 A2 communication_accounting (two linear layers D -> F -> D, no biases);
    a gated (GLU) block adds a third D x F matrix (Shazeer 2020, arXiv:2002.05202).
    """
    matrices = 3 if gated else 2
    return matrices * d_model * d_ff


def ffn_stack_params(*, d_model, d_ff, layers, gated=False):
    """Weights of the whole FFN stack: P = (2 + gated) D F L (XXL: P = 2 D F L)."""
    return layers * ffn_block_params(d_model=d_model, d_ff=d_ff, gated=gated)


def attention_params(*, hidden, heads, kv_heads, head_dim, bias=False, qkv_bias=False, out_bias=False):
    """Q, K, V and output projections: D d_h (2a + 2 a_kv) (+ biases d_h (a + 2 a_kv) + D).

    ``bias``: every projection has one (GPT; Hugging Face Llama/Mistral ``attention_bias``, whose
    LlamaAttention gives q, k, v and o_proj the same flag); ``qkv_bias``: only Q, K, V do (Qwen2);
    ``out_bias``: the output projection's alone. Source: Vaswani et al. 2017; GQA as in Ainslie et
    al. 2023, arXiv:2305.13245 (K, V have a_kv heads).
    """
    weights = hidden * head_dim * (2 * heads + 2 * kv_heads)
    qkv_biases = head_dim * (heads + 2 * kv_heads) if (bias or qkv_bias) else 0
    output_bias = hidden if (bias or out_bias) else 0
    return weights + qkv_biases + output_bias


def mlp_params(*, hidden, ffn_hidden, gated, bias=False):
    """MLP weights: (2 + gated) D F (+ biases (1 + gated) F + D)."""
    matrices = 3 if gated else 2
    weights = matrices * hidden * ffn_hidden
    biases = (matrices - 1) * ffn_hidden + hidden if bias else 0
    return weights + biases


def norm_params(*, hidden, with_bias):
    """One RMSNorm (D weights) or LayerNorm (D weights + D biases)."""
    return 2 * hidden if with_bias else hidden


def embedding_params(*, vocab, hidden):
    """Token embedding table: V D."""
    return vocab * hidden


def position_params(*, max_position, hidden):
    """Learned absolute position table: s_max D (rotary embeddings have none)."""
    return max_position * hidden


def output_params(*, vocab, hidden, tied):
    """Output projection (logits): V D, or nothing when it shares the embedding matrix."""
    return 0 if tied else vocab * hidden


def qk_norm_params(*, head_dim):
    """Query and key RMSNorms over each head's d_h elements (Qwen3): 2 d_h per layer."""
    return 2 * head_dim


def router_params(*, hidden, experts):
    """The router's D x E scoring matrix.

    Source: Shazeer et al. 2017, arXiv:1701.06538, Sec. 2.1 (G(x) = Softmax(KeepTopK(x W_g, k))).
    DeepSeek-V3's per-expert selection bias (arXiv:2412.19437, Sec. 2.1.2) is not a parameter: it is
    nudged by a fixed step outside the optimizer, and transformers keeps it as a buffer.
    """
    return hidden * experts


def routed_expert_params(*, hidden, expert_ffn_hidden, gated):
    """One routed expert: an MLP of width F_e, (2 + gated) D F_e weights, no biases."""
    return mlp_params(hidden=hidden, ffn_hidden=expert_ffn_hidden, gated=gated)


def shared_expert_params(*, hidden, shared_ffn_hidden, gated, shared_gate=False):
    """The shared experts, one MLP of width F_s: (2 + gated) D F_s (+ D for Qwen2-MoE's sigmoid gate).

    Source: Dai et al. 2024, arXiv:2401.06066 (DeepSeekMoE), Sec. 3.2 (shared expert isolation);
    DeepSeek-V3 and Qwen2-MoE implement them as one MLP of the experts' widths added together.
    """
    return mlp_params(hidden=hidden, ffn_hidden=shared_ffn_hidden, gated=gated) + (hidden if shared_gate else 0)


def mla_attention_params(*, hidden, heads, q_lora_rank, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim,
                         v_head_dim, q_latent=True):
    """Multi-head latent attention's projections and latent norms (no biases).

    Queries: D d_c' + d_c' (norm) + d_c' a (d_h + d_h^R), or without a query latent (``q_latent``
    false, DeepSeek-V2-Lite) D a (d_h + d_h^R);
    keys/values: D (d_c + d_h^R) + d_c (norm) + d_c a (d_h + d_v); output: a d_v D.
    Source: DeepSeek-AI 2024, arXiv:2405.04434, Sec. 2.1.2-2.1.3 (W^DQ, W^UQ, W^QR, W^DKV, W^KR, W^UK,
    W^UV, W^O); transformers' DeepseekV3Attention (q_a_proj, q_a_layernorm, q_b_proj, kv_a_proj_with_mqa,
    kv_a_layernorm, kv_b_proj, o_proj).
    """
    qk = qk_nope_head_dim + qk_rope_head_dim
    queries = hidden * q_lora_rank + q_lora_rank + q_lora_rank * heads * qk if q_latent else hidden * heads * qk
    keys_values = hidden * (kv_lora_rank + qk_rope_head_dim) + kv_lora_rank + kv_lora_rank * heads * (
        qk_nope_head_dim + v_head_dim)
    return queries + keys_values + heads * v_head_dim * hidden


def mla_replicated_params(*, hidden, q_lora_rank, kv_lora_rank, qk_rope_head_dim, q_latent=True):
    """Of MLA's parameters, the down projections and latent norms every TP rank keeps whole
    (Megatron-core builds linear_q_down_proj and linear_kv_down_proj 'duplicated'):
    D d_c' + d_c' + D (d_c + d_h^R) + d_c."""
    queries = hidden * q_lora_rank + q_lora_rank if q_latent else 0
    return queries + hidden * (kv_lora_rank + qk_rope_head_dim) + kv_lora_rank
