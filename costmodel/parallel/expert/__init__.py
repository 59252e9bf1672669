"""The expert axis: each MoE layer's E experts spread over e devices of the data axis (expert
parallelism), tokens sent to their experts and back by two all-to-alls.

Layout (Megatron-core's MoE 'parallel folding', Liu et al. 2025, arXiv:2504.14960): the attention and
the dense parts keep the layout's tp x cp x data mesh; the experts see the same devices as expert TP
t_e (``--etp``, default t) x e x expert data. With t_e < t the other t / t_e TP ranks fold into the
experts' data axis (Megatron-core's default order etp-ep-edp). The EP group is the innermost e ranks
after expert TP, so it takes those folded ranks and then the fsdp shards: experts are sharded
(t / t_e) N / e ways (N the fsdp degree) and replicated over the rest. CP stays out of the expert
mesh here (Megatron folds it in too): expert TP below t with CP is refused.

Sharding: :func:`routed_params_per_layer` (experts one device holds), :func:`expert_shards`;
traffic: :func:`collectives`; rules: :func:`checks`.
"""

from __future__ import annotations

from dataclasses import replace

from costmodel.mathops import above_one, divides, exact_div, minimum, where
from costmodel.parallel import data
from costmodel.parallel.collective import Collective, Rule, present, rerun, times_each

NAME = "ep"
#: the experts' view of the data axis, innermost first after etp x cp x ep (names the network places)
EXPERT_AXES = {"data": "expert-data", "fsdp": "expert-fsdp", "dp": "expert-dp"}


def checks(shape, point) -> list[Rule]:
    """e must divide the experts and the data axis with the TP ranks --etp folds in (and nest with its
    shards); t_e must divide F_e; the busiest rank gets at most min(e, E/k) times its even share (all its
    E/e experts, or k per token, for every token); a dense model has no experts to spread; MoE under TP needs sequence
    parallelism (Megatron-core asserts it)."""
    if not shape.moe:
        return [Rule(point.ep == 1, lambda: f"--ep {point.ep}: {shape.name} has no experts (not a mixture of experts)"),
                Rule(point.moe_imbalance == 1, lambda: f"--moe-imbalance {point.moe_imbalance:g}: {shape.name} routes "
                     "no tokens to experts (not a mixture of experts)")]
    folded = folded_tp(point)
    rules = [Rule(divides(point.ep, shape.experts),
                  lambda: f"--ep {point.ep} does not divide the {shape.experts:,} experts of {shape.name}"),
             Rule(divides(point.ep, folded * point.data),
                  lambda: f"--ep {point.ep} does not divide the data axis --dp x --fsdp = {point.data:,}"
                  + (f" x the {folded} TP ranks --etp folds in" if folded != 1 else "")
                  + " (expert parallelism spreads experts over data-parallel ranks)"),
             Rule(divides(point.ep, folded * point.fsdp) | divides(folded * point.fsdp, point.ep),
                  lambda: f"--ep {point.ep} and --fsdp {point.fsdp}: one must divide the other (the EP group "
                  "takes the fsdp shards first)")]
    rules += [Rule(divides(expert_tp(point), shape.expert_width),
                   lambda: f"--{'tp' if point.etp is None else 'etp'} {expert_tp(point)} does not divide the expert "
                   f"MLP width F_e = {shape.expert_width:,}"),
              Rule(point.moe_imbalance <= minimum(point.ep, shape.experts / shape.top_k),
                   lambda: f"--moe-imbalance {point.moe_imbalance:g} exceeds what routing can give: a rank holds "
                   f"E/e = {shape.experts // point.ep} of the {shape.experts} experts and each token picks k = "
                   f"{shape.top_k}, so the busiest gets at most min(e, E/k) = "
                   f"{min(point.ep, shape.experts / shape.top_k):g} x its even share"),
              Rule((folded == 1) | (point.cp == 1),
                   lambda: f"--etp {expert_tp(point)} below --tp {point.tp} with --cp {point.cp} is not modelled "
                   "(the expert mesh here leaves CP out)")]
    if not point.sp:
        rules += [Rule(point.tp == 1, lambda: f"--tp {point.tp} with MoE layers needs --sp (the experts see "
                       "sequence-sharded tokens, as Megatron-core requires)")]
    return rules


def expert_tp(point):
    """t_e: the TP ranks one routed expert is split over (all of tp unless --etp says fewer)."""
    return point.tp if point.etp is None else point.etp


def folded_tp(point):
    """TP ranks that join the experts' data axis: t / t_e (1 unless --etp is below --tp)."""
    return 1 if point.etp is None else exact_div(point.tp, point.etp)


def routed_params_per_layer(shape, point):
    """Routed-expert parameters of one MoE layer on one device: E / e experts, each split t_e ways."""
    return exact_div(shape.experts, point.ep) * exact_div(shape.expert_params(), expert_tp(point))


def expert_shards(point):
    """N_e: ways expert state is sharded on the data axis, S / e when e divides S = (t / t_e) N, else 1."""
    span = folded_tp(point) * point.fsdp
    if isinstance(span, int) and span == 1:
        return 1
    return exact_div(span, minimum(point.ep, span))


