"""What a training framework allocates beyond the exact accounting, one term per function.

The exact accounting (:mod:`costmodel.formulas.memory`) counts persistent state and the tensors
autograd saves for backward. A framework adds buffers and transients on top; each is written here
with the code it is read from. P: parameters on the device (after TP/PP), T: tokens of one
micro-batch on it, b: bytes per element.
"""

from __future__ import annotations

from costmodel.mathops import maximum, minimum, where


def ddp_bucket_bytes(*, params, grad_comm_bytes):
    """DDP's gradient buckets: a flat copy of every gradient in the reduction dtype, b_g P.

    torch DDP's Reducer allocates one contiguous buffer per bucket covering every parameter that
    needs a gradient (torch/csrc/distributed/c10d/reducer.cpp, initialize_buckets; unless
    gradient_as_bucket_view). nanotron wraps the model in DDP only at ZeRO-0 with dp > 1
    (huggingface/nanotron@67c5ebb6 src/nanotron/trainer.py L797-799, L856-865).
    """
    return grad_comm_bytes * params


def zero1_gather_bytes(*, params, shards, weight_bytes):
    """ZeRO-1's parameter all-gather after the step: flat input b_w P / N and flat output b_w P.

    nanotron's all_gather_coalesced flattens this rank's updated shard into a new input buffer and
    gathers into a new flat output before copying back (huggingface/nanotron@67c5ebb6
    src/nanotron/distributed.py L153-220; called from src/nanotron/optim/zero.py L217-251).
    """
    return weight_bytes * params * (1 + 1 / shards)


def upcast_loss_bytes_per_token(*, vocab, tp, logit_bytes, in_place=False):
    """Logits cast to fp32 for the loss, alive while the cross-entropy runs, beyond the fp32 softmax it
    saves (which the exact accounting counts): (b_l + 4) V / t per token, or b_l V / t in place.

    The output layer writes b_l-byte logits, still referenced while the loss runs, and casts them to
    an fp32 copy. nanotron's vocabulary-parallel cross-entropy subtracts the max into a new fp32
    tensor (then exp and the division are in place): the copy is a transient too
    (huggingface/nanotron@67c5ebb6 src/nanotron/models/llama.py L874-880, L909; parallel/
    tensor_parallel/functional.py L31-115). Megatron's subtracts in place, so the copy becomes the
    saved softmax and only the low-precision logits are extra (NVIDIA/Megatron-LM@d98e8a64
    megatron/core/tensor_parallel/cross_entropy.py L25, L41-42, L61-62, L77).
    """
    return (logit_bytes if in_place else logit_bytes + 4) * vocab / tp


def ring_attention_backward_bytes(*, query, kv, lse, act_bytes, rotated, gathered=0):
    """What torch's ring attention holds beyond its inputs during one attention call's backward, at its largest over
    the ranks (torch 2.13 distributed/tensor/experimental/_context_parallel/_attention.py
    _templated_ring_attention_backward, as torchtitan runs it: causal, head-tail load balanced, fp32 gradient
    accumulators, q, k, v transposes of its (b, s, h, d) projections). Q, KV, L: elements of the rank's queries, of
    its keys and values as SDPA receives them (torchtitan repeats them to every query head) and of its log-sum-exp;
    ``rotated``: K, V-sized buffers the rotation holds (all-gathered: the c chunks and the local copy sent, c + 1;
    passed on: received, sent and in flight, min(c, 3)). The largest of three moments:

    - a rank past the first sends its dK, dV (L627): the fp32 dQ accumulator, four fp32 K, V-sized buffers of the dK,
      dV ring (received, sent, its copy in flight, the halves the partial update rebuilds), the block's gradients
      (dQ whole, dK, dV halved) and the rotation: 4 Q + 16 KV + b (Q + KV / 2 + r KV);
    - a rank below the last rebuilds dQ from halves (L632, _partial_update): old and new fp32 dQ, three fp32 K,
      V-sized ring buffers, the block's gradients (dQ halved), the rotation, the lse's second half copied (fp32):
      8 Q + 12 KV + b (Q / 2 + KV + r KV) + 2 L, the largest where K, V have fewer heads than Q;
    - all-gathered on c >= 3 ranks (``gathered`` = c, else 0), the second iteration's K, V concatenation (L533):
      the three fp32 accumulators, two fp32 dK, dV buffers in flight, the c gathered chunks, two concatenations and
      the contiguous copies of the transposed K, V the first iteration took (L517-518): 4 Q + 12 KV + b (Q + (c + 4) KV).

    Measured on 2 to 6 ranks (tests/test_torch_distributed_llama.py); the CUDA kernel's own workspace is not in it."""
    sent = 4 * query + 16 * kv + act_bytes * (query + kv / 2 + rotated * kv)
    rebuilt = 8 * query + 12 * kv + act_bytes * (query / 2 + kv + rotated * kv) + 2 * lse
    concatenated = where(gathered > 2, 4 * query + 12 * kv + act_bytes * (query + (gathered + 4) * kv), 0)
    return maximum(maximum(sent, rebuilt), concatenated)


