"""When is a layout compute-bound on a TPU (the Scaling Book's training chapter): FSDP, TP, and mixed
FSDP + TP, with both conventions for the two axes' communication (summed, or overlapped: max).

The key is `cost4d solve batch --model M --hardware H --fsdp X --tp Y --mx --my --overlap sum|max`.
"""

from __future__ import annotations

import math
import random

from costmodel.homework import Homework, Part, derivation_lines

TITLE = "Compute-bound batch sizes on a TPU (the Scaling Book's training chapter)"
SOURCE = "Austin et al. 2025, 'How to Scale Your Model', training chapter (LLaMA-3 70B on v5p); seed 001"
MODELS = ("llama3-8b", "llama3-70b", "llama3-405b")
TPUS = ("tpu-v5p", "tpu-v4")


def params(seed: int) -> dict:
    """The problem's numbers: X FSDP x Y TP chips over M_X and M_Y torus axes that a slice of the TPU has (each
    group's chips fit in the largest axes it spans, which it shares with no other), and M_X' (``mx_all``) for pure
    FSDP over all X Y chips: the fewest axes that hold them."""
    if seed == 0:  # the chapter's worked example: LLaMA-3 70B on v5p
        return dict(model="llama3-70b", hardware="tpu-v5p", fsdp=64, tp=4, mx=2, my=1, mx_all=2)
    rng = random.Random(seed)
    while True:
        mx = rng.choice((1, 2))
        model, hardware, fsdp, tp = rng.choice(MODELS), rng.choice(TPUS), rng.choice((16, 32, 64, 128, 256)), rng.choice(
            (2, 4, 8, 16))
        my = rng.choice((1, 2)) if mx == 1 and tp >= 4 else 1  # two torus axes need 2 chips or more along each
        axes = torus_axes(hardware)
        everything = next((m for m in range(1, len(axes) + 1) if holds(fsdp * tp, axes[:m])), None)
        if mx + my <= len(axes) and holds(fsdp, axes[:mx]) and holds(tp, axes[mx:mx + my]) and everything:
            return dict(model=model, hardware=hardware, fsdp=fsdp, tp=tp, mx=mx, my=my, mx_all=everything)


def torus_axes(hardware: str) -> list[int]:
    """The TPU's largest slice's axes, longest first (its ICI level's max_shape)."""
    from costmodel.specs.load import load_hardware

    return sorted(load_hardware(hardware).level("ici").max_shape, reverse=True)


def holds(chips: int, axes: list[int]) -> bool:
    """Whether ``axes`` hold a power of two of ``chips``: the product of the longest power-of-two run each axis
    has is at least that (a 28-chip axis holds 16 of them)."""
    return bool(axes) and chips <= math.prod(1 << (a.bit_length() - 1) for a in axes)


def answers(p: dict) -> dict:
    """overlap -> the solver's answer for the mixed layout; and FSDP alone, TP alone (sum)."""
    from costmodel.solve.batch import solve_batch
    from costmodel.solve.problem import batch_problem
    from costmodel.specs.load import load_hardware, load_model

    model, hardware = load_model(p["model"]), load_hardware(p["hardware"])
    out = {}
    for key, fsdp, tp, overlap in (("sum", p["fsdp"], p["tp"], "sum"), ("max", p["fsdp"], p["tp"], "max"),
                                   ("fsdp", p["fsdp"] * p["tp"], 1, "sum"), ("tp", 1, p["tp"], "sum")):
        mx = p["mx_all"] if key == "fsdp" else p["mx"]
        out[key] = solve_batch(batch_problem(model, hardware, fsdp=fsdp, tp=tp, mx=mx, my=p["my"],
                                             overlap=overlap, pass_="forward"))
    return out


def problem(seed: int) -> Homework:
    from costmodel.solve.batch import tp_share
    from costmodel.solve.explain import batch_derivation
    from costmodel.specs.load import load_model

    p = params(seed)
    model = load_model(p["model"])
    found = answers(p)
    q = found["sum"].problem
    intro = (f"Train {p['model']} (D = {model.hidden}, F = {model.ffn_hidden}) on {p['hardware']} chips with "
             f"C = {q.peak_flops:.3g} FLOP/s and W_ici = {q.bandwidth:.3g} B/s per torus axis. Count the MLP's "
             "matmuls of the forward pass only, in bf16, the Scaling Book's way (ring factor dropped).")
    n = p["fsdp"] * p["tp"]
    a = Part("(a)", f"Pure FSDP over all N = {n} chips, spread over M_X = {p['mx_all']} torus "
             f"{'axis' if p['mx_all'] == 1 else 'axes'}: above which batch "
             "per chip is it compute-bound?",
             [f"B/N > alpha / M_X = {found['fsdp'].per_device_batch:,.1f} tokens per chip, B = "
              f"{found['fsdp'].global_batch:,.0f}"],
             {"per_device_batch": found["fsdp"].per_device_batch})
    tp_bound = found["tp"].per_device_batch
    b = Part("(b)", f"Pure TP over Y = {p['tp']} chips (M_Y = {p['my']}): is it ever compute-bound? (T_TP / T_math = "
             "alpha Y / (M_Y F) must be below 1.)",
             [f"alpha Y / (M_Y F) = {tp_share(found['tp'].problem):.3f}: "
              + ("compute-bound at any batch" if tp_bound == 0 else
                 "never compute-bound" if tp_bound == float("inf") else f"B/N > {tp_bound:,.1f}")],
             {"compute_bound_ever": found["tp"].compute_bound_ever})
    c = Part("(c)", f"Mixed: X = {p['fsdp']} FSDP x Y = {p['tp']} TP, M_X = {p['mx']}, M_Y = {p['my']}. Above which "
             "batch per chip is it compute-bound when the two axes' communication adds up, and when it overlaps?",
             derivation_lines(batch_derivation(found["sum"], p["hardware"])) + [f"overlapped (T_comms = max): B/N > {found['max'].per_device_batch:,.1f}, "
                f"B = {found['max'].global_batch:,.0f}"],
             {"per_device_batch": found["sum"].per_device_batch, "per_device_batch_max": found["max"].per_device_batch})
    conventions = ["forward pass", "bf16 weights and activations on the wire", "ring factor dropped (Scaling Book)",
                   f"C and W from the {p['hardware']} spec"]
    return Homework("tpu-batch", seed, TITLE, intro, [a, b, c], conventions, p)
