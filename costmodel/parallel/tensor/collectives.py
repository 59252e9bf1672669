"""Collectives of the tensor-parallel axis per micro-batch (Megatron column/row split), and its ends.

Source: Shoeybi et al. 2019, arXiv:1909.08053, Sec. 3 (the f and g operators: one all-reduce in
forward and one in backward per column/row pair); Korthikanti et al. 2022, arXiv:2205.05198,
Sec. 4.2.2 (with sequence parallelism each all-reduce becomes reduce-scatter + all-gather).
"""

from __future__ import annotations

from costmodel.mathops import exact_div, floor_div, maximum
from costmodel.parallel.collective import Collective, present, rerun, times_each


def collectives(shape, recipe, point, *, layers, first, last, dense_layers=None, recomputed=0,
                recomputed_dense=None) -> list[Collective]:
    """TP collectives of one stage per optimizer step (``first``/``last``: 0/1 masks of the stage's role).

    Block collectives repeat for every micro-batch (grad_accum x m); the norms' gradient
    all-reduce happens once, before the optimizer step. Of an MoE model's ``layers``, ``dense_layers``
    have a dense MLP; the MoE layers' shared experts are a column/row pair of their own, their routed
    experts the expert axis's (:func:`costmodel.parallel.expert.collectives`). Of the layers,
    ``recomputed`` (``recomputed_dense`` of them dense) rerun their forward in backward, collectives
    included (:func:`recompute_collectives`).
    """
    if not present(point.tp):
        return []
    tokens = exact_div(point.tokens, point.cp)  # one device's share of a micro-batch (before SP)
    act, sp = recipe.activation_bytes, point.sp
    pairs, outputs = column_row_pairs(shape, layers, dense_layers)
    out = block_collectives(tokens=tokens, width=shape.width, inputs=pairs, outputs=outputs, tp=point.tp,
                            act_bytes=act, sp=sp, first_input_grad=shape.attention or shape.input_requires_grad)
    if not (isinstance(recomputed, int) and recomputed == 0):
        rerun_pairs, rerun_outputs = column_row_pairs(shape, recomputed, recomputed_dense)
        out += recompute_collectives(tokens=tokens, width=shape.width, inputs=rerun_pairs, outputs=rerun_outputs,
                                     regions=regions_ending_in_tp(shape, recomputed, recomputed_dense), tp=point.tp,
                                     act_bytes=act, sp=sp, stops_early=point.checkpoint == "non-reentrant",
                                     keeps_scatters=point.recompute == "op")
    if shape.attention:
        out += end_collectives(tokens=tokens, width=shape.width, tp=point.tp, act_bytes=act, sp=sp,
                               ends=point.tp_ends, first=first, last=last)
    out = times_each(out, point.micro_steps)
    if shape.attention and sp:
        out += [norm_gradient_allreduce(norms=shape.norms_per_layer * layers + last, width=shape.width, tp=point.tp,
                                        grad_bytes=recipe.grad_comm_bytes)]
    if shape.attention and point.tp_kv == "replicate":
        copies = maximum(floor_div(point.tp, shape.kv_heads), 1)  # ranks holding one KV head (1: no copies)
        if not (isinstance(copies, int) and copies == 1):
            out += [replicated_kv_gradient_allreduce(shape, layers=layers, copies=copies,
                                                     grad_bytes=recipe.grad_comm_bytes)]
    return out


def column_row_pairs(shape, layers, dense_layers=None):
    """(column/row pairs, row-parallel outputs reduced) of ``layers`` layers, ``dense_layers`` of them
    with a dense MLP (None: all): attention and MLP in a sequential layer; an MoE layer's attention and
    shared experts; a parallel block reduces its summed outputs once."""
    pairs = 2 * layers if shape.attention else layers  # attention and MLP
    if dense_layers is not None:  # attention, the dense MLPs, the shared experts
        pairs = layers + dense_layers + ((layers - dense_layers) if shape.shared_width else 0)
    return pairs, pairs if shape.block == "sequential" else shape.tp_outputs_per_layer * layers  # parallel: dense only


def regions_ending_in_tp(shape, recomputed, recomputed_dense=None):
    """Of ``recomputed`` layers (``recomputed_dense`` of them dense), those whose last row-parallel reduction
    only feeds the residual add, which saves nothing, so a non-reentrant rerun stops before it: every dense
    layer; an MoE layer only with ungated shared experts run after the combine (Megatron-core's MoELayer adds
    them last). Without shared experts its last reduction (attention's) feeds the experts, and a gate
    (sigmoid(x W) s) saves the shared experts' reduced output."""
    if recomputed_dense is None or (shape.shared_width and not shape.shared_gate):
        return recomputed
    return recomputed_dense


def recompute_collectives(*, tokens, width, inputs, outputs, regions, tp, act_bytes, sp: bool,
                          stops_early: bool, keeps_scatters: bool = False) -> list[Collective]:
    """The forward collectives that recomputation runs again in backward, per micro-batch: each
    recomputed layer reruns its forward, and with it the row-parallel outputs' reductions (all-reduce;
    SP: reduce-scatter) and, with SP, the column-parallel inputs' all-gathers (Megatron's
    ``tensor_parallel.checkpoint`` reruns the layer whole: Korthikanti et al. 2022, arXiv:2205.05198,
    Sec. 5, full recomputation repeats the forward's communication). Each checkpointed ``region`` that
    ``stops_early`` (torch.utils.checkpoint with use_reentrant=False) stops once backward's saved tensors
    exist again, before its last row-parallel output is reduced if it ends in one (``regions`` of them:
    :func:`regions_ending_in_tp`; tests/test_torch_distributed.py). torchtitan's op policy ``keeps_scatters``:
    reduce_scatter_tensor is on its save list, so under SP only the all-gathers rerun (formulas/op_checkpoint.py).
    """
    reduced = outputs - regions if stops_early else outputs
    if keeps_scatters and sp:
        reduced = 0
    return rerun(block_collectives(tokens=tokens, width=width, inputs=inputs, outputs=reduced, tp=tp,
                                   act_bytes=act_bytes, sp=sp))


