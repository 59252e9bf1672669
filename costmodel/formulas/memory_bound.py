"""HBM bytes the memory-bound (non-matmul) ops of a training step move, op by op, per token.

Each op is one kernel that reads each input once and writes each output once (``b``: bytes per activation
element). A formula gives one op's forward, its backward, and ``reruns`` more forwards (1 under full
recomputation, 0 otherwise). The kernels are Megatron-core's with Transformer Engine, which NeMo, Megatron-LM
and the DGXC recipes run: TE's fused norms (transformer_engine/common/normalization/rmsnorm/
rmsnorm_fwd_kernels.cuh, rmsnorm_bwd_kernels.cuh), Megatron's fused bias-SwiGLU and bias-GeLU
(megatron/core/fusions/fused_bias_swiglu.py, fused_bias_gelu.py) and bias-dropout-add (fused_bias_dropout.py),
TE's fused RoPE (transformer_engine/common/fused_rope/fused_rope.cu), Megatron's vocab-parallel cross-entropy
(megatron/core/tensor_parallel/cross_entropy.py). Flash attention keeps its
softmax on chip: it is in the attention kernel's time, not here.
"""

from __future__ import annotations


def norm_bytes(*, width, act_bytes, reruns):
    """RMSNorm or LayerNorm over a row of ``width`` elements: forward reads x and writes y (2 D b); backward
    reads x and dy and writes dx (3 D b); the per-row statistics and the weight are negligible:

        (2 (1 + r) + 3) D b"""
    return (2 * (1 + reruns) + 3) * width * act_bytes


def residual_add_bytes(*, width, act_bytes, reruns):
    """x + f(x) over the residual stream: forward reads both and writes the sum (3 D b); backward, the two
    gradients that reach x are summed (read 2, write 1: 3 D b):

        (3 (1 + r) + 3) D b"""
    return (3 * (1 + reruns) + 3) * width * act_bytes


def dropout_mask_bytes(*, width, reruns):
    """Dropout fused into the bias-dropout-add (its add is the residual add): a 1-byte mask per element
    written in forward, read in backward: (1 + r) D + D bytes."""
    return (1 + reruns) * width + width


def rotary_bytes(*, q_width, k_width, act_bytes, reruns):
    """RoPE on the queries (``q_width`` = a d_h elements) and keys (k d_h): forward reads and writes each,
    backward rotates their gradients the same way:

        (2 (1 + r) + 2) (q + k) b"""
    return (2 * (1 + reruns) + 2) * (q_width + k_width) * act_bytes


def glu_bytes(*, mlp_width, act_bytes, reruns):
    """SwiGLU/GeGLU on F: forward reads gate and up and writes their product (3 F b); backward reads both
    and the output's gradient and writes the two inputs' gradients (5 F b):

        (3 (1 + r) + 5) F b"""
    return (3 * (1 + reruns) + 5) * mlp_width * act_bytes


def activation_bytes(*, mlp_width, act_bytes, reruns):
    """An ungated activation (GeLU, ReLU, SiLU) on F: forward reads and writes F (2 F b), backward reads the
    input and the output's gradient and writes the input's (3 F b):

        (2 (1 + r) + 3) F b"""
    return (2 * (1 + reruns) + 3) * mlp_width * act_bytes


def softmax_bytes(*, heads, seq_len, act_bytes, reruns):
    """Math (non-flash) attention's softmax over a token's a s scores: forward reads and writes them
    (2 a s b), backward reads the probabilities and their gradient and writes the scores' (3 a s b):

        (2 (1 + r) + 3) a s b"""
    return (2 * (1 + reruns) + 3) * heads * seq_len * act_bytes


def attention_dropout_bytes(*, heads, seq_len, act_bytes, reruns):
    """Dropout on math attention's a s probabilities per token (torch dropout after the softmax): forward
    reads them and writes the result and a 1-byte mask ((2 b + 1) a s), backward reads the gradient and the
    mask and writes the input's gradient ((2 b + 1) a s):

        (2 b + 1) (2 + r) a s"""
    return (2 * act_bytes + 1) * (2 + reruns) * heads * seq_len


