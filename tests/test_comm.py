"""Collective bytes per step against the hand-derived counts of ZeRO and the Scaling Book."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costmodel.specs.layout import Layout
from costmodel.specs.load import load_hardware, load_model
from costmodel.specs.recipe import RECIPES
from costmodel.cost.network import egress_bandwidth
from costs import collectives as step_collectives, timed as timed_collectives

XXL = load_model("xxl")
CS336 = RECIPES["cs336"]
P = 219_848_638_464
D, L = 16384, 126


def _sent(collectives, **match):
    return sum(c.bytes_sent for c in collectives if all(getattr(c, k) == v for k, v in match.items()))


def test_ddp_all_reduce_of_bf16_gradients():
    cs = step_collectives(XXL, CS336, Layout(dp=8))
    assert [(c.op, c.group, c.buffer_bytes) for c in cs] == [("all-reduce", 8, 2 * P)]
    assert cs[0].bytes_sent == 2 * 7 / 8 * 2 * P  # ring: 2 (n-1)/n S


@pytest.mark.parametrize("reshard, passes", [(True, 3), (False, 2)])
def test_fsdp_gathers_forward_and_backward_and_reduce_scatters(reshard, passes):
    """ZeRO-3 moves 3 Psi per step (arXiv:1910.02054 Sec. 7.2.2), 2 Psi without the backward gather."""
    cs = step_collectives(XXL, CS336, Layout(fsdp=16, reshard_after_forward=reshard))
    assert sum(c.calls * c.buffer_bytes for c in cs) == pytest.approx(passes * 2 * P, rel=1e-15)
    assert _sent(cs) == pytest.approx(passes * 15 / 16 * 2 * P, rel=1e-15)
    assert {c.calls for c in cs} == {L}  # one all-gather / reduce-scatter per block


def test_zero_stage_3_moves_one_and_a_half_times_ddp():
    ddp = _sent(step_collectives(XXL, RECIPES["zero"], Layout(fsdp=64, zero=0)))
    for stage in (1, 2):
        assert _sent(step_collectives(XXL, RECIPES["zero"], Layout(fsdp=64, zero=stage))) == pytest.approx(ddp)
    assert _sent(step_collectives(XXL, RECIPES["zero"], Layout(fsdp=64, zero=3))) == pytest.approx(1.5 * ddp)


def test_zero_2_reduce_scatters_every_micro_batch_zero_1_once():
    """ZeRO-2 keeps only its gradient shard, so each micro-batch's gradient is reduce-scattered as backward makes
    it (DeepSpeed stage 2: engine.py L2051-2053); ZeRO-1 keeps the full gradient and reduces once per step. The
    updated weights are gathered once per step either way."""
    def calls(stage, accum):
        cs = step_collectives(XXL, RECIPES["zero"], Layout(fsdp=64, zero=stage, grad_accum=accum))
        return {c.op: c.calls for c in cs}

    assert calls(2, 4) == {"reduce-scatter": 4, "all-gather": 1} and calls(2, 1) == {"reduce-scatter": 1, "all-gather": 1}
    assert calls(1, 4) == {"reduce-scatter": 1, "all-gather": 1}


def test_hsdp_all_reduces_the_gradient_shard_across_replicas():
    """FSDP2's HSDP: each unit's replicas all-reduce its reduce-scatter's output (foreach_reduce), one call per block
    per micro-batch: the shard, 2 P / N in bf16, over the step."""
    cs = step_collectives(XXL, CS336, Layout(dp=4, fsdp=8))
    rows = [c for c in cs if c.axis == "dp"]
    assert {(c.op, c.group) for c in rows} == {("all-reduce", 4)}
    assert sum(c.calls for c in rows) == XXL.layers and sum(c.calls * c.buffer_bytes for c in rows) == 2 * P / 8


@pytest.mark.parametrize("layout, shard", [(dict(cp=2), 1), (dict(cp=2, dp=4), 1), (dict(cp=2, fsdp=8), 8)])
def test_context_parallel_ranks_sum_their_gradients(layout, shard):
    """CP ranks hold the same weights and see different tokens: once per step their gradients (the data
    axis's reduced shard, 2 P / N in bf16) are all-reduced over the c ranks (Megatron-core reduces over
    dp x cp). Llama 3 8B, P = 8,030,261,248."""
    P8 = 8_030_261_248
    cs = step_collectives(load_model("llama3-8b"), CS336, Layout(tokens=8192, **layout))
    (ar,) = [c for c in cs if c.axis == "cp" and c.op == "all-reduce"]
    assert (ar.group, ar.calls, ar.buffer_bytes, ar.phase) == (2, 1, 2 * P8 / shard, "backward")


@pytest.mark.parametrize("sp", [False, True])
def test_tensor_parallel_moves_4BD_per_layer_each_way(sp):
    """Scaling Book training chapter, TP row: 4BD forward + 4BD backward per layer (bytes), less the
    first block's input-gradient collective: XXL's input is data, so autograd never computes that
    gradient (an all-reduce of 2BD, sent twice; with SP a reduce-scatter of 2BD)."""
    B, Y = 4096, 4
    cs = step_collectives(XXL, CS336, Layout(tp=Y, sp=sp, tokens=B))
    assert _sent(cs, phase="forward") == pytest.approx((Y - 1) / Y * 4 * B * D * L, rel=1e-15)
    skipped = 2 * B * D if sp else 4 * B * D
    assert _sent(cs, phase="backward") == pytest.approx((Y - 1) / Y * (4 * B * D * L - skipped), rel=1e-15)


@pytest.mark.parametrize("sp", [False, True])
@pytest.mark.parametrize("checkpoint", ["reentrant", "non-reentrant"])
@pytest.mark.parametrize("recompute, K, regions", [("full", 1, L), ("every", 4, 31), ("every", 5, 25)])
def test_recomputation_reruns_the_forward_tp_collectives(sp, checkpoint, recompute, K, regions):
    """Each recomputed block reruns its forward in backward, and with it its forward collectives: the
    reduction of its row-parallel output (2BD; all-reduce, SP reduce-scatter) and, with SP, the
    all-gather of its input. torch's non-reentrant checkpoint stops before a region's last output is
    reduced. 'every' K recomputes the K-th, 2K-th, ... blocks (126 / 5 -> 25), each its own region. Torch
    issues the same calls (tests/test_torch_distributed.py, *-recompute cases)."""
    B, Y = 4096, 4
    plain = step_collectives(XXL, CS336, Layout(tp=Y, sp=sp, tokens=B))
    cs = step_collectives(XXL, CS336, Layout(tp=Y, sp=sp, tokens=B, recompute=recompute, recompute_layers=K,
                                             checkpoint=checkpoint))
    rerun = [(c.op, c.calls, c.buffer_bytes) for c in cs if "recomputed" in c.purpose]
    assert all(c.phase == "backward" for c in cs if "recomputed" in c.purpose)
    reduced = regions - (regions if checkpoint == "non-reentrant" else 0)
    expected = [("all-gather", regions, 2 * B * D)] if sp else []
    expected += [("reduce-scatter" if sp else "all-reduce", reduced, 2 * B * D)] if reduced else []  # no call, no row
    assert rerun == expected
    assert [c for c in cs if "recomputed" not in c.purpose] == plain


@pytest.mark.parametrize("model, rerun_reductions", [
    ("llama3-8b", 64 - 32),  # attention's and the MLP's per layer; the MLP's, last, is not rerun
    ("mixtral-8x7b", 32),  # attention's only, and it feeds the experts (no shared experts): all rerun
    ("deepseek-v3", 2 * 61 - 61),  # attention's, and the MLP's (3 dense) or the ungated shared experts' (58), last
])
def test_non_reentrant_reruns_every_reduction_but_a_layers_last_when_only_the_residual_add_reads_it(
        model, rerun_reductions):
    """A non-reentrant rerun stops once backward's saved tensors exist again: a reduction whose output only
    the residual add reads is not rerun (a dense layer's MLP; an MoE layer's ungated shared experts, added
    last), every other forward reduction is (tests/test_torch_distributed_llama.py measures a dense layer)."""
    spec = load_model(model)
    cs = step_collectives(spec, CS336, Layout(tp=2, sp=True, tokens=4096, recompute="full", checkpoint="non-reentrant"))
    (rerun,) = [c for c in cs if c.purpose == "block outputs, recomputed"]
    assert rerun.calls == rerun_reductions


@pytest.mark.parametrize("cp_kind", ["ring", "a2a"])
@pytest.mark.parametrize("recompute, K, rerun", [("none", 1, 0), ("selective", 1, 0), ("full", 1, 32), ("every", 3, 10)])
def test_recomputation_reruns_the_forward_cp_collectives(cp_kind, recompute, K, rerun):
    """A recomputed layer reruns attention's forward, its context-parallel traffic too: each forward CP
    row again in backward for the recomputed layers (Llama 3 8B, 32 layers; every 3rd: the 3rd ... 30th, 10), in either
    checkpoint mode (attention runs before the MLP, where a non-reentrant rerun stops)."""
    model = load_model("llama3-8b")
    plain = step_collectives(model, CS336, Layout(cp=4, cp_kind=cp_kind, tokens=32768))
    for checkpoint in ("reentrant", "non-reentrant"):
        cs = step_collectives(model, CS336, Layout(cp=4, cp_kind=cp_kind, tokens=32768, recompute=recompute,
                                                   recompute_layers=K, checkpoint=checkpoint))
        again = [c for c in cs if c.axis == "cp" and c.purpose.endswith(", recomputed")]
        forward = [c for c in plain if c.axis == "cp" and c.phase == "forward"]
        assert [(c.op, c.phase, c.calls, c.buffer_bytes) for c in again] == [
            (c.op, "backward", c.calls * rerun // 32, c.buffer_bytes) for c in forward if rerun]
        assert [c for c in cs if c not in again] == plain


@settings(max_examples=30, deadline=None)
@given(dp=st.integers(1, 4), fsdp=st.integers(1, 4), tp=st.sampled_from([1, 2, 4]))
def test_degree_one_axes_send_nothing(dp, fsdp, tp):
    cs = step_collectives(XXL, CS336, Layout(dp=dp, fsdp=fsdp, tp=tp, tokens=64))
    axes = {c.axis for c in cs}
    assert ("tp" in axes) == (tp > 1)
    assert (axes & {"data", "fsdp", "dp"} != set()) == (dp * fsdp > 1)


def test_tpu_time_is_bytes_over_w_ici_times_m():
    """T_FSDP forward = sent / (W_ici M_X), W_ici = 1.8e11 B/s (v5p, Scaling Book)."""
    rows = timed_collectives(XXL, CS336, Layout(fsdp=16, tp=4, mx=2, tokens=4096), load_hardware("tpu-v5p"))
    ag = next(r for r in rows if r.collective.op == "all-gather" and r.collective.phase == "forward")
    assert egress_bandwidth(load_hardware("tpu-v5p"), ag.placement) == 2 * 1.8e11
    assert ag.seconds == pytest.approx(15 / 16 * 2 * P / 4 / (2 * 1.8e11), rel=1e-12)


def test_gpu_axis_leaves_the_nvlink_domain():
    h100 = load_hardware("h100-sxm")
    inside = timed_collectives(XXL, CS336, Layout(fsdp=8), h100)
    across = timed_collectives(XXL, CS336, Layout(fsdp=16), h100)
    assert {r.level for r in inside} == {"nvlink"}
    assert {r.level for r in across} == {f"nvlink+{h100.network[-1].name}"}  # two levels: ring in the node, NICs across


def test_all_to_all_context_parallel_needs_whole_heads_per_rank():
    """Ulysses partitions the heads over the c ranks (Jacobs et al. 2023, Sec. 3), K and V's too (Transformer
    Engine's AttnFuncWithCPAndQKVOA2A asserts both): Llama 3 8B's 32 query and 8 KV heads / tp 2 = 16 and 4 per TP
    rank take cp 4, not cp 16 (4 KV heads) nor cp 32 (16 query heads); the ring has no such rule."""
    from costmodel.errors import CostModelError

    llama = load_model("llama3-8b")
    step_collectives(llama, CS336, Layout(tp=2, cp=4, cp_kind="a2a", tokens=131072))
    step_collectives(llama, CS336, Layout(tp=2, cp=32, cp_kind="ring", tokens=131072))
    with pytest.raises(CostModelError, match="16 attention heads per TP rank .32 / --tp 2. to divide"):
        step_collectives(llama, CS336, Layout(tp=2, cp=32, cp_kind="a2a", tokens=131072))
    with pytest.raises(CostModelError, match="8 KV heads per TP rank .4. to divide by it too"):
        step_collectives(llama, CS336, Layout(tp=2, cp=16, cp_kind="a2a", tokens=131072))


@pytest.mark.parametrize("block, norms", [("sequential", 2), ("parallel", 1), ("parallel-two-norms", 2)])
@pytest.mark.parametrize("sp", [False, True])
def test_parallel_blocks_reduce_attention_and_mlp_once(block, norms, sp):
    """Per layer and micro-batch, a sequential block has two column/row pairs (Megatron: f and g each);
    a parallel block sums attention's and the MLP's partial outputs and reduces them once (GPT-NeoX
    gpt_j_residual: output = residual + self.reduce(attention + mlp), megatron/model/transformer.py),
    while each of its two column-parallel linears keeps its f (an input-gradient all-reduce, or with SP an
    all-gather before and a reduce-scatter after). Under SP the norms' gradients are all-reduced once."""
    from costmodel.specs.model import Transformer

    layers, tokens, width = 3, 4096, 64
    model = Transformer(name="t", hidden=width, ffn_hidden=256, layers=layers, heads=4, kv_heads=4, vocab=128,
                        seq_len=tokens, block=block)
    cs = [c for c in step_collectives(model, RECIPES["megatron"], Layout(tp=4, sp=sp, tokens=tokens))
          if c.purpose not in ("embedding output (vocabulary-parallel)", "output-layer input gradient",
                               "parallel cross-entropy (max, sum, target)", "embedding output gradient",
                               "output-layer input")]
    calls = {(c.op, c.phase): c.calls for c in cs}
    outputs = 2 if block == "sequential" else 1
    size = 2 * tokens * width
    assert all(c.buffer_bytes == size for c in cs if c.phase != "optimizer")
    if sp:
        assert calls == {("all-gather", "forward"): 2 * layers, ("reduce-scatter", "forward"): outputs * layers,
                         ("all-gather", "backward"): outputs * layers, ("reduce-scatter", "backward"): 2 * layers,
                         ("all-reduce", "optimizer"): norms * layers + 1}
    else:
        assert calls == {("all-reduce", "forward"): outputs * layers, ("all-reduce", "backward"): 2 * layers}


