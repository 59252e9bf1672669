"""Mixture-of-experts layers in real torch against cost4d's MoE formulas, exact: parameters, FLOPs, the
bytes autograd saves, and (gloo, 2 and 4 processes) the expert-parallel all-to-alls.

The torch side is tests/torch_moe.py (its docstring lists what each op saves); costmodel supplies only the
shape. Predictions come from costmodel/cost/shape.py (param_parts, active_params,
moe_mlp_forward_flops_per_token, layer_activation_bytes_per_token), costmodel/formulas/activations.py
(routed_expert_bytes_per_token, inside_tp_bytes_per_token, shared_gate_bytes_per_token) and
costmodel/parallel/expert (collectives), through evaluate_layout.

Saved bytes are measured as in tests/test_torch_llama_activations.py: saved_tensors_hooks record every
storage autograd saves, each counted once; parameters are left out (weights, not activations), and so is
the MLP's input (the second norm's output: the formula counts it outside the TP region, as the MLP input
of a dense layer). Routing is fixed (token i -> experts i, i + 1 mod E: T k / E copies per expert) or
learned (top-k of random logits); on one device both keep T k copies, so both save the same bytes.

This comparison found two things cost4d had wrong, both fixed: the routing weights' all-to-all has a
backward mirror (their gradients go back to the router, which is trained through them; Megatron-core
launches "probs A2A -> tokens A2A" in backward), and the permutation's int64 indices stay on the home rank,
which sends T k copies whatever the imbalance (the formula had multiplied them by f).
"""

from pathlib import Path

import pytest

pytest.importorskip("torch", reason="the PyTorch cross-checks need torch: pip install torch==2.13.0 (the README's test command)")
import torch
from torch_llama import rms_norm, rope_tables, storage_breakdown, storage_bytes
from torch_models import SavedStorages, count_flops, decoder_step_flops
from torch_moe import LlamaMoEBlock, MoEDecoder, fixed_route, moe_mlp, part_of
from test_torch_distributed import run_ranks

from costmodel.cost.evaluate import evaluate_layout
from costmodel.cost.shape import Shape
from costmodel.formulas import activations as ac
from costmodel.specs.layout import Layout
from costmodel.specs.model import MoE, Transformer
from costmodel.specs.recipe import RECIPES

D, HEADS, KV_HEADS, L, VOCAB, FFN = 64, 4, 2, 3, 128, 96
E, K, F_E, F_S, L_D = 4, 2, 48, 32, 1
BATCH, SEQ = 2, 12
T = BATCH * SEQ  # a multiple of E: fixed routing gives every expert T k / E copies
ACT_BYTES = 2  # bf16

CASES = [  # (case, MoE fields beyond E, k, F_e, L_d; Transformer fields)
    ("mixtral", dict(), dict()),  # routed experts only
    ("deepseek", dict(shared_ffn_hidden=F_S), dict()),  # + shared experts
    ("qwen2", dict(shared_ffn_hidden=F_S, shared_gate=True), dict()),  # + their sigmoid gate
    ("gelu", dict(shared_ffn_hidden=F_S), dict(mlp="gelu")),  # two-matrix experts
]
PARAMS = [pytest.param(m, t, id=c) for c, m, t in CASES]


def spec(moe_fields, fields) -> Transformer:
    moe = MoE(experts=E, top_k=K, expert_ffn_hidden=F_E, dense_layers=L_D, **moe_fields)
    return Transformer(name="tiny-moe", hidden=D, ffn_hidden=FFN, layers=L, heads=HEADS, kv_heads=KV_HEADS,
                       vocab=VOCAB, seq_len=SEQ, moe=moe, **fields)


def route(kind):
    return fixed_route(T, E, K) if kind == "fixed" else None


# ---------------------------------------------------------------- parameters


@pytest.mark.parametrize("moe_fields, fields", PARAMS)
def test_params_match_torch(moe_fields, fields):
    """Sum of numel by part equals param_parts; active = total less (L - L_d)(E - k) experts' numel."""
    s = spec(moe_fields, fields)
    model = MoEDecoder(s)
    parts = {}
    for name, p in model.named_parameters():
        parts[part_of(name)] = parts.get(part_of(name), 0) + p.numel()
    shape = Shape.of(s)
    assert shape.param_parts() == parts
    total = sum(p.numel() for p in model.parameters())
    one_expert = sum(p.numel() for p in model.blocks[-1].moe.experts[0].parameters())
    assert shape.total_params() == total
    assert shape.active_params() == total - (L - L_D) * (E - K) * one_expert
    assert shape.expert_params() == one_expert