def expert_point(point):
    """The point as the routed experts see the data axis: N_e shards, (t / t_e) dp N / (e N_e) replicas."""
    shards = expert_shards(point)
    return replace(point, fsdp=shards, dp=exact_div(folded_tp(point) * point.data, point.ep * shards))


def routed_factor(shape, point):
    """Routed tokens on the busiest device, as a multiple of the even share T k_e / e: the capacity
    factor when experts are padded to a capacity, else (dropless) the layout's load imbalance, which
    only EP exposes (one device with every expert receives every copy, T k_e)."""
    if shape.capacity_factor is not None:
        return shape.capacity_factor
    return where(above_one(point.ep), point.moe_imbalance, 1)


def dispatched_tokens(shape, point):
    """Token copies one device sends to experts per micro-batch (and, balanced, receives): T / c (/ t under
    SP) x k_e x the routed factor."""
    local = exact_div(point.tokens, point.cp * (point.tp if point.sp else 1))
    return local * shape.top_k * routed_factor(shape, point)


def collectives(shape, recipe, point, *, moe_layers, recomputed=0) -> list[Collective]:
    """EP traffic of a stage with ``moe_layers`` MoE layers per step, of which ``recomputed`` (full
    recomputation) rerun their forward's in backward: every forward row again, in either checkpoint mode (a
    non-reentrant rerun still reaches past the combine: the scatter back to token order saves its index,
    made there; tests/test_torch_moe.py, with and without shared experts). Expert TP's gather and
    reduce-scatter, around the experts, rerun with them (not measured in torch)."""
    if not shape.moe:
        return []
    out = _layer_rows(shape, recipe, point, moe_layers)
    if not (isinstance(recomputed, int) and recomputed == 0):
        out += rerun(_layer_rows(shape, recipe, point, recomputed))
    return times_each(out, point.micro_steps)


def _layer_rows(shape, recipe, point, moe_layers) -> list[Collective]:
    """EP traffic of ``moe_layers`` MoE layers for one micro-batch.

    Per MoE layer and micro-batch: an all-to-all sends each token copy to its expert (dispatch) and
    one brings the outputs back (combine); backward mirrors both with the gradients. S = b_a x token
    copies x D (nccl-tests' all-to-all size: everything a rank sends and keeps). Before them each rank
    all-gathers its E token counts (int64) and sends each copy's routing weight (b_a) with an
    all-to-all of its own, whose gradient comes back in backward (the router trains through it).
    With expert TP t_e > 1 (with SP) the received copies are all-gathered over the expert TP group
    before the experts and reduce-scattered after, S = b_a T/c k_e f D t_e / t, mirrored in backward.
    Source: Lepikhin et al. 2020, arXiv:2006.16668 (GShard: dispatch and combine all-to-alls);
    Megatron-core megatron/core/transformer/moe/token_dispatcher.py (MoEAlltoAllTokenDispatcher).
    """
    act = recipe.activation_bytes
    copies = dispatched_tokens(shape, point)
    size = act * copies * shape.width
    out = []
    if present(point.ep):
        out += [Collective("all-gather", "ep", "tokens per expert (int64 counts, before dispatch)", "forward",
                           point.ep, moe_layers, 8 * shape.experts * point.ep),
                Collective("all-to-all", "ep", "dispatch: routing weights", "forward", point.ep, moe_layers,
                           act * copies),
                Collective("all-to-all", "ep", "routing-weight gradients back", "backward", point.ep, moe_layers,
                           act * copies)]
        for phase, what in (("forward", "tokens"), ("backward", "gradients")):
            out += [Collective("all-to-all", "ep", f"dispatch: {what} to their experts", phase, point.ep, moe_layers,
                               size),
                    Collective("all-to-all", "ep", f"combine: expert {what} back", phase, point.ep, moe_layers, size)]
    etp = expert_tp(point)
    if present(etp):
        gathered = size * etp
        out += [Collective("all-gather", "etp", "routed tokens to the expert TP group", "forward", etp,
                           moe_layers, gathered),
                Collective("reduce-scatter", "etp", "expert outputs", "forward", etp, moe_layers, gathered),
                Collective("all-gather", "etp", "expert output gradients", "backward", etp, moe_layers, gathered),
                Collective("reduce-scatter", "etp", "routed token gradients", "backward", etp, moe_layers,
                           gathered)]
    return out


def data_collectives(*, params, layers, recipe, point) -> list[Collective]:
    """The routed experts' gradient reduction (and FSDP gathers) over their own data group: the data
    axis's collectives with the expert shards and replicas, on the expert axes' names (the shared
    experts and the router are dense parameters: the data axis's own rows)."""
    rows = data.collectives(params=params, root_params=0, layers=layers, recipe=recipe, point=expert_point(point))
    return [replace(c, axis=EXPERT_AXES.get(c.axis, c.axis), purpose=f"routed experts: {c.purpose}") for c in rows]


__all__ = ["EXPERT_AXES", "NAME", "checks", "collectives", "data_collectives", "dispatched_tokens", "expert_point",
           "expert_shards", "expert_tp", "folded_tp", "routed_factor", "routed_params_per_layer"]