def test_tpu_data_axes_cross_dcn_only_beyond_one_ici_domain():
    """PaLM 540B's 2 x 3072 TPU v4 chips (arXiv:2204.02311 Sec. 4): TP 12 x FSDP 256 inside each pod
    (ICI), the 2 pods' data parallelism over DCN; the whole data group spans both."""
    from costmodel.cost.placement import placement
    from costmodel.cost.point import Point

    tpu = load_hardware("tpu-v4")
    point = Point.of(Layout(tp=12, fsdp=256, dp=2, tokens=8192))
    assert placement(tpu, point, "fsdp").dcn is False
    assert placement(tpu, point, "dp").dcn is True
    assert placement(tpu, point, "data").dcn is True
    inside = Point.of(Layout(tp=4, fsdp=256, dp=2, tokens=8192))  # 2,048 chips: one pod
    assert placement(tpu, inside, "dp").dcn is False


def test_a_pipeline_across_tpu_pods_sends_over_dcn():
    """tp 8 x fsdp 256 = 2,048 chips per stage, 4 stages = 8,192 > one 4,096-chip v4 pod: the stages'
    sends cross pods (DCN); with 2 stages they stay on ICI."""
    from costmodel.cost.placement import placement
    from costmodel.cost.point import Point

    tpu = load_hardware("tpu-v4")
    assert placement(tpu, Point.of(Layout(tp=8, fsdp=256, pp=4, microbatches=4, tokens=8192)), "pp").dcn is True
    assert placement(tpu, Point.of(Layout(tp=8, fsdp=256, pp=2, microbatches=4, tokens=8192)), "pp").dcn is False