def token_routing_bytes(*, width, top_k, act_bytes, reruns):
    """MoE dispatch and combine: forward copies each token to its k_e experts (read D, write k_e D) and sums
    their outputs back (read k_e D, write D): 2 (k_e + 1) D b; backward the same in reverse:

        (2 (1 + r) + 2) (k_e + 1) D b"""
    return (2 * (1 + reruns) + 2) * (top_k + 1) * width * act_bytes


def embedding_bytes(*, width, act_bytes):
    """The input embedding's lookup: forward reads a row and writes it (2 D b); backward adds the row's
    gradient into the table's (read the gradient and the row, write the row: 3 D b): 5 D b."""
    return 5 * width * act_bytes


def cross_entropy_bytes(*, vocab, act_bytes):
    """Megatron's vocab-parallel cross-entropy over a token's V logits (per rank: its V / t), in fp32:
    forward casts the logits up (read b, write 4), takes the max (read 4), subtracts it and exponentiates in
    place (8 + 8), sums (read 4) and divides in place (8): 36 + b bytes; backward scales the saved softmax in
    place (8) and casts the gradient down (read 4, write b): 12 + b bytes:

        (48 + 2 b) V"""
    return (48 + 2 * act_bytes) * vocab


# --- PyTorch eager: the ops torchtitan's Llama code (pytorch/torchtitan@238fa995 models/llama3/model/model.py)
# dispatches, one kernel each (tests/test_torch_eager_bytes.py counts them with a dispatch mode) ---


def torch_norm_bytes(*, width, act_bytes, reruns):
    """torch's fused rms_norm on CUDA (rms_norm -> _fused_rms_norm, aten/src/ATen/native/layer_norm.cpp): forward
    one kernel (read x, write y); backward two, as its layer-norm templates run them (native/cuda/
    layer_norm_kernel.cu): the input gradient (read x and dy, write dx), then the weight's (GammaBetaBackward:
    read dy and x again):

        (2 (1 + r) + 5) D b"""
    return (2 * (1 + reruns) + 5) * width * act_bytes


def rotary_complex_bytes(*, q_width, k_width, act_bytes, reruns):
    """RoPE as complex multiplication in fp32 (apply_rotary_emb: ``view_as_complex(x.float() ...) * freqs_cis``,
    then ``.type_as(x)``): forward casts up (read b, write 4), multiplies (read 4, write 4) and casts down (read 4,
    write b); backward the same three in reverse. The table of angles (s x d_h / 2 complex, shared by the batch's
    sequences) is left out:

        (2 b + 16) (2 + r) (q + k)"""
    return (2 * act_bytes + 16) * (2 + reruns) * (q_width + k_width)


def repeat_kv_bytes(*, q_width, k_width, act_bytes, reruns, copied=1):
    """GQA's keys and values repeated to every query head before the attention kernel (repeat_kv: expand, then
    reshape): forward copies, reading k and writing q elements for each of the two, unless a rank holds one KV
    head (``copied`` = 0: the reshape of a single head is a view); backward sums each gradient back over the
    repeats (read q, write k):

        2 ((1 + r) c + 1) (q + k) b"""
    return 2 * ((1 + reruns) * copied + 1) * (q_width + k_width) * act_bytes


def glu_eager_bytes(*, mlp_width, act_bytes, reruns):
    """SwiGLU as ``silu(w1(x)) * w3(x)``: forward silu (read F, write F) and the product (read 2 F, write F);
    backward the product's two input gradients (read 2 F, write F each) and silu_backward (read 2 F, write F):

        (5 (1 + r) + 9) F b"""
    return (5 * (1 + reruns) + 9) * mlp_width * act_bytes