def replicated_kv_gradient_allreduce(shape, *, layers, copies, grad_bytes) -> Collective:
    """With KV heads replicated over t / k ranks, each copy's weight gradient is summed over the
    ranks that hold it, once per step: S = b_g 2 d_h (D + bias) per layer (one head's K and V). Those ranks
    are adjacent in the TP group (Megatron gives rank r head r k / t): the group "tp-kv" of ``copies``."""
    per_head = 2 * shape.head_dim * (shape.width + (1 if shape.bias or shape.qkv_bias else 0))
    return Collective("all-reduce", "tp-kv", "replicated K, V weight gradients", "optimizer", copies, layers,
                      grad_bytes * per_head)


def block_collectives(*, tokens, width, inputs, outputs, tp, act_bytes, sp: bool,
                      first_input_grad: bool = True) -> list[Collective]:
    """TP collectives of one micro-batch on ``tokens`` tokens of ``width`` (= D) activations.

    Each column-parallel input (the f operator: ``inputs`` of them) all-reduces its gradient in
    backward; each row-parallel output (g: ``outputs``) all-reduces in forward. A column/row pair (the
    FFN block; attention and MLP in a sequential layer) has one of each; a parallel block sums
    attention's and the MLP's partial outputs and reduces them once (GPT-NeoX gpt_j_residual,
    megatron/model/transformer.py: ``output = residual + self.reduce(output)``) while each of its two
    column-parallel linears keeps its own f. With sequence parallelism the f's are an all-gather in
    forward and a reduce-scatter in backward, the g's a reduce-scatter in forward and an all-gather in
    backward. S = b_act T D each. When the first input needs no gradient (an FFN stack fed with data),
    autograd computes none and that backward collective does not happen (tests/test_torch_distributed.py).
    """
    grad_calls = inputs if first_input_grad else inputs - 1
    size = act_bytes * tokens * width
    if not sp:
        return [
            Collective("all-reduce", "tp", "block outputs", "forward", tp, outputs, size),
            Collective("all-reduce", "tp", "input gradients", "backward", tp, grad_calls, size),
        ]
    return [
        Collective("all-gather", "tp", "sequence-sharded inputs", "forward", tp, inputs, size),
        Collective("reduce-scatter", "tp", "block outputs", "forward", tp, outputs, size),
        Collective("all-gather", "tp", "output gradients", "backward", tp, outputs, size),
        Collective("reduce-scatter", "tp", "input gradients", "backward", tp, grad_calls, size),
    ]


def end_collectives(*, tokens, width, tp, act_bytes, sp: bool, ends: str, first, last) -> list[Collective]:
    """TP traffic of one micro-batch outside the blocks: the embedding (first stage), the output
    layer and loss (last stage); ``first`` and ``last`` are 0/1 and multiply the calls.

    Vocabulary-parallel ends (Shoeybi et al. 2019, Sec. 3, 'input embedding ... parallelized along
    the vocabulary dimension'; with SP, Korthikanti et al. 2022, Sec. 4.2.2): the embedding's partial
    sums are all-reduced (SP: reduce-scattered to sequence shards) and the output layer's input
    gradient all-reduced (SP: its input all-gathered, its gradient reduce-scattered); the parallel
    cross-entropy all-reduces three fp32 values per token (max, sum of exponentials, target logit).
    Replicated ends move nothing without SP; with SP the output layer's input is all-gathered and the
    embedding's output gradient all-gathered.
    """
    size = act_bytes * tokens * width
    if ends == "vocab-parallel":
        out = [Collective("reduce-scatter" if sp else "all-reduce", "tp", "embedding output (vocabulary-parallel)",
                          "forward", tp, first, size)]
        if sp:
            out += [Collective("all-gather", "tp", "embedding output gradient", "backward", tp, first, size),
                    Collective("all-gather", "tp", "output-layer input", "forward", tp, last, size)]
        return out + [
            Collective("reduce-scatter" if sp else "all-reduce", "tp", "output-layer input gradient", "backward", tp,
                       last, size),
            Collective("all-reduce", "tp", "parallel cross-entropy (max, sum, target)", "forward", tp, 3 * last,
                       4 * tokens)]
    if not sp:
        return []
    return [Collective("all-gather", "tp", "output-layer input", "forward", tp, last, size),
            Collective("all-gather", "tp", "embedding output gradient", "backward", tp, first, size)]


def norm_gradient_allreduce(*, norms, width, tp, grad_bytes) -> Collective:
    """Under SP the norms' weight gradients are partial sums over the TP ranks: one all-reduce each
    before the optimizer step (Megatron's layernorm-grad all-reduce; torch's DTensor leaves them
    Partial and AdamW reduces them on every read)."""
    return Collective("all-reduce", "tp", "norm weight gradients (partial under SP)", "optimizer", tp, norms,
                      grad_bytes * width)
