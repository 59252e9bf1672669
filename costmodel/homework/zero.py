"""ZeRO's memory table (Rajbhandari et al. 2020, arXiv:1910.02054, Figure 1: Psi = 7.5B, N_d = 64,
K = 12), with other numbers: per-device state under the baseline and ZeRO stages 1, 2 and 3.

The key is `cost4d memory --recipe zero --fsdp N --zero s --tokens 0` on an FFN stack of Psi parameters.
"""

from __future__ import annotations

import random

from costmodel.homework import Homework, Part

TITLE = "Memory of mixed-precision Adam under ZeRO stages 1-3"
SOURCE = "Rajbhandari et al. 2020, arXiv:1910.02054, Sec. 5 and Figure 1; seed 004 (ZeRO 1/2/3)"
DEVICES = (8, 16, 32, 64, 128, 256, 512, 1024)
STAGES = {0: "baseline data parallelism", 1: "P_os (ZeRO-1)", 2: "P_os+g (ZeRO-2)", 3: "P_os+g+p (ZeRO-3)"}


def params(seed: int) -> dict:
    """Psi = 2 D F L parameters (an FFN stack), N_d devices, the device's memory for the last part."""
    if seed == 0:  # Psi = 7.5e9 = 2 x 3750 x 10000 x 100, N_d = 64 (the paper's example)
        return dict(d_model=3750, d_ff=10000, layers=100, devices=64, device_gb=32)
    rng = random.Random(seed)
    d_model = rng.randrange(1024, 12289, 256)
    return dict(d_model=d_model, d_ff=4 * d_model, layers=rng.randrange(8, 129), devices=rng.choice(DEVICES),
                device_gb=rng.choice((16, 24, 32, 40, 80)))


def spec(p: dict, seed: int):
    from costmodel.specs.model import FFNStack

    return FFNStack(name=f"zero-{seed}", d_model=p["d_model"], d_ff=p["d_ff"], layers=p["layers"],
                    description="a model of Psi parameters (homework variant)", source=f"cost4d homework zero --seed {seed}")


def problem(seed: int) -> Homework:
    from costmodel.cost.evaluate import evaluate_layout
    from costmodel.specs.layout import Layout
    from costmodel.specs.recipe import RECIPES

    p = params(seed)
    model, recipe, n = spec(p, seed), RECIPES["zero"], p["devices"]
    psi = 2 * p["d_model"] * p["d_ff"] * p["layers"]
    intro = (f"A model of Psi = {psi:,} parameters is trained with mixed-precision Adam on N_d = {n} devices: "
             "fp16/bf16 parameters and gradients (2 bytes each), and K = 12 bytes of optimizer state per parameter "
             "(fp32 master weights, momentum and variance). Ignore activations and buffers.")
    totals = {stage: evaluate_layout(model, recipe, Layout(fsdp=n, zero=stage, tokens=0)).heaviest.total_bytes
              for stage in STAGES}
    formulas = {0: "(2 + 2 + K) Psi", 1: "2 Psi + 2 Psi + K Psi / N_d", 2: "2 Psi + (2 + K) Psi / N_d",
                3: "(2 + 2 + K) Psi / N_d"}
    a = Part("(a)", "How many bytes does each device hold under baseline data parallelism and under ZeRO stages "
             "1 (optimizer state partitioned), 2 (+ gradients) and 3 (+ parameters)?",
             [f"{STAGES[s]}: {formulas[s]} = {totals[s]:,.0f} B = {totals[s] / 1e9:,.2f} GB" for s in STAGES],
             {f"stage_{s}_bytes": totals[s] for s in STAGES})
    limit = p["device_gb"] * 1e9
    fitting = [s for s in STAGES if totals[s] <= limit]
    b = Part("(b)", f"Which of them fit a device of {p['device_gb']} GB (= {p['device_gb']}e9 B)? What does ZeRO-3 "
             "save over the baseline, as a factor?",
             [f"fits: {', '.join(STAGES[s] for s in fitting) or 'none'}",
              f"baseline / ZeRO-3 = N_d = {totals[0] / totals[3]:g}"],
             {"lowest_fitting_stage": fitting[0] if fitting else None, "saving": totals[0] / totals[3]})
    conventions = [f"recipe {recipe.name}: {recipe.description}", "GB = 1e9 B", "no activations, buffers or padding"]
    return Homework("zero", seed, TITLE, intro, [a, b], conventions, p)