def input_grad_sum_bytes(*, width, consumers, act_bytes):
    """Autograd sums the gradients of a tensor that ``consumers`` separate ops read (q, k and v projections of the
    same input; an MLP's gate and up projections): consumers - 1 adds, each reading two and writing one:

        3 (c - 1) W b"""
    return 3 * (consumers - 1) * width * act_bytes


def cross_entropy_upcast_bytes(*, vocab, act_bytes):
    """cross_entropy on an fp32 copy of the logits (``pred.float()``): forward the cast (read b, write 4) and
    log_softmax (read 4, write 4; nll_loss gathers a token's one value); backward nll_loss_backward's gradient
    (write 4), log_softmax_backward (read 8, write 4) and the cast back (read 4, write b):

        (2 b + 32) V"""
    return (2 * act_bytes + 32) * vocab


def fp8_cast_transpose_bytes(*, width, act_bytes):
    """Transformer Engine's fused fp8 cast of a GEMM operand of ``width`` elements per token, with the transpose
    the other pass's GEMM needs: reads it (b) and writes the fp8 copy and its fp8 transpose (1 + 1); amax is
    taken in the same kernel. A linear layer's input in forward without sequence parallelism
    (fp8_cast_transpose_fused) and its output's gradient in backward (cast, transpose and bias gradient fused):
    TransformerEngine@v1.10 pytorch/module/linear.py L110-139, module/base.py L792-800:

        (b + 2) W"""
    return (act_bytes + 2) * width


def fp8_cast_then_transpose_bytes(*, cast_width, transpose_width, act_bytes):
    """The same cast and transpose apart, as under sequence parallelism, where the fp8 copy is gathered between
    them: cast_to_fp8 of the local ``cast_width`` elements (read b, write 1), then fp8_transpose of the
    ``transpose_width`` the GEMM sees (read 1, write 1): TransformerEngine@v1.10 linear.py L133-139, L509-514,
    module/base.py L760-790:

        (b + 1) C + 2 T"""
    return (act_bytes + 1) * cast_width + 2 * transpose_width


def fp8_norm_output_bytes(*, norm_width, transpose_width, act_bytes):
    """A norm fused with the fp8 linear it feeds (TE's LayerNormLinear) writes its ``norm_width`` outputs in fp8,
    1 byte instead of b, and the wgrad GEMM's fp8 transpose of the (under SP, gathered) ``transpose_width`` is
    made apart (read 1, write 1): TransformerEngine@v1.10 pytorch/module/layernorm_linear.py L124-157 (fp8 ln_out,
    gathered under SP), L570 (its transpose):

        (1 - b) N + 2 T"""
    return (1 - act_bytes) * norm_width + 2 * transpose_width


def fsdp_copy_out_bytes(*, gathered_bytes):
    """FSDP2 copies each all-gather's output into the unsharded parameters, on the compute stream before the unit
    runs: it reads and writes the gathered bytes, 2 S (S: the all-gather's output). Source: torch 2.13
    distributed/fsdp/_fully_shard/_fsdp_collectives.py foreach_all_gather_copy_out (fsdp.split_with_sizes_copy)."""
    return 2 * gathered_bytes


def fsdp_reduce_copy_in_bytes(*, scatter_bytes, grad_bytes, reduce_bytes):
    """FSDP2 copies the unsharded gradients into the reduce-scatter's input, on the compute stream after the unit's
    backward, casting to the reduce dtype: it reads S b_g / b_r and writes S (S: the reduce-scatter's input, b_g
    the gradients' bytes per element, b_r the reduce dtype's). Source: as above, foreach_reduce
    (foreach_reduce_scatter_copy_in: fsdp.chunk_cat into a reduce-dtype buffer)."""
    return scatter_bytes * (1 + grad_bytes / reduce_bytes)


