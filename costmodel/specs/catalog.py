"""Built-in models, each with the source of its numbers. Specs are built on first use only."""

from __future__ import annotations

_HF = "Hugging Face config.json of "

#: name -> keyword arguments of the spec (``kind`` picks FFNStack or Transformer).
BUILTIN_MODELS: dict[str, dict] = {
    "xxl": dict(
        kind="ffn", name="xxl", d_model=16384, d_ff=53248, layers=126,
        description="CS336 A2 XXL: 126 blocks of two linear layers, no attention or embeddings",
        source="Stanford CS336 (Spring 2025) Assignment 2, Problem communication_accounting",
    ),
    "gpt2": dict(
        kind="transformer", name="gpt2", hidden=768, ffn_hidden=3072, layers=12, heads=12,
        kv_heads=12, vocab=50257, tied_embeddings=True, mlp="gelu", norm="layernorm", bias=True,
        position="learned", max_position=1024, seq_len=1024, dropout=True,
        description="GPT-2 small (124M)",
        source=_HF + "openai-community/gpt2 (n_embd 768, n_layer 12, n_head 12, n_positions 1024)",
    ),
    "gpt3-175b": dict(
        kind="transformer", name="gpt3-175b", hidden=12288, ffn_hidden=4 * 12288, layers=96,
        heads=96, kv_heads=96, vocab=50257, tied_embeddings=True, mlp="gelu", norm="layernorm",
        bias=True, position="learned", max_position=2048, seq_len=2048, dropout=True,
        description="GPT-3 175B (GPT-2 architecture, d_ff = 4 d_model)",
        source="Brown et al. 2020, arXiv:2005.14165, Table 2.1 (n_layers 96, d_model 12288, "
        "n_heads 96, d_head 128, n_ctx 2048); GPT-2 BPE vocabulary of 50257",
    ),
    "llama2-7b": dict(
        kind="transformer", name="llama2-7b", hidden=4096, ffn_hidden=11008, layers=32, heads=32,
        kv_heads=32, vocab=32000, seq_len=4096, description="Llama 2 7B",
        source=_HF + "meta-llama/Llama-2-7b-hf; Touvron et al. 2023, arXiv:2307.09288",
    ),
    "llama2-70b": dict(
        kind="transformer", name="llama2-70b", hidden=8192, ffn_hidden=28672, layers=80, heads=64,
        kv_heads=8, vocab=32000, seq_len=4096, description="Llama 2 70B (GQA, 8 KV heads)",
        source=_HF + "meta-llama/Llama-2-70b-hf; Touvron et al. 2023, arXiv:2307.09288",
    ),
    "llama3-8b": dict(
        kind="transformer", name="llama3-8b", hidden=4096, ffn_hidden=14336, layers=32, heads=32,
        kv_heads=8, vocab=128256, seq_len=8192, description="Llama 3 8B",
        source=_HF + "meta-llama/Meta-Llama-3-8B; Llama Team 2024, arXiv:2407.21783, Table 3",
    ),
    "llama3-70b": dict(
        kind="transformer", name="llama3-70b", hidden=8192, ffn_hidden=28672, layers=80, heads=64,
        kv_heads=8, vocab=128256, seq_len=8192, description="Llama 3 70B",
        source=_HF + "meta-llama/Meta-Llama-3-70B; Llama Team 2024, arXiv:2407.21783, Table 3",
    ),
    "llama3-405b": dict(
        kind="transformer", name="llama3-405b", hidden=16384, ffn_hidden=53248, layers=126,
        heads=128, kv_heads=8, vocab=128256, seq_len=8192, description="Llama 3.1 405B",
        source=_HF + "meta-llama/Llama-3.1-405B; Llama Team 2024, arXiv:2407.21783, Table 3",
    ),
    "palm-540b": dict(
        kind="transformer", name="palm-540b", hidden=18432, ffn_hidden=73728, layers=118, heads=48, kv_heads=1,
        head_dim=256, vocab=256000, seq_len=2048, tied_embeddings=True, block="parallel",
        description="PaLM 540B: parallel blocks, multi-query attention, SwiGLU, shared embeddings, no biases",
        source="Chowdhery et al. 2022, arXiv:2204.02311: Table 1 (118 layers, d_model 18432, 48 heads of 256, "
        "d_ff = 4 d_model, 540.35B parameters), Sec. 2 (SwiGLU, parallel layers, multi-query attention, RoPE, "
        "shared input-output embeddings, no biases, 256k SentencePiece vocabulary; 256,000 gives 540.356B); "
        "its LayerNorms have no bias, counted as RMSNorm's weight-only D"),
}