def wgrad_cache_bytes(*, layer_matmul_params, output_params, weight_bytes):
    """Transformer Engine's dummy weight-gradient buffers: one per distinct weight shape, kept.

    With gradient-accumulation fusion (Megatron's default) TE returns a cached empty tensor of each
    weight's shape as the weight gradient: one layer's matmul weights (QKV, projection, FC1, FC2) and
    the output layer, b_w each (NVIDIA/TransformerEngine@d0067d0d transformer_engine/pytorch/module/
    base.py L134-148, linear.py L1356-1374; NVIDIA/Megatron-LM@d98e8a64 core/tensor_parallel/layers.py
    L738-762).
    """
    return weight_bytes * (layer_matmul_params + output_params)


def sp_gather_buffer_bytes(*, tokens, hidden, act_bytes):
    """The persistent buffer sequence parallelism gathers a layer's input into: b_a T D.

    nanotron keeps one MemoryBuffer('allgather') that grows to the largest request (the full
    sequence of a micro-batch at width D) and never shrinks (huggingface/nanotron@67c5ebb6
    src/nanotron/parallel/utils.py L14-28; used by parallel/tensor_parallel/functional.py L153-216).
    """
    return act_bytes * tokens * hidden


def pending_reduce_scatter_bytes(*, tokens, hidden, act_bytes, outputs):
    """Reserved memory the row-parallel linears' reduce-scatter inputs hold while the host runs ahead
    of the GPU: ``outputs`` x b_a T D on the stage (T: a micro-batch's tokens, before SP).

    Under SP each row-parallel linear writes its full-width partial sums (T x D, b_a each) and
    reduce-scatters them (huggingface/nanotron@67c5ebb6 src/nanotron/parallel/tensor_parallel/functional.py
    L466-469 and L600, distributed_differentiable_primitives.py L96-119). The caching allocator reuses a
    block freed by the host only once the stream work recorded on it is done; a host that enqueues the
    forward ahead of the GPU therefore reserves a new one for every layer. nanotron without a pipeline never
    waits for the GPU inside a step (with one, each receive reads its metadata on the host:
    parallel/pipeline_parallel/p2p.py L348-391, ``.tolist()``), so every layer's are reserved at once:
    ``outputs`` = the stage's row-parallel linears (2 per sequential layer). A derived size, not fitted:
    with it, the sweep's residuals of the reserved peak at pp = 1 no longer grow with TP
    (benchmarks/fit_memory_nanotron.py)."""
    return outputs * act_bytes * tokens * hidden


def activation_reserve_bytes(*, activation_bytes, factor):
    """Reserved memory beyond the saved activations: (a - 1) A, a fitted to measured peaks.

    What the caching allocator keeps on top of the tensors saved for backward: a layer's backward
    working set, copies the exact accounting does not see (layout changes inside kernels) and
    blocks it cannot reuse (fragmentation). ``factor`` a is fitted per framework to
    torch.cuda.max_memory_reserved of real runs (see the framework spec's ``fitted_on``).
    """
    return (factor - 1) * activation_bytes