def fsdp_accumulate_bytes(*, grad_elements, grad_bytes, reduce_bytes, microbatches, upcast: bool):
    """Inside torch's pipeline stages FSDP2 keeps a unit's unsharded gradients from micro-batch to micro-batch until
    the stage's last backward, in the reduce dtype: where that differs from the gradients' (``upcast``), the first
    micro-batch's are cast to it (read b_g, write b_r per element); each later one is added in (read b_r + b_g, write
    b_r; in the gradients' own dtype autograd's accumulation does the same), E (b_g + b_r) [upcast] + (m - 1) E (b_g +
    2 b_r) for a unit of E elements over m micro-batches, on the compute stream. Source: torch 2.13
    distributed/fsdp/_fully_shard/_fsdp_param.py to_accumulated_grad_if_needed, accumulate_unsharded_grad_if_needed,
    called from _fsdp_param_group.py post_backward while reduce_grads is off (pipelining/stage.py
    backward_one_chunk); measured in tests/test_torch_distributed_llama.py."""
    first = grad_elements * (grad_bytes + reduce_bytes) if upcast else 0
    return first + (microbatches - 1) * grad_elements * (grad_bytes + 2 * reduce_bytes)


def torch_ring_forward_bytes(*, q, kv, out, lse, cp, rank, noncontiguous):
    """HBM bytes torch's ring attention moves around the attention kernels in one call's forward on CP rank ``rank``
    (of ``cp``, causal, load-balanced), from the bytes the rank's query ``q``, key plus value ``kv`` (as the kernel
    receives them), output ``out`` and fp32 log-sum-exp ``lse`` take: the contiguous copies of K, V where they come
    transposed (``noncontiguous``: 1, as torchtitan passes them; 0 if not), c - 1 concatenations of K, V, the output
    cast to fp32 and back, and each later block's merge into the running output and lse (sigmoid and log-sigmoid
    arithmetic in fp32): whole for the ``rank`` blocks under the diagonal, on the second half of the queries for the
    c - 1 - rank others, which also concatenate the halves back. Source: torch 2.13
    distributed/tensor/experimental/_context_parallel/_attention.py L418-419, L438 (_templated_ring_attention),
    L186-197 and L136 (_SDPAMerger.step, _partial_update), L214, L224 (its results); measured in
    tests/test_torch_distributed_llama.py:

        2 n KV + 2 (c - 1) KV + 6 O + r (19 O + 14 L) + (c - 1 - r) (27 O + 18 L) / 2"""
    return (2 * noncontiguous * kv + 2 * (cp - 1) * kv + 6 * out + rank * (19 * out + 14 * lse)
            + (cp - 1 - rank) * (27 * out + 18 * lse) / 2)


def torch_ring_backward_bytes(*, q, kv, lse, cp, rank, noncontiguous, lse_copied):
    """The same call's backward: fp32 accumulators for dQ, dK, dV zeroed, K, V copied contiguous again (and, where they
    came transposed, the first dK, dV pass's flatten a copy), concatenated c - 1 times, each block's gradients added
    in (whole, or into a half through a concatenation), the dK, dV accumulators concatenated for each of their c
    passes, the results cast back; the c - 1 - rank blocks above the diagonal copy the second half of the lse
    (``lse_copied``: 0 where one head of one sequence makes it contiguous already). Source: as above,
    _templated_ring_attention_backward L513-518, L533, L568, L590-646, _partial_update L133-136:

        6 n KV + (22 c + 6 + 3 r) KV / 2 + (13 c + 7 - 3 r) Q / 2 + (c - 1 - r) L [lse_copied]"""
    return (6 * noncontiguous * kv + (22 * cp + 6 + 3 * rank) * kv / 2 + (13 * cp + 7 - 3 * rank) * q / 2
            + (cp - 1 - rank) * lse * lse_copied)


def hbm_seconds(*, hbm_bytes, hbm_bandwidth, efficiency):
    """Memory-bound time: bytes over the bandwidth such kernels achieve, W_HBM x e_HBM."""
    return hbm_bytes / (hbm_bandwidth * efficiency)
