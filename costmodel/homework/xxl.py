"""CS336 Assignment 2 'communication_accounting' (the XXL problem), (a)-(d), with other numbers.

Seed 0 is the original (D 16384, F 53248, 126 blocks, TPU v5p with C = 4.6e14 and W_ici = 2 x 9e10,
X = 16, Y = 4, M_X = 2, M_Y = 1, 95 GB); its answers are in shared/reference/conventions.md. The key
is computed by the solvers `cost4d memory`, `solve fsdp` and `solve batch` run (memory and solve_fsdp on
an FFN-stack spec of the variant, solve_batch on its BatchProblem), its steps by `explain`.
"""

from __future__ import annotations

import random

from costmodel.homework import Homework, Part, derivation_lines

TITLE = "Communication accounting for a large FFN stack (CS336 A2 'communication_accounting')"
SOURCE = "Stanford CS336 (Spring 2025) Assignment 2, Problem communication_accounting; seeds 000 and 001"
#: TPUs a variant may use, with the torus axes M_X + M_Y may not exceed
TPUS = ("tpu-v5p", "tpu-v4")


def params(seed: int) -> dict:
    """The original problem's numbers (seed 0) or a variant's."""
    if seed == 0:
        return dict(d_model=16384, d_ff=53248, layers=126, hardware="tpu-v5p", peak_flops=4.6e14,
                    bandwidth=1.8e11, fsdp=16, tp=4, mx=2, my=1, limit_gb=95)
    from costmodel.specs.load import load_hardware

    rng = random.Random(seed)
    d_model = rng.choice((4096, 6144, 8192, 12288, 16384, 20480, 24576))
    d_ff = d_model * rng.choice((8, 11, 13, 14, 16)) // 4  # F / D from 2 to 4, as real MLPs
    hardware = load_hardware(rng.choice(TPUS))
    mx = rng.choice((1, 2))
    layers, fsdp, tp = rng.randrange(24, 161, 2), rng.choice((8, 16, 32, 64)), rng.choice((2, 4, 8))
    my = rng.choice((1, 2)) if mx == 1 and tp >= 4 else 1  # two torus axes need 2 chips or more along each
    return dict(d_model=d_model, d_ff=d_ff, layers=layers, hardware=hardware.name,
                peak_flops=hardware.flops("bf16"), bandwidth=hardware.level("ici").bandwidth_bytes_per_s,
                fsdp=fsdp, tp=tp, mx=mx, my=my, limit_gb=hardware.hbm.marketed_gb)


def spec(p: dict, seed: int):
    """The variant as an FFN-stack spec (what `cost4d memory --model FILE` reads)."""
    from costmodel.specs.model import FFNStack

    return FFNStack(name=f"xxl-{seed}" if seed else "xxl", d_model=p["d_model"], d_ff=p["d_ff"], layers=p["layers"],
                    description="XXL-style FFN stack (homework variant)", source=f"cost4d homework xxl --seed {seed}")


