"""Per-layer time of an MLP layer under data (FSDP) x tensor parallelism, Scaling Book style.

Source: Austin et al., "How to Scale Your Model" (the Scaling Book), training chapter, table of
per-layer FLOPs and bytes (shared/reference/conventions.md): FSDP + TP moves 4DF/Y (weights) and
4BD/X (activations) bytes per layer in forward, 8DF/Y and 8BD/X in backward, against 4BDF/N and
8BDF/N FLOPs. Times divide bytes by W_ici M (bidirectional ICI, M torus axes) and FLOPs by N C.
The book drops the (n-1)/n ring factor; so do these formulas.
"""

from __future__ import annotations

from costmodel.mathops import maximum, square_root

#: FLOP and byte multiplier per pass: forward 4, backward 8, whole step 12 (4 + 8).
PASS_FACTOR = {"forward": 4, "step": 12}


def math_seconds(*, batch, d_model, d_ff, devices, peak_flops, factor=4):
    """T_math = k B D F / (N C): one MLP layer's matmuls on B tokens over N devices."""
    return factor * batch * d_model * d_ff / (devices * peak_flops)


def fsdp_seconds(*, d_model, d_ff, tp, bandwidth, mx, factor=4):
    """T_FSDP = k D F / (Y W M_X): gathering one layer's bf16 weights (already split over Y)."""
    return factor * d_model * d_ff / (tp * bandwidth * mx)


def tp_seconds(*, batch, d_model, fsdp, bandwidth, my, factor=4):
    """T_TP = k B D / (X W M_Y): moving one layer's bf16 activations (already split over X)."""
    return factor * batch * d_model / (fsdp * bandwidth * my)


def comms_seconds(*, fsdp_time, tp_time, overlap):
    """T_comms = T_FSDP + T_TP (overlap 'sum': axes take turns) or max(...) ('max': they overlap).

    Source: the Scaling Book's text of early 2025 adds the two; since Aug 2025 it takes the max.
    """
    return maximum(fsdp_time, tp_time) if overlap == "max" else fsdp_time + tp_time


def intensity(*, peak_flops, bandwidth):
    """alpha = C / W: FLOPs a device does in the time it sends one byte (v5p: 4.59e14 / 1.8e11 ~ 2550)."""
    return peak_flops / bandwidth


def fsdp_batch_bound(*, alpha, tp, mx):
    """alpha / (Y M_X): the B/N at which T_math = T_FSDP (Scaling Book, FSDP + TP)."""
    return alpha / (tp * mx)


def tp_comm_share(*, alpha, tp, my, d_ff):
    """alpha Y / (M_Y F) = T_TP / T_math, independent of the batch; TP binds once it reaches 1."""
    return alpha * tp / (my * d_ff)


def fsdp_tp_batch_per_device(*, fsdp_bound, tp_share, overlap):
    """Smallest B/N with T_math >= T_comms for fixed X, Y.

    sum: B/N > (alpha / (Y M_X)) / (1 - alpha Y / (M_Y F)); max: B/N > alpha / (Y M_X), valid
    while alpha Y / (M_Y F) < 1. Derivation: divide 4BDF/(NC) >= 4DF/(Y W M_X) + 4BD/(X W M_Y)
    by 4DF/(NC) and use N = X Y. conventions.md (c): 395.3 (sum) and 319.4 (max) for XXL on v5p.
    """
    return fsdp_bound / (1 - tp_share) if overlap == "sum" else fsdp_bound


def tp_degree_limit(*, alpha, my, d_ff):
    """TP stays compute-bound only while Y < M_Y F / alpha (Scaling Book, tensor parallelism)."""
    return my * d_ff / alpha


def data_batch_per_device(*, alpha, mx):
    """Pure DP or FSDP: B/X > alpha / M_X tokens per device (Scaling Book, data parallelism)."""
    return alpha / mx


def optimal_fsdp_degree(*, batch, devices, mx, my, d_ff):
    """X_opt = sqrt(B N M_X / (F M_Y)): the split that minimises T_FSDP + T_TP for fixed N."""
    return square_root(batch * devices * mx / (d_ff * my))


def optimal_split_batch_per_device(*, alpha, mx, my, d_ff, overlap):
    """B/N at the optimal split: 4 alpha^2 / (M_X M_Y F) (sum) or alpha^2 / (M_X M_Y F) (max).

    At X_opt the two comm terms are equal; T_math >= 2 x one term (sum) or >= one term (max).
    """
    factor = 4 if overlap == "sum" else 1
    return factor * alpha**2 / (mx * my * d_ff)
