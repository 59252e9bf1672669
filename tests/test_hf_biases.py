"""Hugging Face biases (issue 16): Llama/Mistral `attention_bias` puts a bias on q, k, v and o_proj,
`mlp_bias` on gate, up and down, Qwen2 on q, k, v only. Each config's count equals a PyTorch model
built by the architecture's own rules from the config's fields."""

from __future__ import annotations

import json

import pytest

from costmodel.cost.shape import Shape
from costmodel.specs.load import load_model

torch = pytest.importorskip("torch")
nn = torch.nn

BASE = dict(model_type="llama", hidden_size=96, intermediate_size=160, num_hidden_layers=3, num_attention_heads=6,
            num_key_value_heads=2, vocab_size=211, max_position_embeddings=64, tie_word_embeddings=False,
            hidden_act="silu")


def hf_count(config: dict) -> int:
    """Parameters of the model transformers' modelling code builds (LlamaAttention: q/k/v/o_proj with
    bias=attention_bias; LlamaMLP: gate/up/down_proj with bias=mlp_bias; Qwen2Attention: q/k/v with
    bias=True, o_proj without; RMSNorm weights; untied lm_head)."""
    d, f, heads, kv = config["hidden_size"], config["intermediate_size"], config["num_attention_heads"], \
        config["num_key_value_heads"]
    dh = config.get("head_dim") or d // heads
    qwen = config["model_type"] == "qwen2"
    attn_bias = True if qwen else config.get("attention_bias", False)
    mlp_bias = config.get("mlp_bias", False)
    layers = []
    for _ in range(config["num_hidden_layers"]):
        layers += [nn.Linear(d, heads * dh, bias=attn_bias), nn.Linear(d, kv * dh, bias=attn_bias),
                   nn.Linear(d, kv * dh, bias=attn_bias), nn.Linear(heads * dh, d, bias=attn_bias and not qwen),
                   nn.Linear(d, f, bias=mlp_bias), nn.Linear(d, f, bias=mlp_bias), nn.Linear(f, d, bias=mlp_bias),
                   nn.RMSNorm(d), nn.RMSNorm(d)]
    model = nn.ModuleList(layers + [nn.Embedding(config["vocab_size"], d), nn.RMSNorm(d)]
                          + ([] if config["tie_word_embeddings"] else [nn.Linear(d, config["vocab_size"], bias=False)]))
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("extra", [
    {}, {"attention_bias": True}, {"mlp_bias": True}, {"attention_bias": True, "mlp_bias": True},
    {"model_type": "qwen2"}, {"model_type": "mistral", "attention_bias": True, "head_dim": 24},
    {"tie_word_embeddings": True, "attention_bias": True},
])
def test_bias_flags_match_the_modelling_code(tmp_path, extra):
    config = {**BASE, **extra}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    assert Shape.of(load_model(str(path))).total_params() == hf_count(config)


def test_attention_bias_keeps_the_output_bias_whole_under_tp(tmp_path):
    """Row-parallel output biases stay whole on every TP rank: o_proj's with attention_bias, down's with mlp_bias."""
    from costmodel.parallel.tensor.params import block_params_per_device

    for extra, replicated_biases in (({"attention_bias": True}, 1), ({"mlp_bias": True}, 1),
                                     ({"attention_bias": True, "mlp_bias": True}, 2), ({}, 0)):
        path = tmp_path / "config.json"
        path.write_text(json.dumps({**BASE, **extra}))
        shape = Shape.of(load_model(str(path)))
        whole = 2 * 96 + replicated_biases * 96  # two norms and the row-parallel biases
        assert block_params_per_device(shape, 2) == (shape.block_params() - whole) // 2 + whole