# ---------------------------------------------------------------- FLOPs


@pytest.mark.parametrize("routing", ["fixed", "learned"])
@pytest.mark.parametrize("moe_fields, fields", PARAMS)
def test_moe_mlp_flops_match_torch(moe_fields, fields, routing):
    """One MoE MLP: forward = T x moe_mlp_forward_flops_per_token, backward twice that (its input needs a
    gradient). Each expert's matmuls cost 2 D F_e per copy whatever the split, so learned routing counts
    the same."""
    torch.manual_seed(0)
    s = spec(moe_fields, fields)
    mlp = moe_mlp(s)
    x = torch.randn(T, D, requires_grad=True)
    out, forward = count_flops(lambda: mlp(x, route(routing)))
    _, backward = count_flops(lambda: out.sum().backward())
    per_token = Shape.of(s).moe_mlp_forward_flops_per_token()
    assert forward == T * per_token
    assert backward == 2 * T * per_token


@pytest.mark.parametrize("moe_fields, fields", PARAMS)
def test_decoder_flops_match_torch(moe_fields, fields):
    """The whole decoder (L_d dense layers, MoE layers, logits), learned routing."""
    torch.manual_seed(0)
    s = spec(moe_fields, fields)
    model = MoEDecoder(s)
    tokens = torch.randint(VOCAB, (BATCH, SEQ))
    forward, backward = decoder_step_flops(model, tokens)
    assert forward == T * Shape.of(s).forward_flops_per_token(seq_len=SEQ)
    assert backward == T * Shape.of(s).backward_flops_per_token(seq_len=SEQ)


# ---------------------------------------------------------------- saved activations


def mlp_and_input(s):
    """bf16 MoE MLP and its input: an RMSNorm output of a tensor that needs a gradient."""
    torch.manual_seed(0)
    mlp = moe_mlp(s).to(torch.bfloat16)
    h = torch.randn(BATCH, SEQ, D, dtype=torch.bfloat16, requires_grad=True)
    norm = torch.nn.Parameter(torch.ones(D, dtype=torch.bfloat16))
    return mlp, rms_norm(h, norm)


def mlp_bytes_per_token(s, routed_factor=1) -> float:
    """routed_expert_bytes_per_token (tp = 1) + the shared experts' 4 F_s (GeLU 2 F_s) act bytes + the
    shared gate's (the MLP part of inside_tp_bytes_per_token: no heads, no attention)."""
    m, gated = s.moe, s.mlp == "swiglu"
    routed = ac.routed_expert_bytes_per_token(hidden=D, top_k=K, expert_ffn_hidden=F_E, act_bytes=ACT_BYTES,
                                              gated=gated, tp=1, routed_factor=routed_factor)
    shared = ac.inside_tp_bytes_per_token(hidden=D, ffn_hidden=m.shared_ffn_hidden, heads=0, kv_heads=0, head_dim=0,
                                          act_bytes=ACT_BYTES, gated=gated)
    gate = ac.shared_gate_bytes_per_token(hidden=D, act_bytes=ACT_BYTES, tp=1) if m.shared_gate else 0
    return routed + shared + gate


@pytest.mark.parametrize("routing", ["fixed", "learned"])
@pytest.mark.parametrize("moe_fields, fields", PARAMS)
def test_moe_mlp_saved_bytes_match_formula(moe_fields, fields, routing):
    s = spec(moe_fields, fields)
    mlp, x = mlp_and_input(s)
    names = {"input": x}
    with SavedStorages() as saved:
        out = mlp(x, route(routing), trace=names)
    exclude = [x, *mlp.parameters()]
    kept = storage_bytes(saved, exclude)
    out.float().sum().backward()  # sanity: it trains, the router included
    assert all(torch.isfinite(p.grad).all() for p in mlp.parameters() if p.grad is not None)
    assert mlp.router.weight.grad.abs().sum() > 0
    assert kept == T * mlp_bytes_per_token(s), {k: v / T for k, v in storage_breakdown(saved, names, exclude).items()}