def problem(seed: int) -> Homework:
    from costmodel.cost.capacity import devices_worth
    from costmodel.cost.evaluate import evaluate_layout
    from costmodel.solve.batch import BatchProblem, solve_batch
    from costmodel.solve.explain import batch_derivation, fsdp_derivation
    from costmodel.solve.fsdp import solve_fsdp
    from costmodel.solve.whatif import what_if
    from costmodel.specs.layout import Layout
    from costmodel.specs.load import load_hardware
    from costmodel.specs.recipe import RECIPES

    p = params(seed)
    model, recipe, h100 = spec(p, seed), RECIPES["cs336"], load_hardware("h100-sxm")
    D, F, L = p["d_model"], p["d_ff"], p["layers"]
    intro = (f"Consider a model config, {model.name.upper()}, with d_model={D}, d_ff={F}, and num_blocks={L}. Omit "
             "attention, input embeddings and output linear layers: each block is two linear layers (ignoring the "
             "activation function), d_model -> d_ff -> d_model. Don't do any activation checkpointing; keep "
             "activations and gradient communications in BF16, and accumulated gradients, master weights and "
             "optimizer state (AdamW) in FP32.")

    cost = evaluate_layout(model, recipe, Layout(tokens=1))
    state, per_token = cost.state_bytes_unsharded, cost.heaviest.stage.activation_bytes_per_token
    worth = {r.convention: r for r in devices_worth(state, h100)}
    a = Part("(a)", "How much memory does it take to store the master weights, accumulated gradients and "
             "optimizer states in FP32 on a single device? How much memory is saved for backward (in BF16)? How "
             "many H100 80GB GPUs' worth of memory is this?",
             [f"P = 2 D F L = 2 x {D} x {F} x {L} = {cost.params:,}",
              f"state = 16 P (4 master + 4 grads + 8 AdamW m, v) = {state:,} B = {state / 1e9:,.1f} GB "
              f"= {state / 2**30:,.1f} GiB",
              f"saved for backward = 2 (D + F) L = {per_token:,.0f} B per token = {per_token / 2**20:,.2f} MiB, "
              "times the tokens in the batch",
              f"H100s at 80 GB = 80e9 B: {worth['si'].ratio:.2f} -> {worth['si'].devices}; at 80 GiB: "
              f"{worth['nominal'].ratio:.2f} -> {worth['nominal'].devices}"],
             {"params": cost.params, "state_bytes": state, "activation_bytes_per_token": per_token,
              "h100_80gb": worth["si"].devices, "h100_80gib": worth["nominal"].devices})

    limit = p["limit_gb"] * 1e9
    fsdp_layout = Layout(fsdp=2, tokens=0, shard_activations=0.5)
    fsdp = solve_fsdp(model, recipe, fsdp_layout, limit)
    derivation = fsdp_derivation(model, recipe, fsdp_layout, fsdp, f"--limit {p['limit_gb']:g}GB")
    b = Part("(b)", "Now assume your master weights, optimizer state, gradients and half of your activations "
             "(in practice every second layer) are sharded across N_FSDP devices. Write an expression for how much "
             f"memory this would take per device. What value does N_FSDP need to be for the total memory cost to be "
             f"less than 1 {p['hardware']} ({p['limit_gb']:g}GB per device)?",
             derivation_lines(derivation) + [f"the state alone (A = 0): N > {fsdp.threshold:.2f} -> N_FSDP = {fsdp.n_fsdp}; "
                                   "no N helps once A/2 alone reaches the limit"],
             {"threshold": fsdp.threshold, "n_fsdp": fsdp.n_fsdp})

    batch = {}
    for overlap in ("sum", "max"):
        q = BatchProblem(d_model=D, d_ff=F, fsdp=p["fsdp"], tp=p["tp"], mx=p["mx"], my=p["my"],
                         peak_flops=p["peak_flops"], bandwidth=p["bandwidth"], overlap=overlap)
        batch[overlap] = solve_batch(q)
    c = Part("(c)", f"Consider only the forward pass. Use the communication bandwidth W_ici = {p['bandwidth']:.3g} B/s "
             f"and C = {p['peak_flops']:.3g} FLOP/s for {p['hardware']}. Following the Scaling Book's notation, use "
             f"M_X = {p['mx']}, M_Y = {p['my']}, with X = {p['fsdp']} your FSDP dimension and Y = {p['tp']} your TP "
             "dimension. At what per-device batch size is this model compute bound? What is the overall batch size?",
             derivation_lines(batch_derivation(batch["sum"], p["hardware"]))
             + [f"with the two axes' communication overlapped (T_comms = max): B/N > "
                f"{batch['max'].per_device_batch:,.1f}, B = {batch['max'].global_batch:,.0f}"],
             {"per_device_batch": batch["sum"].per_device_batch, "global_batch": batch["sum"].global_batch,
              "per_device_batch_max": batch["max"].per_device_batch, "global_batch_max": batch["max"].global_batch})

    hardware = load_hardware(p["hardware"])
    rows = what_if(batch["sum"].problem, torus=None, torus_axes=hardware.level("ici").torus_axes, dcn_bandwidth=None)
    d = Part("(d)", "In practice we want the overall batch to be as small as possible while always using compute "
             "effectively (never communication bound). What other tricks can we employ to reduce the batch size "
             "and retain high throughput?",
             [f"{r.change}: " + ("no such layout" if r.per_device_batch is None else
                                 f"B/N > {r.per_device_batch:,.1f}, B = {r.global_batch:,.0f}")
              + (f" ({r.assumption})" if r.assumption else "") for r in rows],
             {r.key: r.per_device_batch for r in rows})
    conventions = [f"recipe {recipe.name}: {recipe.description}", "GB = 1e9 B, GiB = 2^30 B",
                   "(c) the Scaling Book's forward-pass times, ring factor dropped; T_comms = T_FSDP + T_TP unless "
                   "said otherwise"]
    return Homework("xxl", seed, TITLE, intro, [a, b, c, d], conventions, p)
