"""The context axis: the sequence split over c devices, ring attention or all-to-all (Ulysses).

Ring attention (Liu et al. 2023, arXiv:2310.01889): each of the c devices holds T/c tokens and passes
its K, V chunk around the ring, c - 1 hops per layer in forward; backward passes K, V again and their
gradients, 2 x forward. All-to-all (Jacobs et al. 2023, DeepSpeed-Ulysses, arXiv:2309.14509): Q, K, V
are re-sharded from sequence to heads before attention and the output back, four all-to-alls per layer
in forward and four in backward; each moves (c - 1)/c of the device's tensor.

PyTorch's own ring attention (torch.distributed.tensor.experimental context_parallel, what torchtitan runs; torch
2.13 _context_parallel/_attention.py _templated_ring_attention and its backward) rotates K and V as its
``rotate_method`` says: ``allgather`` (its default; torchtitan's context_parallel_rotate_method) all-gathers them once
per attention call, ``alltoall`` passes them on c - 1 times; backward rotates K and V again the same way and passes
their gradient accumulators around the ring c times, in fp32 (_cp_options.convert_to_f32, on by default). The K and
V it rotates are the ones SDPA receives: torchtitan's Llama repeats them to every query head first (repeat_kv).
"""

from __future__ import annotations

from costmodel.mathops import above_one, ceil_div, divides, exact_div, where
from costmodel.parallel import tensor
from costmodel.parallel.collective import Collective, Rule, present, rerun, times_each

NAME = "cp"


def checks(shape, point) -> list[Rule]:
    """c must divide the model's training sequence (the layout spec checks the tokens); all-to-all CP
    needs the query and the KV heads per TP rank to divide by c (Jacobs et al. 2023, Sec. 3: heads are partitioned;
    TransformerEngine pytorch/attention.py, AttnFuncWithCPAndQKVOA2A: 'heads needs to be divisible by CP size' for
    q and k)."""
    if not shape.attention:
        return []
    rules = [Rule(divides(point.cp, shape.seq_len),
                  lambda: f"--cp {point.cp} does not divide the sequence length {shape.seq_len:,} of {shape.name}")]
    if point.cp_kind == "a2a":  # Ulysses re-shards sequence to heads: each of the c ranks takes whole heads
        rules.append(Rule(divides(point.cp, shape.heads / point.tp),
                          lambda: f"--cp {point.cp} with --cp-kind a2a needs the "
                          + (f"{shape.heads // point.tp:,} attention heads per TP rank ({shape.heads:,} / --tp "
                             f"{point.tp})" if point.tp != 1 else f"{shape.heads:,} attention heads")
                          + " to divide by it (all-to-all CP gives each rank whole heads)"))
        kv = ceil_div(shape.kv_heads, point.tp) if point.tp_kv == "replicate" else shape.kv_heads / point.tp
        rules.append(Rule(divides(point.cp, kv),
                          lambda: f"--cp {point.cp} with --cp-kind a2a needs the {shape.kv_heads:,} KV heads"
                          + (f" per TP rank ({kv:g})" if point.tp != 1 else "")
                          + " to divide by it too (Transformer Engine's all-to-all CP asserts it: each rank takes whole "
                          "K and V heads)"))
    return rules


def collectives(shape, recipe, point, *, layers, recomputed=0) -> list[Collective]:
    """CP collectives of a stage with ``layers`` layers per step (each device holds tokens / c); of them
    ``recomputed`` layers (full recomputation) rerun their forward's in backward, attention included
    (torch's non-reentrant checkpoint stops early only after the MLP, past attention)."""
    if not (present(point.cp) and shape.attention):
        return []
    out = _passes(shape, recipe, point, layers, ("forward", "backward"))
    if not (isinstance(recomputed, int) and recomputed == 0):
        out += rerun(_passes(shape, recipe, point, recomputed, ("forward",)))
    return times_each(out, point.micro_steps)


#: torch's context_parallel rotate methods (torchtitan's context_parallel_rotate_method), --cp-kind's names for them
TORCH_KINDS = ("allgather", "alltoall")
#: bytes per element of the gradient accumulators torch's ring attention passes around in backward (fp32)
TORCH_GRAD_BYTES = 4


def _torch_passes(shape, point, layers, phase, act, local) -> list[Collective]:
    """Torch's ring attention over ``layers`` layers in ``phase``: K and V (repeated to the query heads, as SDPA
    receives them) all-gathered once or passed on c - 1 times; in backward the same again and the fp32 dK, dV
    accumulators passed on c times (the last pass returns each rank's own)."""
    cp = point.cp
    kv = local * exact_div(shape.heads, point.tp) * (shape.head_dim + shape.value_dim)  # K, V elements per rank
    forward = phase == "forward"
    what = "K, V" + ("" if forward else " again")
    if point.cp_kind == "allgather":
        out = [Collective("all-gather", "cp", f"{what} (torch's ring attention, all-gathered)", phase, cp, layers,
                          cp * act * kv)]
    else:
        out = [Collective("send/recv", "cp", f"{what} (torch's ring attention, passed on)", phase, cp,
                          layers * (cp - 1), act * kv)]
    if not forward:
        out.append(Collective("send/recv", "cp", "dK, dV accumulators in fp32 (torch's ring attention)", phase, cp,
                              where(above_one(cp), layers * cp, 0), TORCH_GRAD_BYTES * kv))  # arrays: none at c = 1
    return out


def _passes(shape, recipe, point, layers, phases) -> list[Collective]:
    """The CP collectives of ``layers`` layers' attention in each of ``phases``."""
    cp, act = point.cp, recipe.activation_bytes
    heads, kv_heads = exact_div(shape.heads, point.tp), tensor.kv_heads_per_rank(shape, point)
    local = exact_div(point.tokens, cp)
    kv_chunk = act * local * kv_heads * (shape.head_dim + shape.value_dim)  # K and V of the local tokens
    out = []
    for phase in phases:
        if point.cp_kind in TORCH_KINDS:
            out += _torch_passes(shape, point, layers, phase, act, local)
        elif point.cp_kind == "ring":
            hops = layers * (cp - 1)
            forward = phase == "forward"
            out += [Collective("send/recv", "cp", "K, V around the ring" if forward else "K, V and dK, dV around the ring",
                               phase, cp, hops, kv_chunk if forward else 2 * kv_chunk)]
        elif not shape.mla:
            q_or_out = act * local * heads * shape.head_dim
            k_or_v = act * local * kv_heads * shape.head_dim
            out += [Collective("all-to-all", "cp", "Q and the output, sequence <-> heads", phase, cp, 2 * layers,
                               q_or_out),
                    Collective("all-to-all", "cp", "K and V, sequence -> heads", phase, cp, 2 * layers, k_or_v)]
        else:  # MLA: values and output d_v wide, queries and keys d_h + d_r
            out += [Collective("all-to-all", "cp", "Q and K, sequence -> heads", phase, cp, 2 * layers,
                               act * local * heads * shape.head_dim),
                    Collective("all-to-all", "cp", "V and the output, sequence <-> heads", phase, cp, 2 * layers,
                               act * local * heads * shape.value_dim)]
    return out