def test_routing_tensors_one_by_one():
    """torch alone, no costmodel: the router keeps the int64 top-k indices (8 k B per token) and the fp32
    softmax (4 k); the permutation two int64 indices per copy (order, token; 16 k); the expert side per
    copy its input and weighted output (2 D b_a), its weight (b_a)."""
    s = spec(dict(), dict())
    mlp, x = mlp_and_input(s)
    names = {}
    with SavedStorages() as saved:
        mlp(x, fixed_route(T, E, K), trace=names)
    parts = storage_breakdown(saved, names, [x, *mlp.parameters()])
    copies = T * K
    assert parts["chosen"] == 8 * copies
    assert parts["order"] == parts["token"] == 8 * copies
    assert parts["x_copies"] == parts["expert_out"] == ACT_BYTES * D * copies
    assert parts["copy_weights"] == ACT_BYTES * copies
    probs = [v for k, v in parts.items() if k.startswith("unnamed") and v == 4 * copies]
    assert probs, parts  # the fp32 softmax output (not traced: route() casts it at once)


@pytest.mark.parametrize("flash", [True, False], ids=["flash", "math"])
@pytest.mark.parametrize("moe_fields, fields", PARAMS)
def test_moe_layer_saved_bytes_match_formula(moe_fields, fields, flash):
    """A whole MoE transformer layer (tests/torch_llama.py's attention and fused-kernel norms):
    layer_activation_bytes_per_token(act_bytes 2, tp 1, no SP, no recompute, norm_stats) x tokens."""
    s = spec(moe_fields, fields)
    torch.manual_seed(0)
    block = LlamaMoEBlock(s, flash=flash).to(torch.bfloat16)
    cos, sin = rope_tables(SEQ, s.dim_per_head, torch.bfloat16)
    x = torch.randn(BATCH, SEQ, D, dtype=torch.bfloat16, requires_grad=True)
    names = {"cos": cos, "sin": sin}
    with SavedStorages() as saved:
        out = block(x, cos, sin, fixed_route(T, E, K), trace=names)
    exclude = [cos, sin, *block.parameters()]
    out.float().sum().backward()
    assert torch.isfinite(x.grad).all()
    per_token = Shape.of(s).layer_activation_bytes_per_token(act_bytes=ACT_BYTES, tp=1, sp=False, selective=False,
                                                             flash=flash, norm_stats=True)
    assert storage_bytes(saved, exclude) == T * per_token, \
        {k: v / T for k, v in storage_breakdown(saved, names, exclude).items()}


def test_index_add_saves_its_source():
    """Informational, torch 2.13 CPU: unpermuting with index_add (rather than Megatron's scatter_add)
    also saves the added source, b_a D per copy more than scatter_add / index_put(accumulate=True)."""
    torch.manual_seed(0)
    y = torch.randn(T * K, D, dtype=torch.bfloat16, requires_grad=True) * 1  # a non-leaf, as the weighted outputs
    token = torch.arange(T * K) // K
    kept = {}
    for name, fn in {"index_add": lambda: torch.zeros(T, D, dtype=y.dtype).index_add(0, token, y),
                     "scatter_add": lambda: torch.zeros(T, D, dtype=y.dtype).scatter_add(
                         0, token[:, None].expand(-1, D), y),
                     "index_put": lambda: torch.zeros(T, D, dtype=y.dtype).index_put((token,), y, accumulate=True)
                     }.items():
        with SavedStorages() as saved:
            fn()
        kept[name] = saved.nbytes
    assert kept == {"index_add": 8 * T * K + ACT_BYTES * D * T * K, "scatter_add": 8 * T * K, "index_put": 8 * T * K}


def test_gather_saves_the_logits():
    """Informational: why fixed routing adds a -inf bias before topk instead of gathering the chosen
    logits. topk saves only its int64 indices; gather saves the index and its input, the logits
    (b_a E per token)."""
    torch.manual_seed(0)
    logits = torch.randn(T, E, dtype=torch.bfloat16, requires_grad=True) * 1
    chosen = logits.detach().topk(K, dim=-1).indices
    with SavedStorages() as topk:
        logits.topk(K, dim=-1)
    with SavedStorages() as gather:
        logits.gather(1, chosen)
    assert topk.nbytes == 8 * T * K
    assert gather.nbytes == 8 * T * K + ACT_BYTES * T * E


