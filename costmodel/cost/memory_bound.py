"""The memory-bound ops of a layer and of the model's ends, in HBM bytes per token on one device: the formulas
of formulas/memory_bound.py wired to a shape and a layout.

Under TP the F-wide and per-head ops are split t ways; the residual stream's (norms, residual adds, dropout,
MoE dispatch) only with sequence parallelism, which splits the tokens (without SP every TP rank repeats them).
Full recomputation (and every K layers) reruns each forward op once; selective recomputation reruns only the
attention core: math attention's softmax and dropout (flash attention keeps its softmax on chip).

``kernels``: ``fused`` (Megatron-core and Transformer Engine's kernels; torch.compile fuses alike) or ``eager``
(torchtitan's Llama code op by op in eager PyTorch: RoPE in fp32 complex, GQA's keys and values repeated,
SwiGLU in two kernels, separate q/k/v and gate/up projections whose input gradients autograd sums, the loss on
an fp32 copy; torch's rms_norm is one fused kernel forward, two backward on CUDA). MLA and routed experts keep
the fused counts.
"""

from __future__ import annotations

from costmodel.formulas import memory_bound as mb
from costmodel.mathops import above_one, indicator, maximum, where
from costmodel.parallel import expert
from costmodel.parallel.context import TORCH_KINDS

KERNELS = ("fused", "eager")


def _reruns(point) -> int:
    """A layer's reruns where every layer is alike: 1 under full recomputation and torchtitan's op policy (which
    keeps matmul and attention outputs only). Under every:K only some layers rerun: :func:`recompute_split`
    counts them."""
    return 1 if point.recompute in ("full", "op") else 0


def recompute_split(of_layer, shape, point, layers, act_bytes, *args):
    """``of_layer``'s bytes (:func:`layer_bytes`, :func:`fp8_cast_bytes`) over ``layers`` layers of which the
    recomputed ones (all under full, floor(layers / K) under every:K: cost.stage.recomputed_layers) rerun
    their forward ops once and the others do not."""
    from costmodel.cost.stage import recomputed_layers

    plain = of_layer(shape, point, act_bytes, *args, reruns=0)
    again = recomputed_layers(layers, point)
    if isinstance(again, int) and again == 0:
        return plain * layers
    return plain * layers + (of_layer(shape, point, act_bytes, *args, reruns=1) - plain) * again


def fsdp2_copy_bytes(collectives, *, grad_bytes, reduce_bytes, pipelined=False, microbatches=1) -> object:
    """HBM bytes per step that FSDP2's copies move on the compute stream, from the step's FSDP (ZeRO-3)
    ``collectives`` (parallel/collective.Collective): each all-gather's copy-out, each reduce-scatter's copy-in from ``grad_bytes``
    gradients (the compute dtype) into ``reduce_bytes`` elements. Inside pipeline stages (``pipelined``: a bool, or
    per element for arrays) each reduce-scatter's gradients were accumulated unsharded in the reduce dtype over the
    ``microbatches`` before it, and its copy-in reads that accumulator. The sharded parameters' cast and copy-in before a
    gather and the shard's accumulation after a reduce-scatter run on FSDP2's own streams, off the critical path."""
    total = 0
    for c in collectives:
        if c.axis != "fsdp":  # FSDP's units only (HSDP's replicas all-reduce the shard in place)
            continue
        if c.op == "all-gather":
            total = total + c.calls * mb.fsdp_copy_out_bytes(gathered_bytes=c.buffer_bytes)
        elif c.op == "reduce-scatter":
            direct = mb.fsdp_reduce_copy_in_bytes(scatter_bytes=c.buffer_bytes, grad_bytes=grad_bytes,
                                                  reduce_bytes=reduce_bytes)
            if pipelined is not False:
                accumulated = mb.fsdp_reduce_copy_in_bytes(
                    scatter_bytes=c.buffer_bytes, grad_bytes=reduce_bytes, reduce_bytes=reduce_bytes) + \
                    mb.fsdp_accumulate_bytes(grad_elements=c.buffer_bytes / reduce_bytes, grad_bytes=grad_bytes,
                                             reduce_bytes=reduce_bytes, microbatches=microbatches,
                                             upcast=grad_bytes != reduce_bytes)
                direct = where(pipelined, accumulated, direct)
            total = total + c.calls * direct
    return total


def _stream(shape, point):
    """The residual stream's elements per token on one device: D, split t ways only under SP."""
    return shape.width / point.tp if point.sp else shape.width


