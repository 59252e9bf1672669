"""Pipeline schedules: bubble, micro-batches in flight per stage, and the interleaving factor.

p stages, m micro-batches, v model chunks per device (interleaved 1F1B).
"""

from __future__ import annotations

from costmodel.mathops import minimum


def bubble_fraction(*, stages, microbatches, chunks=1, schedule="1f1b"):
    """Idle fraction of a step.

    GPipe / AFAB and 1F1B: (p - 1) / (m + p - 1) (Narayanan et al. 2021, arXiv:2104.04473, Sec. 2.2.1:
    bubble time (p - 1) t_f+b against m t_f+b of work). Interleaved with v chunks: the bubble shrinks
    v-fold, (p - 1) / (v m + p - 1) (same paper, Sec. 2.2.2). ZB-H1: one third of 1F1B's bubble when
    forward, input-gradient and weight-gradient passes take equal time, (p - 1) / (3m + p - 1)
    (Qi et al. 2023, arXiv:2401.10241, Sec. 3.1).
    """
    if schedule == "interleaved":
        return (stages - 1) / (chunks * microbatches + stages - 1)
    if schedule == "zb-h1":
        return (stages - 1) / (3 * microbatches + stages - 1)
    return (stages - 1) / (microbatches + stages - 1)


def microbatches_in_flight(*, stage, stages, microbatches, schedule="1f1b"):
    """Micro-batches whose activations stage ``stage`` (0 = first) holds at its peak.

    GPipe / AFAB runs every forward first: all m. 1F1B starts backward after p - i warm-up forwards:
    min(p - i, m) (Narayanan et al. 2021, Sec. 2.2.1). ZB-H1 delays each stage's weight-gradient passes so
    that every stage has p micro-batches in flight (Qi et al. 2023, arXiv:2401.10241, Sec. 2.1): p - i awaiting
    B and i awaiting only W. W keeps less than B (the matmuls' inputs and output gradients, Table 1), so
    counting those i whole is an upper bound on stages after the first; stage 0, 1F1B's peak, is exact.
    Interleaving is handled by :func:`interleaved_in_flight`.
    """
    if schedule == "gpipe":
        return microbatches
    if schedule == "zb-h1":
        return minimum(stages, microbatches)
    return minimum(stages - stage, microbatches)


def interleave_factor(*, stages, chunks):
    """Interleaved 1F1B multiplies the first stage's activations by 1 + (p - 1) / (p v).

    Source: Korthikanti et al. 2022, arXiv:2205.05198, Sec. 4.2.3 (the first stage when m >= 2p;
    :func:`interleaved_in_flight` is the count for every stage and m).
    """
    return 1 + (stages - 1) / (stages * chunks)


def interleaved_in_flight(*, stage, stages, microbatches, chunks):
    """Micro-batches' worth of activations stage i holds at its peak under interleaved 1F1B: its warm-up
    forwards of one chunk (1/v of its layers) each, plus the first steady-state forward, at most all m v:
    min(2 (p - i - 1) + (v - 1) p + 1, m v) / v.

    Source: Megatron-LM core/pipeline_parallel/schedules.py, forward_backward_pipelining_with_interleaving:
    num_warmup_microbatches = (p - rank - 1) * 2 + (num_model_chunks - 1) * p, capped at the m v total.
    On stage 0 with m >= 2p it is Korthikanti's p (1 + (p - 1) / (p v)) (:func:`interleave_factor`).
    """
    return minimum(2 * (stages - stage - 1) + (chunks - 1) * stages + 1, microbatches * chunks) / chunks


def p2p_bytes_per_microbatch(*, tokens, hidden, act_bytes, tp=1, sp=False):
    """Bytes one stage sends to the next per micro-batch: the T x h activation (b_a T h, / t with SP);
    the backward pass sends its gradient back, the same size."""
    return act_bytes * tokens * hidden / (tp if sp else 1)


def balanced_stage_end(*, stage, stages, layers, layer_cost, output_cost):
    """Layers on stages 0..i under a compute-balanced split: min(L, floor((i + 1) C / (p c)) + 1).

    nanotron gives each pipeline block a cost (a decoder layer c = 4 a d_h D + 3 F D, the output
    layer c_o = V D, everything else 0), walks the blocks in order and moves to the next stage
    after the block whose cumulative cost exceeds (i + 1) C / p, C = L c + c_o. Layer j (1-based)
    has cumulative cost j c, so stage i ends at the first j with j c > (i + 1) C / p.
    Source: huggingface/nanotron@67c5ebb6 src/nanotron/models/base.py L211-235 (build_model) and
    src/nanotron/models/llama.py L913-925 (get_block_compute_costs).
    """
    total = layers * layer_cost + output_cost
    return minimum(layers, (stage + 1) * total // (stages * layer_cost) + 1)
