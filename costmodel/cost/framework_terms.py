"""What a framework adds to the exact accounting on one device of a stage: each term a formula of
:mod:`costmodel.formulas.overheads` with the code it is read from (the profile, specs/framework.py, says which
terms it has); cost/memory.py places them in the step's phases."""

from __future__ import annotations

from costmodel.formulas import overheads as ov
from costmodel.mathops import above_one, equals, exact_div, maximum, minimum, where
from costmodel.parallel import context, data, pipeline, tensor
from costmodel.parallel.tensor.params import block_params_per_device, vocab_rows_per_device
from costmodel.units import dtype_bytes
from costmodel.cost.runs import check_runs
from costmodel.cost.stage import Stage
from costmodel.cost.zero import zero_buffers


def _output_rows(shape, point, st: Stage):
    """Rows of the output layer's weight matrix on this device (0 off the last stage and for the FFN stack)."""
    return st.role.last * vocab_rows_per_device(shape, point.tp, point.tp_ends) if shape.attention else 0


def ring_attention_bytes(shape, point, tokens, act_bytes):
    """torch's ring attention's buffers in one layer's backward (formulas/overheads.ring_attention_backward_bytes) on
    a device of ``tokens`` local tokens: its queries and its keys and values repeated to the query heads, in the
    activations' ``act_bytes``."""
    heads = exact_div(shape.heads, point.tp)
    gathered = point.cp_kind == "allgather"
    return ov.ring_attention_backward_bytes(query=tokens * heads * shape.head_dim,
                                            kv=tokens * heads * (shape.head_dim + shape.value_dim),
                                            lse=tokens * heads, act_bytes=act_bytes,
                                            rotated=point.cp + 1 if gathered else minimum(point.cp, 3),
                                            gathered=point.cp if gathered else 0)


def overheads(framework, recipe, point, shape, st: Stage, acts) -> dict:
    """The framework's terms beyond the exact accounting on one device of stage ``st`` (none for ``exact``)."""
    if framework is None or framework.exact:
        return {}
    check_runs(framework, point, experts=shape.moe, layers=shape.layers)
    out = {}
    tokens = exact_div(point.tokens, point.cp)
    sh = point.sharding  # the data axis's shards (with the framework's CP ranks folded in)
    matmul_bytes = recipe.weight_bytes or recipe.compute_bytes
    if framework.ddp_buckets:
        buckets = ov.ddp_bucket_bytes(params=st.params, grad_comm_bytes=recipe.grad_comm_bytes)
        out["ddp_buckets"] = where(above_one(sh.data), where(equals(sh.fsdp, 1), buckets, 0), 0)
    if framework.sp_gather_buffer and point.sp:
        out["sp_gather_buffer"] = where(above_one(point.tp), ov.sp_gather_buffer_bytes(
            tokens=tokens, hidden=shape.width, act_bytes=recipe.activation_bytes), 0)
    if framework.pending_reduce_scatters and point.sp:
        _, outputs = tensor.column_row_pairs(shape, st.layers, st.dense_layers)
        held = ov.pending_reduce_scatter_bytes(tokens=tokens, hidden=shape.width, act_bytes=recipe.activation_bytes,
                                               outputs=outputs)
        out["pending_reduce_scatters"] = where(above_one(point.tp), where(equals(point.pp, 1), held, 0), 0)
    if framework.loss_upcast != "none" and shape.attention:
        out["loss_upcast"] = st.role.last * tokens * ov.upcast_loss_bytes_per_token(
            vocab=shape.vocab, tp=point.tp, logit_bytes=recipe.activation_bytes,
            in_place=framework.loss_upcast == "in-place")
    rerun = tokens * st.rerun_bytes_per_token + st.rerun_copy_bytes if point.recompute != "none" else 0
    if point.recompute != "none":  # a recomputed layer's tensors in its backward, one layer at a time, after the
        # loss's transients are gone: it raises the peak by what it exceeds them
        out["recomputed_layer"] = maximum(rerun - out.get("loss_upcast", 0), 0)
    if point.cp_kind in context.TORCH_KINDS and shape.attention:  # torch's ring attention in that layer's backward
        ring = ring_attention_bytes(shape, point, tokens, recipe.activation_bytes)
        out["ring_attention"] = where(above_one(point.cp), maximum(rerun + ring - out.get("loss_upcast", 0), 0)
                                      - out.get("recomputed_layer", 0), 0)
    if framework.wgrad_cache and shape.attention:
        layer = block_params_per_device(shape, point.tp) - shape.block_replicated_params()  # its matmuls
        out["wgrad_cache"] = ov.wgrad_cache_bytes(layer_matmul_params=layer,
                                                  output_params=_output_rows(shape, point, st) * shape.width,
                                                  weight_bytes=recipe.compute_bytes)
    if framework.zero1_gather and point.zero in (1, 2):
        out["zero1_gather"] = where(above_one(sh.fsdp), ov.zero1_gather_bytes(
            params=st.params, shards=sh.fsdp, weight_bytes=matmul_bytes), 0)
    if framework.zero_buffers:
        out.update(zero_buffers(framework, recipe, sh, shape, st, output=_output_rows(shape, point, st) * shape.width))
    if framework.optimizer_step == "foreach":
        shards = data.shards("optimizer", recipe, point.zero, sh.fsdp)
        out["optimizer_temporaries"] = ov.foreach_optimizer_bytes(
            params=st.params / shards, state_bytes=dtype_bytes(recipe.optimizer_dtype))
    if framework.fsdp_buffers:
        reduce_bytes = framework.reduce_bytes(recipe)
        flight = ov.fsdp_in_flight_bytes(
            block_params=block_params_per_device(shape, point.tp),
            output_params=_output_rows(shape, point, st) * shape.width,  # the output layer, kept gathered
            gather_bytes=recipe.compute_bytes, reduce_bytes=reduce_bytes)
        # inside pipeline stages every unit stays gathered and its gradients accumulate unsharded: the exact
        # accounting's weight copies and unsharded gradients; the reduce-scatters run after backward's activations
        out["fsdp_in_flight"] = where(data.fsdp_active(point.zero, sh.fsdp), where(above_one(point.pp), 0, flight), 0)
    if framework.p2p_buffers:
        out["p2p_buffers"] = where(above_one(point.pp), ov.p2p_buffer_bytes(
            activation_bytes_per_microbatch=pipeline.p2p_bytes(shape, recipe, point)), 0)
    if framework.activation_factor != 1:
        out["activation_reserve"] = ov.activation_reserve_bytes(activation_bytes=acts,
                                                                factor=framework.activation_factor)
    if framework.reserve_bytes:
        out["reserve"] = framework.reserve_bytes
    return out
