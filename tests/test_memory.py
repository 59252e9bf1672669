"""Per-device memory: the XXL problem's answers, ZeRO's Figure 1, and sharding properties."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costmodel.specs.layout import Layout
from costmodel.specs.load import load_model
from costmodel.specs.model import FFNStack
from costmodel.specs.recipe import RECIPES
from costmodel.cost.memory import STATE_BYTES
from costs import memory as memory_breakdown

XXL = load_model("xxl")
CS336 = RECIPES["cs336"]


def test_xxl_a_state_and_activations():
    """CS336 A2 (a): hand-derived in shared/reference/conventions.md."""
    b = memory_breakdown(XXL, CS336, Layout())
    assert b.params == 219_848_638_464  # 2 * 16384 * 53248 * 126
    state = b.components["master_weights"] + b.components["grads"] + b.components["optimizer"]
    assert state == 3_517_578_215_424  # 16 B/param: fp32 master 4 + fp32 grads 4 + AdamW m, v 8
    assert b.state_bytes_unsharded == 3_517_578_215_424
    assert b.activation_bytes_per_token == 17_547_264  # 2 B * (D + F) * L
    # autocast's bf16 weight copies: every weight but the first layer's W_in (its input is data)
    assert b.components["weight_copies"] == 2 * (219_848_638_464 - 16384 * 53248)


def test_xxl_b_fsdp_with_half_the_activations_sharded():
    """(b): M(N) = (16P + A/2)/N + A/2 with A = 17,547,264 B/token x T."""
    tokens, n = 4096, 38
    b = memory_breakdown(XXL, CS336, Layout(fsdp=n, tokens=tokens, shard_activations=0.5))
    P, A = 219_848_638_464, 17_547_264 * tokens
    assert b.total_bytes == pytest.approx((16 * P + A / 2) / n + A / 2, rel=1e-15)
    assert b.components["weight_copies"] == 0  # FSDP frees the gathered copy after forward


ZERO_FIG1 = [  # Rajbhandari et al. 2020, arXiv:1910.02054, Figure 1: 7.5B params, N_d = 64, K = 12
    (0, 120.0),
    (1, 31.4),
    (2, 16.6),
    (3, 1.9),
]


@pytest.mark.parametrize("stage, gb", ZERO_FIG1)
def test_zero_figure_1(stage, gb):
    model = FFNStack(name="7.5b", d_model=2500, d_ff=10000, layers=150)  # 2 * 2500 * 10000 * 150 = 7.5e9
    b = memory_breakdown(model, RECIPES["zero"], Layout(fsdp=64, zero=stage))
    assert b.params == 7_500_000_000
    assert round(b.total_bytes / 1e9, 1) == gb  # the paper prints GB = 1e9 B to one decimal


def test_recipes_bytes_per_param():
    """shared/reference/conventions.md, Precision recipes table; fsdp2 (torchtitan's policy): fp32 weights, grads
    and AdamW's two states, 4 + 4 + 8."""
    assert {name: r.state_bytes_per_param for name, r in RECIPES.items()} == {
        "cs336": 16, "fsdp2": 16, "zero": 16, "megatron": 18, "scaling-book": 10}


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 512), stage=st.sampled_from([0, 1, 2, 3]),
       recipe=st.sampled_from(sorted(RECIPES)), frac=st.sampled_from([0.0, 0.5, 1.0]))
def test_sharding_properties(n, stage, recipe, frac):
    """Sharded state x shards = the whole; more shards never means more memory."""
    r = RECIPES[recipe]
    frac = frac if n > 1 else 0.0
    one = memory_breakdown(XXL, r, Layout(tokens=1024))
    b = memory_breakdown(XXL, r, Layout(fsdp=n, zero=stage, tokens=1024, shard_activations=frac))
    more = memory_breakdown(XXL, r, Layout(fsdp=2 * n, zero=stage, tokens=1024,
                                           shard_activations=frac if frac else 0.0))
    for name in STATE_BYTES:
        if name in b.components:
            whole = one.components[name]
            assert b.components[name] in (pytest.approx(whole), pytest.approx(whole / n))
    assert more.total_bytes <= b.total_bytes
