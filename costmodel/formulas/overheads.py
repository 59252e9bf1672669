"""What a training framework allocates beyond the exact accounting, one term per function.

The exact accounting (:mod:`costmodel.formulas.memory`) counts persistent state and the tensors
autograd saves for backward. A framework adds buffers and transients on top; each is written here
with the code it is read from. P: parameters on the device (after TP/PP), T: tokens of one
micro-batch on it, b: bytes per element.
"""

from __future__ import annotations


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


def upcast_loss_bytes_per_token(*, vocab, tp, logit_bytes):
    """Logits cast to fp32 for the loss, alive while the cross-entropy runs: (b_l + 4) V / t per token.

    The output layer writes b_l-byte logits; they are cast to an fp32 copy (4 V / t) and the
    vocabulary-parallel cross-entropy subtracts the max into a new fp32 tensor, the softmax it saves
    (already counted by the exact accounting). At that moment the low-precision logits and the fp32
    copy are alive too. Source: huggingface/nanotron@67c5ebb6 src/nanotron/models/llama.py L874-880,
    L909 (cast_to_fp32) and src/nanotron/parallel/tensor_parallel/functional.py L31-115
    (_ShardedCrossEntropy: logits - max is out of place, exp and the division are in place).
    """
    return (logit_bytes + 4) * vocab / tp


def sp_gather_buffer_bytes(*, tokens, hidden, act_bytes):
    """The persistent buffer sequence parallelism gathers a layer's input into: b_a T D.

    nanotron keeps one MemoryBuffer('allgather') that grows to the largest request (the full
    sequence of a micro-batch at width D) and never shrinks (huggingface/nanotron@67c5ebb6
    src/nanotron/parallel/utils.py L14-28; used by parallel/tensor_parallel/functional.py L153-216).
    """
    return act_bytes * tokens * hidden


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
