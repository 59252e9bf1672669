"""Transformer activation memory against Korthikanti et al. 2022 (arXiv:2205.05198)."""

import pytest
import sympy as sp

from costmodel.formulas import activations as ac
from costmodel.specs.layout import Layout
from costmodel.specs.model import Transformer
from costmodel.specs.recipe import RECIPES
import costs

s, b, h, a, t = sp.symbols("s b h a t", positive=True)

# Table 2, bytes per layer (16-bit activations, GPT layer: LayerNorm, MHA, 4h GeLU MLP, dropout)
TABLE_2 = {
    (False, "none", 8): s * b * h * (10 + 24 / t + 5 * a * s / (h * t)),
    (True, "none", 8): s * b * h * (34 / t + 5 * a * s / (h * t)),
    (False, "selective", 8): s * b * h * (10 + 24 / t),
    (True, "selective", 8): s * b * h * (34 / t),
}


def gpt_layer(sp_flag, policy):
    outside = ac.outside_tp_bytes_per_token(hidden=h, act_bytes=2, dropout=True)
    inside = ac.inside_tp_bytes_per_token(hidden=h, ffn_hidden=4 * h, heads=a, kv_heads=a, head_dim=h / a,
                                          act_bytes=2, gated=False)
    core = ac.attention_core_bytes_per_token(heads=a, head_dim=h / a, seq_len=s, act_bytes=2, dropout=True,
                                             flash=False)
    return s * b * ac.layer_activation_bytes_per_token(outside=outside, inside=inside, core=core, tp=t,
                                                       sp=sp_flag, policy=policy)


@pytest.mark.parametrize("key", list(TABLE_2))
def test_table_2(key):
    sp_flag, policy, _ = key
    assert sp.simplify(gpt_layer(sp_flag, policy) - TABLE_2[key]) == 0


def test_table_2_no_parallelism_and_full_recompute():
    assert sp.simplify(gpt_layer(False, "none").subs(t, 1) - s * b * h * (34 + 5 * a * s / h)) == 0
    assert ac.layer_input_bytes_per_token(hidden=h, act_bytes=2) * s * b == 2 * s * b * h


# Table 3 configurations: (heads, hidden, layers, tp, pp, micro-batch, interleaved chunks, global batch)
CONFIGS = {
    "22B": (64, 6144, 48, 8, 1, 4, 1, 4),
    "175B": (96, 12288, 96, 8, 8, 1, 3, 64),
    "530B": (128, 20480, 105, 8, 35, 1, 3, 280),
    "1T": (160, 25600, 128, 8, 64, 1, 1, 512),
}
FIG_1_GIB = {  # activations per GPU: TP baseline, and TP + SP + selective (Fig. 1, from the paper's formulas)
    "22B": (59.25, 9.5625), "175B": (66.84375, 12.3515625), "530B": (114.0234375, 23.076171875),
    "1T": (131.25, 26.5625),
}


def korthikanti(name, sp_flag=False, recompute="none"):
    heads, hidden, layers, tp, pp, micro, chunks, batch = CONFIGS[name]
    model = Transformer(name=name, hidden=hidden, ffn_hidden=4 * hidden, layers=layers, heads=heads,
                        kv_heads=heads, vocab=51200, tied_embeddings=True, mlp="gelu", norm="layernorm", bias=True,
                        position="learned", max_position=2048, seq_len=2048, dropout=True)
    layout = Layout(tp=tp, pp=pp, sp=sp_flag, tokens=micro * 2048, recompute=recompute, flash=False,
                    norm_stats=False,  # Korthikanti's accounting leaves the norms' statistics out
                    schedule="interleaved" if chunks > 1 else "1f1b", chunks=chunks, microbatches=batch // micro)
    return model, layout


@pytest.mark.parametrize("name", list(CONFIGS))
def test_figure_1_activations_of_the_first_stage(name):
    """First stage: p micro-batches x L/p layers = L layers' worth, x (1 + (p-1)/(p v)) interleaved."""
    for (sp_flag, recompute), gib in zip([(False, "none"), (True, "selective")], FIG_1_GIB[name]):
        model, layout = korthikanti(name, sp_flag, recompute)
        layers = -(-model.layers // layout.pp)
        per_token = costs.layer_bytes_per_token(model, 2, layout) * layers * costs.first_stage_in_flight(layout)
        assert per_token * layout.tokens / 2**30 == pytest.approx(gib, rel=1e-12)


@pytest.mark.parametrize("name", list(CONFIGS))
def test_figure_1_with_embeddings_and_logits(name):
    """Fig. 1 counts the transformer layers only; a whole stage also keeps the output layer's
    inputs and fp32 logits where it is the last (Korthikanti Sec. 4.1, 'extra terms'). Tolerance:
    those extras, under 2% for these models."""
    model, layout = korthikanti(name)
    b = costs.memory(model, RECIPES["megatron"], layout)
    assert b.activation_bytes / 2**30 == pytest.approx(FIG_1_GIB[name][0], rel=0.02)


FIG_7 = {  # % of the TP baseline: sequence, selective, sequence + selective, full (transcribed from the figure)
    "22B": (66.84, 49.42, 16.18, 7.64), "175B": (62.04, 56.53, 18.49, 8.71),
    "530B": (58.31, 62.04, 20.27, 9.42), "1T": (58.31, 62.04, 20.27, 9.42),
}


@pytest.mark.parametrize("name", list(CONFIGS))
def test_figure_7_percentages(name):
    """Tolerance 0.2 points: the values were read off the paper's bar chart (see shared/data)."""
    base_model, base = korthikanti(name)
    baseline = costs.layer_bytes_per_token(base_model, 2, base)
    variants = [(True, "none"), (False, "selective"), (True, "selective")]
    got = [100 * costs.layer_bytes_per_token(base_model, 2, korthikanti(name, s_, r)[1]) / baseline
           for s_, r in variants]
    got.append(100 * costs.input_bytes_per_token(base_model, 2, base) / baseline)
    assert got == pytest.approx(list(FIG_7[name]), abs=0.2)


@pytest.mark.parametrize("sp, per_token", [(False, 8192 * (4 + 2) + 4 + 4 * 128256 / 8),
                                           (True, (8192 * (4 + 2) + 4) / 8 + 4 * 128256 / 8)])
def test_the_output_layers_extras_split_over_t_under_sequence_parallelism(sp, per_token):
    """Llama 3 70B's last stage under autocast (fp32 final-norm input, bf16 logits input, an fp32 rstd), t = 8: with
    SP the final norm runs on the sequence shard and the output layer keeps its input before the gather (Megatron's
    column-parallel linears save the local input; Korthikanti Sec. 4.2.2's 4sbh/t for the output layer's input):
    everything but the fp32 logits splits over t (70,272.5 B per token, not 113,284.5)."""
    from costmodel.cost.shape import Shape
    from costmodel.specs.load import load_model

    extras = Shape.of(load_model("llama3-70b")).last_stage_extra_bytes_per_token(act_bytes=2, tp=8, residual_bytes=4,
                                                                                sp=sp)
    assert extras == per_token