def nccl_buffer_bytes(*, communicators, channels, buffsize):
    """NCCL's per-connection buffers outside torch's allocator: 2 x channels x NCCL_BUFFSIZE per communicator.

    Each ring channel connects to one peer to send and one to receive, each with a buffer of
    NCCL_BUFFSIZE (default 4 MiB, docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html
    #nccl-buffsize) for the Simple protocol; LL and LL128 buffers are smaller and not counted.
    """
    return communicators * channels * 2 * buffsize


def foreach_optimizer_bytes(*, params, state_bytes):
    """torch's foreach AdamW/Adam step: one temporary the size of the parameters it updates, b_s P.

    _multi_tensor_adam computes exp_avg_sq.sqrt() for every parameter at once (torch._foreach_sqrt)
    before dividing in place (torch/optim/adamw.py, adam.py: _multi_tensor_adam); the fused and the
    single-tensor steps keep no such list. P here is what this device's optimizer updates (its
    ZeRO shard). Measured on CPU in tests/test_framework_memory.py.
    """
    return state_bytes * params


def fsdp_in_flight_bytes(*, block_params, output_params, gather_bytes, reduce_bytes):
    """FSDP2's unsharded buffers at the backward peak: two blocks gathered (the current one and the
    one prefetched), one block's unsharded gradient with its reduce-scatter input, and the output
    group kept unsharded from its forward to its backward:
    2 b_g P_b + (b_g + b_r) P_b + b_g P_out.

    torch.distributed.fsdp fully_shard (torch 2.13 _fully_shard/_fsdp_param_group.py L584-585,
    L795-830: backward prefetches one block; _fsdp_collectives.py foreach_reduce L592-616: the bf16
    gradients are freed only after the copy into the reduce_dtype input, one reduce-scatter in flight,
    L647-658); torchtitan keeps [norm, output] unsharded after forward (pytorch/torchtitan@238fa995
    torchtitan/models/llama3/infra/parallelize.py apply_fsdp, reshard_after_forward=False for it).
    """
    return (3 * gather_bytes + reduce_bytes) * block_params + gather_bytes * output_params


def p2p_buffer_bytes(*, activation_bytes_per_microbatch):
    """Pipeline receive buffers: a stage holds the activation it receives for the next forward and the
    gradient it receives for the next backward, one micro-batch's b_a T D (/ t with SP) each.

    Megatron allocates each receive tensor per call with shape (s / c [/ t with SP], b, h)
    (NVIDIA/Megatron-LM@d98e8a64 megatron/core/pipeline_parallel/schedules.py, ~L2137-2143); nanotron's
    engine receives into fresh tensors the same way (huggingface/nanotron@67c5ebb6
    src/nanotron/parallel/pipeline_parallel/p2p.py).
    """
    return 2 * activation_bytes_per_microbatch


# DeepSpeed's terms below cite microsoft/DeepSpeed@38327e07f6cd39b63418f60cedd1651b0be3e7c3 (deepspeed/runtime/zero/)


def ipg_bucket_bytes(*, bucket_elements, grad_bytes, buffers=1):
    """DeepSpeed ZeRO's contiguous gradient bucket ("ipg" buffer): ``buffers`` x reduce_bucket_size x b_g.

    With contiguous_gradients (the default) ZeRO-1/2 allocate one bucket of reduce_bucket_size
    elements (default 5e8, never clamped) in the 16-bit dtype at every backward, two with overlap_comm (off
    by default at stages 1 and 2), and release it after the gradients are reduced, before the step
    (deepspeed/runtime/zero/stage_1_and_2.py L2048-2061, L676-680, L802; config.py L98, L109, L134,
    L351-353). ZeRO-3 allocates one bucket at initialisation and keeps it (stage3.py L537-540, L451); its
    reduce-scatter (reduce_scatter, on by default: config.py L104) concatenates the bucket's contents into a
    copy of the same size (comm/coalesced_collectives.py L186-199).
    """
    return buffers * bucket_elements * grad_bytes


