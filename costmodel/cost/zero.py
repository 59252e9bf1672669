"""What a ZeRO framework (DeepSpeed) adds on one device.

Each term is a formula of :mod:`costmodel.formulas.overheads` with the DeepSpeed code it is read from; which
parameters a ZeRO-2 rank's gradient buffer holds is :mod:`costmodel.parallel.data.partition`'s.
"""

from __future__ import annotations

from costmodel.cost.stage import Stage
from costmodel.formulas import overheads as ov
from costmodel.mathops import above_one, exact_div, maximum, minimum, where
from costmodel.parallel import expert
from costmodel.parallel.data.partition import partition_overhang


def overlap_comm(framework, point):
    """Whether DeepSpeed hides the gradient reduction behind backward: its overlap_comm, by default on at ZeRO-3
    only (runtime/zero/config.py L351-353), and off under its pipeline engine (runtime/engine.py L1639-1642).
    Without it the reduction runs on the compute stream (stage_1_and_2.py L1051-1058): backward waits for it.
    ZeRO-0 replicas all-reduce after backward (engine.allreduce_gradients). A bool, or a mask over a plan's
    layouts."""
    chosen = framework.overlap_comm if framework.overlap_comm is not None else point.zero >= 3
    return where(above_one(point.pp), False, where(point.zero >= 1, chosen, False))


def zero_buffers(framework, recipe, point, shape, st: Stage, *, output) -> dict:
    """DeepSpeed ZeRO's buffers on one device: the gradient bucket, the output layer's whole gradient as
    backward makes it (ZeRO-2/3 shard gradients; the output layer's is made first, at the activation peak),
    the contiguous buffer of the rank's gradient partition (whole parameters past P / N), the step's fp32
    gradient partition (a sub-group at ZeRO-3), and ZeRO-3's gathered parameters; ``output``: the output
    layer's parameters on this device (0 off the last stage).

    When they are alive follows when DeepSpeed reduces: ZeRO-2 (and ZeRO-1 with overlap_comm) in backward hooks
    (stage_1_and_2.py L527-528), ZeRO-1 otherwise after backward, at the accumulation boundary, with the full
    gradients held (engine.py L2048-2062, stage_1_and_2.py L706-726; its pipeline engine likewise)."""
    if point.zero == 0:  # DDP-style replicas: no ZeRO optimizer
        return {}
    sharded = above_one(point.fsdp)  # ZeRO runs over the data shards (--fsdp); replicas alone (--dp) run none
    bucket = ov.ipg_bucket_bytes(bucket_elements=framework.reduce_bucket_size, grad_bytes=recipe.grad_bytes)
    matmul = exact_div(shape.width * shape.mlp_width, point.tp)  # one MLP matmul: a block's largest parameter
    largest = maximum(output, matmul)
    partition = (st.params - st.expert_params) / point.fsdp + st.expert_params / expert.expert_shards(point)
    out = {}
    if point.zero < 3:
        overhang = partition_overhang(shape, point)
        buffer = ov.zero_partition_buffer_bytes(partition_elements=partition, overhang_elements=overhang,
                                                grad_bytes=recipe.grad_bytes)
        doubled = overlap_comm(framework, point)  # overlap_comm keeps two buckets
        hooks = True if point.zero == 2 else doubled  # reduce inside backward
        # allocated at every backward (stage_1_and_2.py L2038-2061) and kept until the reduction's epilogue
        out["zero_grad_bucket"] = where(sharded, bucket * where(doubled, 2, 1), 0)
    if point.zero == 1:
        out["zero1_grad_buffer"] = where(sharded, where(hooks, buffer, 0), 0)
        out["zero1_sync_buffer"] = where(sharded, where(hooks, 0, buffer), 0)
        out["zero1_freed_grads"] = where(sharded, ov.zero1_freed_grad_bytes(
            buffer_bytes=buffer, params=st.params, grad_bytes=recipe.grad_bytes), 0)
    if point.zero >= 3:
        out["zero3_grad_bucket"] = where(sharded, bucket, 0)
        out["zero3_bucket_copy"] = where(sharded, bucket, 0)
    if point.zero >= 2:
        out["zero_output_grad"] = where(sharded, recipe.grad_bytes * output, 0)
    if point.zero == 2:
        out["zero2_partition_overhang"] = where(sharded, ov.zero2_overhang_bytes(
            overhang_elements=overhang, grad_bytes=recipe.grad_bytes), 0)
        out["zero2_accumulation_buffer"] = where(sharded, where(above_one(point.micro_steps), buffer, 0), 0)
    out["zero_step_grads"] = where(sharded, ov.zero_step_grad_bytes(
        elements=partition if point.zero < 3 else minimum(partition, framework.sub_group_size + largest),
        largest_param=largest, grad_bytes=recipe.grad_bytes), 0)
    if point.zero >= 3:
        out["zero3_live_params"] = where(sharded, ov.zero3_live_param_bytes(
            kept=largest, largest_param=matmul, prefetch_elements=framework.prefetch_bucket_size,
            max_live_elements=framework.max_live_parameters, weight_bytes=recipe.compute_bytes), 0)
    return out