@pytest.mark.parametrize("nodes, per_node", [(2, 8), (2, 4), (4, 2), (8, 1)])
def test_all_to_all_across_nodes_sends_the_other_nodes_share_over_the_nics(nodes, per_node):
    """A rank's all-to-all buffer of S bytes goes S / n to each of the n = N g ranks: (N - 1)/N of it to the other
    nodes' ranks over the NICs (48 GB/s a GPU as NCCL's topology sees H100's), (g - 1)/(N g) over NVLink (370.8 GB/s)
    at the same time, the NICs' share the slower: on 8 nodes of 1 GPU the flat ring's (n - 1)/n, on 2 nodes half."""
    from costmodel.cost.network import collective_seconds
    from costmodel.cost.placement import Placement

    h100, size = load_hardware("h100-sxm"), 2**30
    where_ = Placement("ep", nodes * per_node, per_node, nodes)
    latency = collective_seconds(h100, op="all-to-all", buffer_bytes=0, where_=where_)
    seconds = collective_seconds(h100, op="all-to-all", buffer_bytes=size, where_=where_) - latency
    assert seconds == pytest.approx((nodes - 1) / nodes * size / 48e9, rel=1e-12)
    assert (per_node - 1) / (nodes * per_node) * size / 370.8e9 < seconds
