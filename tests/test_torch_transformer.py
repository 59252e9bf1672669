"""Transformer parameters and matmul FLOPs against tiny torch decoders, exact; and two published counts.

The expected side is torch: sum of numel over model.parameters() (tied weights once) and
torch.utils.flop_counter.FlopCounterMode over a forward and a backward pass (fp32, CPU). Sources of
each costmodel quantity: formulas/params.py (attention_params, mlp_params, norm_params,
embedding_params, position_params, output_params); formulas/flops.py
(transformer_forward_flops_per_token; backward = 2 x forward).
"""

import pytest

pytest.importorskip("torch", reason="the PyTorch cross-checks need torch: pip install torch==2.13.0 (the README's test command)")
import torch
from torch_models import Decoder, decoder_step_flops, part_of

from costmodel.specs.model import Transformer
from costmodel.cost.shape import Shape

LLAMA = dict(mlp="swiglu", norm="rmsnorm", bias=False, position="rope", tied_embeddings=False)
GPT = dict(mlp="gelu", norm="layernorm", bias=True, position="learned", max_position=16,
           tied_embeddings=True)

CASES = [  # (case, spec fields, input batch x seq)
    ("llama-gqa", dict(LLAMA, hidden=32, ffn_hidden=88, layers=2, heads=4, kv_heads=2, vocab=100), (2, 12)),
    ("llama-mha-head_dim", dict(LLAMA, hidden=32, ffn_hidden=88, layers=2, heads=4, kv_heads=4,
                                head_dim=12, vocab=100), (3, 7)),
    ("llama-mqa-tied", dict(LLAMA, hidden=24, ffn_hidden=64, layers=3, heads=6, kv_heads=1, vocab=50,
                            tied_embeddings=True), (1, 9)),
    ("gpt-mha", dict(GPT, hidden=32, ffn_hidden=128, layers=2, heads=4, kv_heads=4, vocab=100), (2, 12)),
    ("gpt-gqa-untied", dict(GPT, hidden=32, ffn_hidden=128, layers=2, heads=4, kv_heads=2, vocab=100,
                            tied_embeddings=False), (2, 16)),
    ("gptj-parallel", dict(GPT, hidden=32, ffn_hidden=128, layers=2, heads=4, kv_heads=4, vocab=100,
                           block="parallel"), (2, 12)),
    ("neox-parallel-two-norms", dict(GPT, hidden=32, ffn_hidden=128, layers=3, heads=4, kv_heads=4, vocab=100,
                                     tied_embeddings=False, block="parallel-two-norms"), (2, 12)),
    ("palm-parallel-mqa", dict(LLAMA, hidden=24, ffn_hidden=64, layers=2, heads=6, kv_heads=1, vocab=50,
                               block="parallel"), (1, 9)),
]


def build(fields, batch_seq):
    torch.manual_seed(0)
    spec = Transformer(name="tiny", seq_len=16, **fields)
    model = Decoder(spec)
    tokens = torch.randint(spec.vocab, batch_seq)
    return spec, model, tokens


@pytest.mark.parametrize("fields, batch_seq", [pytest.param(f, bs, id=c) for c, f, bs in CASES])
def test_params_match_torch(fields, batch_seq):
    spec, model, _ = build(fields, batch_seq)
    assert Shape.of(spec).total_params() == sum(p.numel() for p in model.parameters())  # dedupes tied weights
    parts = {}
    for name, p in model.named_parameters():  # also deduped: a tied lm head is no module of its own
        parts[part_of(name)] = parts.get(part_of(name), 0) + p.numel()
    assert Shape.of(spec).param_parts() == parts


@pytest.mark.parametrize("fields, batch_seq", [pytest.param(f, bs, id=c) for c, f, bs in CASES])
def test_flops_match_torch(fields, batch_seq):
    spec, model, tokens = build(fields, batch_seq)
    b, s = batch_seq
    forward, backward = decoder_step_flops(model, tokens)
    assert forward == b * s * Shape.of(spec).forward_flops_per_token(seq_len=s)
    assert backward == b * s * Shape.of(spec).backward_flops_per_token(seq_len=s)


PUBLISHED = [  # (case, spec fields, parameters as published)
    # Meta Llama 3 8B, config.json of meta-llama/Meta-Llama-3-8B; 8,030,261,248 on the HF model card
    ("llama-3-8b", dict(hidden=4096, ffn_hidden=14336, layers=32, heads=32, kv_heads=8, vocab=128256,
                        seq_len=8192), 8_030_261_248),
    # GPT-2 small, openai-community/gpt2 on HF: model.num_parameters() = 124,439,808
    ("gpt2", dict(GPT, hidden=768, ffn_hidden=3072, layers=12, heads=12, kv_heads=12, vocab=50257,
                  max_position=1024, seq_len=1024), 124_439_808),
]


def test_palm_540b_is_table_1s_540_35b():
    """Chowdhery et al. 2022 Table 1: 540.35B parameters. By hand: per layer q, o 2 D (48 x 256), k, v
    2 D 256 (multi-query), SwiGLU 3 D 4D, one weight-only norm D (parallel block); embeddings V D
    shared with the output; a final norm D."""
    from costmodel.specs.load import load_model

    d, heads, head, layers, vocab = 18432, 48, 256, 118, 256000
    per_layer = 2 * d * heads * head + 2 * d * head + 3 * d * 4 * d + d
    expected = layers * per_layer + vocab * d + d
    assert Shape.of(load_model("palm-540b")).total_params() == expected == 540_356_474_880


@pytest.mark.parametrize("fields, expected", [pytest.param(f, n, id=c) for c, f, n in PUBLISHED])
def test_published_param_counts(fields, expected):
    assert Shape.of(Transformer(name="published", **fields)).total_params() == expected