_NANOTRON = ("huggingface/nanotron@e24d2483a4e508e1298ed91b5f5abffa473dc647 scripts/scaling_benchmarks.py "
             "(model_configs, lines 303-312: layers, hidden, heads, intermediate; num_key_value_heads = heads "
             "since NUM_KEY_VALUE_HEADS is None, line 14/76; tied when intermediate < 10,000, line 78); vocabulary "
             "131072 and seq 4096 as the sweep's run names and results file record (vocab131k)")


def _nanotron(size: str, layers: int, hidden: int, heads: int, ffn: int) -> dict:
    """A model of the Ultra-Scale Playbook's nanotron benchmark sweep (MHA, RoPE, SwiGLU, RMSNorm)."""
    return dict(kind="transformer", name=f"nanotron-{size}", hidden=hidden, ffn_hidden=ffn, layers=layers,
                heads=heads, kv_heads=heads, vocab=131072, tied_embeddings=ffn < 10_000, seq_len=4096,
                description=f"the Ultra-Scale Playbook's '{size.upper()}' benchmark model (nanotron sweep; "
                "MHA, not Llama 3.2's GQA)", source=_NANOTRON)


BUILTIN_MODELS.update({m["name"]: m for m in (
    _nanotron("1b", 16, 2048, 32, 8192),
    _nanotron("3b", 28, 3072, 32, 8192),
    _nanotron("8b", 32, 4096, 32, 14336),
    _nanotron("80b", 80, 8192, 64, 28672),
)})

BUILTIN_MODELS.update({m["name"]: m for m in (
    dict(kind="transformer", name="mixtral-8x7b", hidden=4096, ffn_hidden=14336, layers=32, heads=32, kv_heads=8,
         vocab=32000, seq_len=32768, moe=dict(experts=8, top_k=2, expert_ffn_hidden=14336),
         description="Mixtral 8x7B (MoE: 8 experts, top-2 in every layer; 46.7B total, 12.9B active)",
         source=_HF + "mistralai/Mixtral-8x7B-v0.1 (num_local_experts 8, num_experts_per_tok 2); Jiang et al. "
         "2024, arXiv:2401.04088, Sec. 2 (trained with a 32k context)"),
    dict(kind="transformer", name="qwen3-30b-a3b", hidden=2048, ffn_hidden=6144, layers=48, heads=32, kv_heads=4,
         head_dim=128, vocab=151936, seq_len=4096, qk_norm=True,
         moe=dict(experts=128, top_k=8, expert_ffn_hidden=768),
         description="Qwen3-30B-A3B (MoE: 128 experts, top-8, no shared experts; per-head Q/K norms)",
         source=_HF + "Qwen/Qwen3-30B-A3B; Qwen Team 2025, arXiv:2505.09388, Sec. 3.2 (general stage at 4,096 "
         "tokens)"),
    dict(kind="transformer", name="deepseek-v3", hidden=7168, ffn_hidden=18432, layers=61, heads=128, kv_heads=128,
         vocab=129280, seq_len=4096,
         moe=dict(experts=256, top_k=8, expert_ffn_hidden=2048, shared_ffn_hidden=2048, dense_layers=3),
         mla=dict(q_lora_rank=1536, kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128),
         description="DeepSeek-V3 671B (MLA; MoE: 256 routed experts, top-8, 1 shared, first 3 layers dense; "
         "multi-token prediction module not included)",
         source=_HF + "deepseek-ai/DeepSeek-V3; DeepSeek-AI 2024, arXiv:2412.19437, Sec. 4.2 (pre-trained at "
         "4K tokens)"),
)})