def layer_bytes(shape, point, act_bytes, kernels: str = "fused", *, reruns=None):
    """One layer's memory-bound ops, forward and backward (and, ``reruns`` = 1, a recomputed forward; None: 1
    under full recomputation, else 0), per token. A MoE's layer is an MoE layer (its dense first
    layers, if any, are counted as such: a slight overcount)."""
    r, eager = _reruns(point) if reruns is None else reruns, kernels == "eager"
    if not shape.attention:  # the FFN stack: its nonlinearity only
        if shape.activation == "none":
            return 0
        return _mlp(shape.mlp_width / point.tp, shape.gated, act_bytes, r, eager)
    stream, norm = _stream(shape, point), mb.torch_norm_bytes if eager else mb.norm_bytes
    out = (shape.norms_per_layer * norm(width=stream, act_bytes=act_bytes, reruns=r)
           + 2 * mb.residual_add_bytes(width=stream, act_bytes=act_bytes, reruns=r))
    if shape.dropout:  # after attention and after the MLP, fused into the residual add
        out = out + 2 * mb.dropout_mask_bytes(width=stream, reruns=r)
    if shape.qk_norm:
        out = out + norm(width=(shape.heads + shape.kv_heads) * shape.head_dim / point.tp, act_bytes=act_bytes,
                         reruns=r)
    if shape.mla:  # the latents' norms (replicated across TP); RoPE on d_r of each query head and the shared key
        out = out + mb.norm_bytes(width=shape.kv_rank + shape.q_rank, act_bytes=act_bytes, reruns=r)
        out = out + mb.rotary_bytes(q_width=shape.heads * shape.rope_dim / point.tp, k_width=shape.rope_dim,
                                    act_bytes=act_bytes, reruns=r)
    elif not shape.learned_positions:
        rotary = mb.rotary_complex_bytes if eager else mb.rotary_bytes
        out = out + rotary(q_width=shape.heads * shape.head_dim / point.tp,
                           k_width=shape.kv_heads * shape.head_dim / point.tp, act_bytes=act_bytes, reruns=r)
    if eager and not shape.mla:
        out = out + _eager_attention_extras(shape, point, act_bytes, r)
    if point.cp_kind in TORCH_KINDS:  # inside the SDPA op, which torchtitan's op policy saves whole: no rerun under op
        out = out + torch_ring_attention_bytes(shape, point, act_bytes, 0 if point.recompute == "op" else r)
    if not point.flash:  # math attention: the softmax (and dropout) over a s scores, rerun by any recomputation
        core = 1 if point.recompute not in ("none", "op") else 0  # op runs flash attention only (shape_op.rules)
        heads = shape.heads / point.tp
        out = out + mb.softmax_bytes(heads=heads, seq_len=shape.seq_len, act_bytes=act_bytes, reruns=core)
        if shape.dropout:
            out = out + mb.attention_dropout_bytes(heads=heads, seq_len=shape.seq_len, act_bytes=act_bytes,
                                                   reruns=core)
    if not shape.moe:
        return out + _mlp(shape.mlp_width / point.tp, shape.gated, act_bytes, r, eager, shape.width)
    routed = shape.expert_width * shape.top_k * expert.routed_factor(shape, point) / expert.expert_tp(point)
    out = out + _mlp(routed, shape.gated, act_bytes, r) + mb.token_routing_bytes(
        width=stream, top_k=shape.top_k, act_bytes=act_bytes, reruns=r)
    if shape.shared_width:
        out = out + _mlp(shape.shared_width / point.tp, shape.gated, act_bytes, r, eager, shape.width)
    return out


def torch_ring_attention_bytes(shape, point, act_bytes, reruns):
    """What torch's ring attention (--cp-kind allgather|alltoall) moves over HBM around the attention kernels, per
    local token, on the busiest CP rank: its forward (twice where the layer reruns) and its backward
    (formulas/memory_bound.torch_ring_forward_bytes, torch_ring_backward_bytes), whose sum is linear in the rank, so
    largest on the first or the last. K and V as SDPA receives them: repeated to every query head, transposes of
    torchtitan's (b, s, h, d) projections (copied contiguous) wherever a rank holds more than one head."""
    heads = shape.heads / point.tp
    q, out, lse = heads * shape.head_dim * act_bytes, heads * shape.value_dim * act_bytes, heads * 4
    transposed = indicator(heads > 1)
    lse_copied = indicator(heads * point.tokens / shape.seq_len > 1)  # one head of one sequence: contiguous already

    def on(rank):
        return ((1 + reruns) * mb.torch_ring_forward_bytes(q=q, kv=q + out, out=out, lse=lse, cp=point.cp, rank=rank,
                                                           noncontiguous=transposed)
                + mb.torch_ring_backward_bytes(q=q, kv=q + out, lse=lse, cp=point.cp, rank=rank,
                                               noncontiguous=transposed, lse_copied=lse_copied))

    return where(above_one(point.cp), maximum(on(0), on(point.cp - 1)), 0)


def _eager_attention_extras(shape, point, act_bytes, reruns):
    """What eager attention adds to the fused count: GQA's repeated keys and values (where heads exceed KV heads)
    and the sum of the q, k and v projections' input gradients (the full D: the layer's gathered input)."""
    local_kv = shape.kv_heads / point.tp
    repeats = mb.repeat_kv_bytes(q_width=shape.heads * shape.head_dim / point.tp, k_width=local_kv * shape.head_dim,
                                 act_bytes=act_bytes, reruns=reruns, copied=where(above_one(local_kv), 1, 0))
    return (mb.input_grad_sum_bytes(width=shape.width, consumers=3, act_bytes=act_bytes)
            + where(above_one(shape.heads / shape.kv_heads), repeats, 0))


