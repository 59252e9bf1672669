"""Mixture-of-experts models and the expert axis: counts from the configs, bytes by hand.

Parameter counts: transformers 5.23's models built on the meta device from each config.json
(sum of p.numel() over model.parameters(); the script and its output are quoted in the docstrings),
and each per-layer piece derived by hand from the config's fields below.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from costmodel.cost.evaluate import evaluate_layout
from costmodel.cost.shape import Shape
from costmodel.errors import CostModelError
from costmodel.specs.layout import Layout
from costmodel.specs.load import load_hardware, load_model, load_recipe

HF = Path(__file__).parent / "fixtures" / "hf"


def shape_of(name):
    return Shape.of(load_model(str(HF / f"{name}.json") if (HF / f"{name}.json").exists() else name))


def test_mixtral_total_and_active_by_hand():
    """Mixtral-8x7B: 46,702,792,704 total, 12,879,925,248 active (the issue's figures; transformers agrees)."""
    shape = shape_of("mixtral-8x7b-v0.1")
    D, F, L, V, E, k = 4096, 14336, 32, 32000, 8, 2
    attention = D * 128 * (2 * 32 + 2 * 8)  # q, o: 32 heads; k, v: 8 heads; d_h 128
    expert = 3 * D * F  # w1, w3: D x F; w2: F x D
    assert shape.param_parts() == {"embedding": V * D, "attention": L * attention, "experts": L * E * expert,
                                   "router": L * D * E, "norms": (2 * L + 1) * D, "output": V * D}
    assert shape.total_params() == 46_702_792_704
    assert shape.active_params() == 12_879_925_248 == shape.total_params() - L * (E - k) * expert


@pytest.mark.parametrize("name, total, active", [
    ("qwen2-57b-a14b", 57_408_658_944, 14_249_270_784),
    ("qwen3-30b-a3b", 30_532_122_624, 3_353_032_704),
    ("deepseek-v3", 671_026_404_352, 37_552_282_624),
    ("mixtral-8x7b", 46_702_792_704, 12_879_925_248),  # the built-in equals its config
])
def test_counts_equal_transformers(name, total, active):
    """transformers 5.23, AutoModelForCausalLM.from_config on the meta device, sum of numel (DeepSeek's
    e_score_correction_bias is a buffer there, and the MTP module is not built: 671B, not 685B)."""
    shape = shape_of(name)
    assert (shape.total_params(), shape.active_params()) == (total, active)


def test_deepseek_v3_layers_by_hand():
    """MLA 187,107,328 per layer; a dense layer 583,483,392; an MoE layer 11,507,286,016 (transformers' shapes:
    q_a_proj 1536 x 7168, q_a_layernorm 1536, q_b_proj 24576 x 1536, kv_a_proj_with_mqa 576 x 7168,
    kv_a_layernorm 512, kv_b_proj 32768 x 512, o_proj 7168 x 16384; 256 experts + 1 shared of 3 x 2048 x 7168)."""
    shape = shape_of("deepseek-v3")
    D = 7168
    mla = D * 1536 + 1536 + 1536 * 128 * 192 + D * 576 + 512 + 512 * 128 * 256 + 128 * 128 * D
    assert shape.attention_params() == mla == 187_107_328
    assert shape.dense_block_params() == mla + 3 * D * 18432 + 2 * D == 583_483_392
    assert shape.block_params() == mla + 257 * 3 * D * 2048 + 256 * D + 2 * D == 11_507_286_016


def test_qwen2_moe_shared_expert_and_gate():
    """One shared expert of 20480 (3 x 3584 x 20480) and its 1 x 3584 sigmoid gate; Q, K, V biases."""
    parts = shape_of("qwen2-57b-a14b").param_parts()
    assert parts["shared_experts"] == 28 * (3 * 3584 * 20480 + 3584)
    assert parts["attention"] == 28 * (3584 * 128 * (2 * 28 + 2 * 4) + 128 * (28 + 2 * 4))


def test_unsupported_moe_patterns_are_one_line(tmp_path):
    config = json.loads((HF / "qwen3-30b-a3b.json").read_text())
    config["mlp_only_layers"] = [5]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    result = subprocess.run([sys.executable, "-m", "costmodel", "memory", "--model", str(path)],
                            capture_output=True, text=True)
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1
    assert "mlp_only_layers [5]" in result.stderr


def mixtral_cost(**layout):
    return evaluate_layout(load_model("mixtral-8x7b"), load_recipe("megatron"), Layout(**layout),
                           load_hardware("h100-sxm"))


def test_ep_shards_experts_and_their_state():
    """EP 8 over 8 ZeRO-1 ranks: each device holds one expert per layer, its state unsharded (expert
    data = 1), the dense rest's optimizer state over 8 (megatron recipe: 2 + 4 + 4 + 8 B/param)."""
    cost = mixtral_cost(fsdp=8, zero=1, ep=8, tokens=4096)
    D, L = 4096, 32
    expert, dense = L * 3 * D * 14336, 46_702_792_704 - L * 8 * 3 * D * 14336
    top = cost.heaviest
    assert top.stage.expert_params == expert
    assert top.stage.params == dense + expert
    assert top.components["weights"] == 2 * (dense + expert)
    assert top.components["grads"] == 4 * (dense + expert)  # ZeRO-1 keeps whole gradients
    assert top.components["optimizer"] == 8 * (dense / 8 + expert)


def test_ep_all_to_alls_by_hand():
    """Per MoE layer and micro-batch: dispatch and combine, forward and backward, S = b_a T k D each
    (T = 4096 tokens on the device, k = 2, bf16), over ep = 8 on one NVLink node."""
    cost = mixtral_cost(dp=8, ep=8, tokens=4096, grad_accum=2)
    rows = [r for r in cost.collectives if r.collective.axis == "ep"]
    tokens = [r for r in rows if r.collective.op == "all-to-all" and "routing" not in r.collective.purpose]
    assert len(tokens) == 4
    for r in tokens:
        assert r.collective.op == "all-to-all" and r.collective.group == 8
        assert r.collective.buffer_bytes == 2 * 4096 * 2 * 4096
        assert r.collective.calls == 32 * 2  # layers x micro-steps
        assert r.level == "nvlink"
    counts = next(r for r in rows if "counts" in r.collective.purpose)
    assert counts.collective.buffer_bytes == 8 * 8 * 8  # int64 x E experts x ep ranks
    assert cost.step.ep_s == pytest.approx(sum(r.seconds for r in rows))
    assert cost.step.critical_parts["ep_s"] == cost.step.ep_s


def test_ep_group_across_nodes_uses_the_network():
    """tp 8 fills the node: an EP group of 2 spans two nodes and runs on InfiniBand."""
    cost = mixtral_cost(dp=2, ep=2, tp=8, sp=True, tokens=4096)
    ep = [r for r in cost.collectives if r.collective.axis == "ep" and r.collective.op == "all-to-all"]
    assert ep and all(r.level == "infiniband" for r in ep)


def test_imbalance_scales_the_busiest_rank():
    balanced = mixtral_cost(dp=8, ep=8, tokens=4096)
    skewed = mixtral_cost(dp=8, ep=8, tokens=4096, moe_imbalance=1.5)
    size = {r.collective.purpose: r.collective.buffer_bytes for r in balanced.collectives if r.collective.axis == "ep"}
    for r in skewed.collectives:
        if r.collective.axis == "ep" and r.collective.op == "all-to-all":
            assert r.collective.buffer_bytes == 1.5 * size[r.collective.purpose]
    assert skewed.step.matmul_s > balanced.step.matmul_s
    assert skewed.flops.per_token == balanced.flops.per_token  # model FLOPs do not change


@pytest.mark.parametrize("layout, message", [
    (dict(dp=4, ep=3), "--ep 3 does not divide the 8 experts"),
    (dict(dp=2, ep=4), "--ep 4 does not divide the data axis"),
    (dict(dp=8, ep=8, tp=2), "needs --sp"),
])
def test_impossible_ep_layouts_say_why(layout, message):
    with pytest.raises(CostModelError, match=message):
        mixtral_cost(tokens=4096, **layout)


def test_ep_on_a_dense_model_is_refused():
    with pytest.raises(CostModelError, match="has no experts"):
        evaluate_layout(load_model("llama3-8b"), load_recipe("megatron"), Layout(dp=8, ep=8, tokens=4096))
    with pytest.raises(CostModelError, match="--moe-imbalance 2: llama3-8b routes no tokens to experts"):
        evaluate_layout(load_model("llama3-8b"), load_recipe("megatron"), Layout(dp=8, moe_imbalance=2, tokens=4096))


def test_deepseek_v3_ep64_pp16_per_stage():
    """The report's layout (arXiv:2412.19437, Sec. 3.2.1: PP 16, EP 64 over 8 nodes, ZeRO-1 DP): every stage's
    memory; the first stage holds the 3 dense layers and the embedding, EP 64 leaves 4 experts per layer."""
    cost = evaluate_layout(load_model("deepseek-v3"), load_recipe("megatron"),
                           Layout(fsdp=128, zero=1, pp=16, ep=64, tokens=4096, microbatches=16, recompute="full"))
    assert len(cost.stages) == 16
    first = cost.stages[0].stage
    assert (first.layers, first.dense_layers, first.expert_params) == (4, 3, 4 * 3 * 7168 * 2048)
    middle = cost.stages[1].stage
    assert (middle.dense_layers, middle.expert_params) == (0, 4 * 4 * 3 * 7168 * 2048)


def test_solve_ep_is_the_smallest_degree_that_fits():
    """Each admissible degree through `memory`; the answer is the first under the limit, the one below it is not."""
    out = subprocess.run([sys.executable, "-m", "costmodel", "solve", "ep", "--model", "mixtral-8x7b", "--fsdp", "8",
                          "--zero", "1", "--pp", "4", "--tokens", "4096", "--recompute", "full", "--recipe", "megatron",
                          "--limit", "40GB", "--json"], capture_output=True, text=True, check=True)
    answer = json.loads(out.stdout)
    needs = {int(e): b for e, b in answer["tried"].items()}
    assert list(needs) == [e for e in (1, 2, 4, 8) if e <= answer["ep"]]
    assert needs[answer["ep"]] < 40e9 and all(b >= 40e9 for e, b in needs.items() if e < answer["ep"])
    memory = evaluate_layout(load_model("mixtral-8x7b"), load_recipe("megatron"),
                             Layout(fsdp=8, zero=1, pp=4, tokens=4096, recompute="full", ep=answer["ep"]))
    assert memory.memory_bytes == needs[answer["ep"]]


@pytest.mark.slow
def test_plan_searches_the_expert_axis():
    """A MoE model's search includes EP degrees (among its ten best: the EP rows run within 2% of the best, FSDP
    inside the pipeline stages ahead of them); the best row's command reproduces its step."""
    from costmodel.solve.plan import plan

    result = plan(load_model("mixtral-8x7b"), load_recipe("megatron"), load_hardware("h100-sxm"), devices=16,
                  global_tokens=2**21, seq=4096, top=10)
    assert any(row.layout["ep"] > 1 for row in result.best)
    best = result.best[0].layout
    layout = Layout(**{k: v for k, v in best.items()})
    model = load_model("mixtral-8x7b").model_copy(update={"seq_len": 4096})  # the plan's --seq
    cost = evaluate_layout(model, load_recipe("megatron"), layout, load_hardware("h100-sxm"))
    assert cost.step.step_s == pytest.approx(result.best[0].step_s, rel=1e-9)


def switch_like(capacity_factor=1.25):
    """A small MoE with a capacity factor: 16 experts of 1024, top-2, 4 layers, D = 1024."""
    from costmodel.specs.model import Transformer

    return Transformer(name="switchy", hidden=1024, ffn_hidden=4096, layers=4, heads=8, kv_heads=8, vocab=1000,
                       seq_len=1024, moe=dict(experts=16, top_k=2, expert_ffn_hidden=1024,
                                              capacity_factor=capacity_factor))


def test_capacity_padding_is_hardware_flops_and_bytes():
    """Experts padded to c T k / E tokens: (c - 1) of the routed work runs on padding, fwd + bwd
    (3 x 0.25 x k 2 x 3 D F_e per layer and token), and each all-to-all moves c x the copies."""
    padded = evaluate_layout(switch_like(), load_recipe("megatron"), Layout(dp=4, ep=4, tokens=1024),
                             load_hardware("h100-sxm"))
    dropless = evaluate_layout(switch_like(None), load_recipe("megatron"), Layout(dp=4, ep=4, tokens=1024),
                               load_hardware("h100-sxm"))
    per_layer = 0.25 * 2 * 2 * 3 * 1024 * 1024
    assert padded.flops.padding_per_token == 3 * 4 * per_layer
    assert padded.flops.hardware_per_token == dropless.flops.hardware_per_token + 3 * 4 * per_layer
    assert padded.flops.per_token == dropless.flops.per_token
    sizes = {r.collective.purpose: r.collective.buffer_bytes for r in dropless.collectives if r.collective.axis == "ep"}
    for r in padded.collectives:
        if r.collective.axis == "ep" and r.collective.op == "all-to-all":
            assert r.collective.buffer_bytes == 1.25 * sizes[r.collective.purpose]


def test_expert_matmuls_use_an_experts_shape():
    """DeepSeek-V3 without EP: 4096 tokens x 8 copies over 256 experts = 128 rows per expert GEMM (F_e 2048,
    D 7168), far below the dense MLP's efficiency; with EP 64 each device's 4 experts get 8192 rows."""
    from costmodel.measure.matmul import table_efficiency
    from costmodel.specs.load import table_file

    h100 = load_hardware("h100-sxm")
    sm = h100.step_model

    def step(ep):
        return evaluate_layout(load_model("deepseek-v3"), load_recipe("megatron"),
                               Layout(fsdp=64, zero=1, ep=ep, tokens=4096, recompute="full"), h100).step

    for ep, rows in ((1, 128), (64, 8192)):
        expected = table_efficiency(table_file(h100, sm.matmul_table), rows, 2048, 7168, h100.flops("bf16"))
        assert step(ep).expert_efficiency == pytest.approx(expected * sm.sustained_fraction, rel=1e-12)
    assert step(1).expert_efficiency < 0.5 * step(1).matmul_efficiency


def test_expert_tp_below_tp_folds_ranks_into_the_expert_axis():
    """tp 2 with --etp 1 (Megatron-Bridge's DeepSeek-V3 recipe: TP 2, ETP 1): the other TP rank joins the
    experts' data axis, so EP 8 fits dp 4 x 2; each device holds one whole expert per layer; no expert-TP
    traffic; each rank keeps half of the TP group's token copies, with F_e whole."""
    cost = mixtral_cost(dp=4, tp=2, sp=True, etp=1, ep=8, tokens=4096)
    D, F = 4096, 14336
    assert cost.heaviest.stage.expert_params == 32 * 3 * D * F
    assert not [r for r in cost.collectives if r.collective.axis == "etp"]
    assert not [r for r in cost.collectives if r.collective.axis.startswith("expert-")]  # (2 x 4) / 8 = 1 replica
    whole = mixtral_cost(dp=8, ep=8, tokens=4096)  # tp 1: the same expert tensors for all 4096 tokens
    routed = 2 * (2 * (2 * D + 1) + 2 * 4 * F)  # k copies: D in and out, weight, SwiGLU's 4 F (bf16)
    difference = whole.heaviest.stage.activation_bytes_per_token - cost.heaviest.stage.activation_bytes_per_token
    assert difference >= routed / 2  # half the copies per rank (and the tp-split rest of the layer)
    with pytest.raises(ValueError, match="--etp 4 does not divide --tp 2"):
        mixtral_cost(dp=4, tp=2, sp=True, etp=4, ep=8, tokens=4096)