def test_fixed_route_picks_the_given_experts():
    """The bias makes topk choose experts i, i + 1 (mod E) for token i, T k / E copies each, weights as
    the softmax over those two logits."""
    mlp = moe_mlp(spec(dict(), dict()))
    x = torch.randn(T, D)
    chosen, weights = mlp.route(x, fixed_route(T, E, K, dtype=torch.float32))
    expected = torch.stack([torch.arange(T) % E, (torch.arange(T) + 1) % E], dim=1)
    assert torch.equal(chosen.sort(dim=1).values, expected.sort(dim=1).values)
    assert torch.bincount(chosen.flatten(), minlength=E).tolist() == [T * K // E] * E
    logits = mlp.router(x).gather(1, chosen)
    torch.testing.assert_close(weights, logits.softmax(-1))


@pytest.mark.parametrize("moe_fields, fields", PARAMS)
def test_moe_mlp_computes_the_mixture(moe_fields, fields):
    """The grouped MLP equals the token-by-token definition sum_j w_tj expert_e(tj)(x_t) (+ shared), fp64."""
    torch.manual_seed(0)
    mlp = moe_mlp(spec(moe_fields, fields)).double()
    x = torch.randn(T, D, dtype=torch.float64)
    chosen, weights = mlp.route(x)
    expected = torch.stack([sum(w * mlp.experts[e](x[t]) for e, w in zip(chosen[t].tolist(), weights[t]))
                            for t in range(T)])
    if mlp.shared is not None:
        shared = mlp.shared(x)
        expected = expected + (torch.sigmoid(mlp.shared_gate(x)) * shared if mlp.shared_gate is not None else shared)
    torch.testing.assert_close(mlp(x), expected)


# ---------------------------------------------------------------- expert parallelism (gloo, 2 and 4 ranks)
#
# tests/dist_moe_workers.py: every rank routes T tokens of its own through L - L_d MoE MLPs whose E experts
# are spread over the ranks (E / n each), with two all-to-alls per layer for the tokens (dispatch, combine),
# one for the routing weights, and an all-gather of the E int64 counts; forward and backward, logged.
# Compared with cost4d's ep rows for Layout(dp=n, ep=n, tokens=T, moe_imbalance=f). S of an all-to-all is
# what the rank sends and keeps, or receives if more (they differ on the busiest rank under imbalance:
# it receives f T k copies in dispatch and sends them in combine); of an all-gather, its output.
DIST_SPEC = spec(dict(shared_ffn_hidden=F_S, shared_gate=True), dict())
DIST_WORKER = "dist_moe_workers.py"
MOE_LAYERS = L - L_D
IMBALANCE = {"balanced": 1.0, "imbalanced": 1.5}  # what each worker case's routing gives rank 0 (checked below)
PURPOSE = {  # (phase, what the worker sent) -> cost4d's purpose
    ("forward", "tokens"): "dispatch: tokens to their experts",
    ("forward", "outputs"): "combine: expert tokens back",
    ("forward", "weights"): "dispatch: routing weights",
    ("backward", "outputs"): "dispatch: gradients to their experts",  # combine's mirror: home -> experts
    ("backward", "tokens"): "combine: expert gradients back",  # dispatch's mirror: experts -> home
    ("backward", "weights"): "routing-weight gradients back",
}


def ep_layout(world, case):
    return Layout(dp=world, ep=world, tokens=T, moe_imbalance=IMBALANCE[case])


@pytest.fixture(scope="module", params=[2, 4], ids=lambda w: f"{w}ranks")
def ep_measured(request, tmp_path_factory):
    """(world size, [per-rank {case: result}]) from one launch of both cases on that many ranks."""
    world = request.param
    worker = Path(__file__).with_name(DIST_WORKER)
    return world, run_ranks(world, tmp_path_factory.mktemp(f"moe{world}"), worker,
                            (DIST_SPEC.model_dump_json(), BATCH, SEQ))


def measured_ep_rows(records):
    out = {}
    for r in records:
        what = "counts" if r["op"] == "all-gather" else r["what"]
        purpose = ("tokens per expert (int64 counts, before dispatch)" if what == "counts"
                   else PURPOSE[("forward" if r.get("rerun") else r["phase"], what)])
        purpose += ", recomputed" if r.get("rerun") else ""  # a recomputed forward's, sent during backward
        size = r["output_bytes"] if r["op"] == "all-gather" else max(r["input_bytes"], r["output_bytes"])
        row = out.setdefault((r["op"], r["phase"], purpose), {"calls": 0, "bytes": set(), "group": set()})
        row["calls"] += 1
        row["bytes"].add(size)
        row["group"].add(r["group"])
    return out


def predicted_ep_rows(world, case, model=None, **recompute):
    layout = ep_layout(world, case).model_copy(update=recompute)
    rows = [(c.op, c.phase, c.purpose, c.calls, c.buffer_bytes, c.group)
            for c in evaluate_layout(model or DIST_SPEC, RECIPES["cs336"], layout).collectives if c.axis == "ep"]
    return {(op, phase, purpose): {"calls": calls, "bytes": {size}, "group": {group}}
            for op, phase, purpose, calls, size, group in rows}


def busiest(world, case):
    """The ranks the prediction (the busiest device) is compared with: all when balanced, else rank 0."""
    return range(world) if case == "balanced" else [0]


EP_CASES = [pytest.param(c, id=c) for c in IMBALANCE]


@pytest.mark.slow
@pytest.mark.parametrize("case", EP_CASES)
def test_ep_collectives_match_torch(ep_measured, case):
    world, ranks = ep_measured
    for rank in busiest(world, case):
        assert measured_ep_rows(ranks[rank][case]["records"]) == predicted_ep_rows(world, case), f"rank {rank}"


@pytest.mark.slow
@pytest.mark.parametrize("checkpoint", ["reentrant", "non-reentrant"])
@pytest.mark.parametrize("case", EP_CASES)
def test_recomputed_ep_collectives_match_torch(ep_measured, case, checkpoint):
    """Each MoE block under torch.utils.checkpoint: its forward's all-gather and three all-to-alls run again in
    backward, in both modes: a non-reentrant rerun reaches past the combine, to the shared experts run after it
    and, without them, to the scatter back to token order, which saves its index (made after the combine)."""
    world, ranks = ep_measured
    alone = DIST_SPEC.model_copy(update={"moe": DIST_SPEC.moe.model_copy(update={"shared_ffn_hidden": 0,
                                                                                "shared_gate": False})})
    for rank in busiest(world, case):
        assert measured_ep_rows(ranks[rank][case][f"records-{checkpoint}"]) == predicted_ep_rows(
            world, case, recompute="full", checkpoint=checkpoint), f"rank {rank}"
        # without shared experts too: the scatter after the combine saves its index, made there
        assert measured_ep_rows(ranks[rank][case][f"records-no-shared-{checkpoint}"]) == predicted_ep_rows(
            world, case, alone, recompute="full", checkpoint=checkpoint), f"rank {rank}, no shared experts"


@pytest.mark.slow
@pytest.mark.parametrize("case", EP_CASES)
def test_ep_routing_ground_truth(ep_measured, case):
    """torch alone: the EP layer computes the whole MoE MLP (bf16, tolerance: matmuls over different row
    counts); rank 0 receives IMBALANCE x the even share T k, and no rank more; per layer and micro-batch
    3 all-to-alls and 1 all-gather in forward, 3 all-to-alls in backward."""
    world, ranks = ep_measured
    assert all(r[case]["max_abs_error"] <= 2e-2 for r in ranks)
    received = [r[case]["received_copies"] for r in ranks]
    assert sum(received) == world * T * K and max(received) == received[0] == IMBALANCE[case] * T * K
    calls = [(r["op"], r["phase"]) for r in ranks[0][case]["records"]]
    assert calls.count(("all-gather", "forward")) == MOE_LAYERS and calls.count(("all-to-all", "forward")) == \
        3 * MOE_LAYERS and calls.count(("all-to-all", "backward")) == 3 * MOE_LAYERS and len(calls) == 7 * MOE_LAYERS


def ep_saved_prediction(case):
    """What one EP MoE MLP saves on the busiest rank: T x its MLP bytes with routed_factor = f."""
    return T * mlp_bytes_per_token(DIST_SPEC, routed_factor=IMBALANCE[case])


@pytest.mark.slow
@pytest.mark.parametrize("case", EP_CASES)
def test_ep_saved_bytes_match_formula(ep_measured, case):
    """Bytes one EP MoE MLP saves (router, shared experts, and the routed copies it receives) == the formula."""
    world, ranks = ep_measured
    for rank in busiest(world, case):
        assert ranks[rank][case]["saved_bytes"] == ep_saved_prediction(case), f"rank {rank}"