def fp8_cast_bytes(shape, point, act_bytes, *, reruns=None):
    """One layer's fp8 casts under Transformer Engine, per token: each linear layer's input cast (and transposed)
    in forward, rerun by full recomputation, and its output's gradient in backward; the norms before the QKV
    and first MLP matmuls write fp8 themselves (LayerNormLinear). Column-parallel layers take the gathered
    input (D) and give F / t-wide outputs, row-parallel ones the reverse. Under sequence parallelism (t > 1) the
    cast and the transpose of a gathered operand run apart: the local D / t is cast, the gathered D transposed.
    The weights' casts, once per step (cached over micro-batches: is_first_microbatch), are left out. The FFN
    stack and MoE experts: their MLPs."""
    mlp, r = _fp8_mlp_widths(shape, point), _reruns(point) if reruns is None else reruns
    if not shape.attention:
        return sum(mb.fp8_cast_transpose_bytes(width=w, act_bytes=act_bytes) * (2 + r) for w, _ in mlp)
    if not point.sp:
        return _fp8_layer_casts(shape, point, act_bytes, mlp, r, split=False)
    return where(above_one(point.tp), _fp8_layer_casts(shape, point, act_bytes, mlp, r, split=True),
                 _fp8_layer_casts(shape, point, act_bytes, mlp, r, split=False))


def _fp8_layer_casts(shape, point, act_bytes, mlp, r, *, split: bool):
    """fp8_cast_bytes of an attention layer, the SP path (``split``: cast and transpose apart) or not."""
    d, b = shape.width, act_bytes

    def row_operand(width, gathered):  # a row-parallel layer's input (forward) or output gradient (backward)
        if not split:
            return mb.fp8_cast_transpose_bytes(width=gathered, act_bytes=b)
        return mb.fp8_cast_then_transpose_bytes(cast_width=width, transpose_width=gathered, act_bytes=b)

    q = shape.heads * shape.head_dim / point.tp
    qkv = q + 2 * shape.kv_heads * shape.head_dim / point.tp
    local = d / point.tp if split else d
    forward = 2 * mb.fp8_norm_output_bytes(norm_width=local, transpose_width=d, act_bytes=b) + row_operand(q, q)
    backward = mb.fp8_cast_transpose_bytes(width=qkv, act_bytes=b) + row_operand(local, d)
    for up, down in mlp:  # the MLP's second matmul's input is cast; both matmuls' output gradients
        forward = forward + row_operand(down, down)
        backward = backward + mb.fp8_cast_transpose_bytes(width=up, act_bytes=b) + row_operand(local, d)
    return (1 + r) * forward + backward


def _fp8_mlp_widths(shape, point) -> list:
    """(first matmul's output, second's input) widths per token on one device for each MLP a layer runs."""
    gate = 2 if shape.gated else 1
    if not shape.moe:
        widths = [shape.mlp_width / point.tp]
    else:
        widths = [shape.expert_width * shape.top_k * expert.routed_factor(shape, point) / expert.expert_tp(point)]
        if shape.shared_width:
            widths.append(shape.shared_width / point.tp)
    return [(gate * w, w) for w in widths]


def _mlp(width, gated: bool, act_bytes, reruns, eager: bool = False, input_width=0):
    """An MLP's nonlinearity; eager and gated: two kernels, and (with ``input_width``: a dense MLP's D) the sum of
    the gate and up projections' input gradients."""
    if gated and eager:
        return (mb.glu_eager_bytes(mlp_width=width, act_bytes=act_bytes, reruns=reruns)
                + mb.input_grad_sum_bytes(width=input_width, consumers=2, act_bytes=act_bytes))
    if gated:
        return mb.glu_bytes(mlp_width=width, act_bytes=act_bytes, reruns=reruns)
    return mb.activation_bytes(mlp_width=width, act_bytes=act_bytes, reruns=reruns)


def ends_bytes(shape, point, act_bytes, kernels: str = "fused"):
    """The model's ends on the stage that runs them, per token: the final norm and the cross-entropy over the
    vocabulary (split t ways when vocab-parallel; eager: on an fp32 copy) on the last stage, and the embedding's lookup with one stage.
    (With a pipeline the step counts the last stage's: it runs the output layer, and sets the pace.)"""
    if not shape.attention:
        return 0
    stream = _stream(shape, point)
    vocab = shape.vocab / point.tp if point.tp_ends == "vocab-parallel" else shape.vocab
    eager = kernels == "eager"
    loss = mb.cross_entropy_upcast_bytes if eager else mb.cross_entropy_bytes
    norm = mb.torch_norm_bytes if eager else mb.norm_bytes
    out = norm(width=stream, act_bytes=act_bytes, reruns=0) + loss(vocab=vocab, act_bytes=act_bytes)
    return out + where(above_one(point.pp), 0, mb.embedding_bytes(width=stream, act_bytes=act_bytes))