def zero2_overhang_bytes(*, overhang_elements, grad_bytes):
    """DeepSpeed ZeRO-2's gradient buffer beyond the recipe's b_g P / N: it holds every parameter overlapping the
    rank's partition whole (grads_in_partition, stage_1_and_2.py L1344-1352; which parameters:
    :func:`costmodel.parallel.data.partition.partition_overhang`), kept from backward through the step."""
    return grad_bytes * overhang_elements


def zero_partition_buffer_bytes(*, partition_elements, overhang_elements, grad_bytes):
    """DeepSpeed ZeRO-1/2's contiguous buffer of the rank's gradient partition: b_g (P / N + overhang), every
    parameter overlapping the partition whole (grads_in_partition, stage_1_and_2.py L1344-1352).

    ZeRO-1 fills it when it reduces: after backward at the accumulation boundary, beside the full gradients
    (reduce_gradients, L706-726; with overlap_comm, in the boundary's backward hooks), and the step keeps it.
    ZeRO-2 fills one every micro-step; under gradient accumulation the first micro-step's averaged_gradients are
    views of it (get_flat_partition, L783-790, L1723-1760), so the epilogue's release (_release_ipg_buffers,
    L676-680, L802) frees nothing and the next micro-step's backward allocates a second beside it, then adds
    it in (L791-800)."""
    return grad_bytes * (partition_elements + overhang_elements)


def zero1_freed_grad_bytes(*, buffer_bytes, params, grad_bytes):
    """DeepSpeed ZeRO-1 frees the full gradient before the step: what the step holds of it is the rank's
    contiguous buffer (:func:`zero_partition_buffer_bytes`), not b_g P. The epilogue sets every .grad to None
    (zero_grad(set_to_none=True), stage_1_and_2.py L807) once averaged_gradients views the buffer
    (L783-790); a negative term: buffer - b_g P."""
    return buffer_bytes - grad_bytes * params


def zero_step_grad_bytes(*, elements, largest_param, grad_bytes):
    """DeepSpeed ZeRO's optimizer step on a gradient partition of ``elements``: the gradient norm first copies
    each parameter's slice to fp64 (8 B x the largest slice), then the partition is flattened (b_g each) and
    cast to fp32 (4 each), both alive at the cast; the fp32 copy stays the optimizer's .grad through its step:
    max((b_g + 4) E, 8 min(E, largest parameter)).

    ZeRO-1/2 cast this rank's whole partition, E = P / N (stage_1_and_2.py L1699, L1857 (norm), L1891-1902
    (cast), L1913-1916 (freed)); ZeRO-3 one sub-group at a time, which closes at the first parameter that
    takes it past sub_group_size (1e9 by default): E = min(P / N, sub_group_size + largest parameter)
    (stage3.py L954-961, L1895-1914; config.py L168). The gradient shard itself stays in the model's 16-bit
    dtype under ZeRO (engine.py L1017-1021), as the recipe counts it.
    """
    return maximum((grad_bytes + 4) * elements, 8 * minimum(elements, largest_param))


def zero3_live_param_bytes(*, kept, largest_param, prefetch_elements, max_live_elements, weight_bytes):
    """DeepSpeed ZeRO-3's gathered parameters at the turn from forward to backward: what stays gathered
    (``kept``: the output layer, reused within stage3_max_reuse_distance, or the largest module running)
    plus the prefetch, which may overshoot its bucket by one parameter of the next block (``largest_param``)
    and is capped by what stage3_max_live_parameters leaves: b_w (kept + min(prefetch + largest, max(0,
    max_live - kept))).

    Parameters are gathered per leaf module; the prefetch takes min(max_live - available, prefetch bucket)
    (partitioned_param_coordinator.py L300, L378-385, L540-551; config.py L208, L231, L237).
    """
    return weight_bytes * (kept + minimum(prefetch_elements + largest_param,
                                          maximum(0, max_live_elements - kept)))
