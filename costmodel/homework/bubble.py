"""Pipeline bubbles and stage memory (Narayanan et al. 2021, arXiv:2104.04473, Sec. 2.2; Qi et al. 2023,
arXiv:2401.10241): GPipe, 1F1B, interleaved 1F1B and ZB-H1 on p stages with m micro-batches.

The key is `cost4d memory --pp p --microbatches m --schedule S [--chunks v] --tokens T` (its bubble
fraction and the first stage's saved activations) on Llama 3 8B.
"""

from __future__ import annotations

import random

from costmodel.homework import Homework, Part

TITLE = "Pipeline parallelism: bubbles and the first stage's activations"
SOURCE = "Narayanan et al. 2021, arXiv:2104.04473, Sec. 2.2; Korthikanti et al. 2022, arXiv:2205.05198, Sec. 4.2.3; seeds 003, 004"
MODEL = "llama3-8b"
SCHEDULES = (("gpipe", 1), ("1f1b", 1), ("interleaved", 2), ("zb-h1", 1))


def params(seed: int) -> dict:
    if seed == 0:
        return dict(stages=4, microbatches=8, tokens=8192)
    rng = random.Random(seed)
    stages = rng.choice((2, 4, 8, 16))
    return dict(stages=stages, microbatches=stages * rng.choice((1, 2, 3, 4, 8)), tokens=rng.choice((2048, 4096, 8192)))


def problem(seed: int) -> Homework:
    from costmodel.cost.evaluate import evaluate_layout
    from costmodel.specs.layout import Layout
    from costmodel.specs.load import load_model
    from costmodel.specs.recipe import RECIPES

    p = params(seed)
    pp, m, tokens = p["stages"], p["microbatches"], p["tokens"]
    model = load_model(MODEL)
    intro = (f"{MODEL} ({model.layers} layers) is split into p = {pp} pipeline stages; each step runs m = {m} "
             f"micro-batches of {tokens:,} tokens. Forward, backward-for-inputs and backward-for-weights take the same "
             "time per micro-batch and stage; sends are free.")
    rows = {}
    for schedule, chunks in SCHEDULES:
        layout = Layout(pp=pp, microbatches=m, schedule=schedule, chunks=chunks, tokens=tokens)
        cost = evaluate_layout(model, RECIPES["cs336"], layout)
        first = cost.stages[0]
        rows[schedule] = (cost.bubble, first.stage.in_flight, first.activation_bytes)
    formulas = {"gpipe": "(p - 1) / (m + p - 1)", "1f1b": "(p - 1) / (m + p - 1)",
                "interleaved": "(p - 1) / (v m + p - 1), v = 2", "zb-h1": "(p - 1) / (3 m + p - 1)"}
    a = Part("(a)", "What fraction of the step is the pipeline bubble under GPipe, 1F1B, interleaved 1F1B with "
             "v = 2 model chunks per device, and ZB-H1?",
             [f"{s}: {formulas[s]} = {rows[s][0]:.4f}" for s, _ in SCHEDULES],
             {f"bubble_{s}": rows[s][0] for s, _ in SCHEDULES})
    held = {"gpipe": "m (every forward first)", "1f1b": "min(p, m)", "interleaved": "min(p v + p - 1, m v) / v",
            "zb-h1": "min(p, m)"}
    b = Part("(b)", "How many micro-batches' activations does the first stage hold at its peak under each "
             "schedule, and how many bytes is that (under torch.autocast: bf16 matmuls, an fp32 residual stream and fp32 "
             "norm inputs; flash attention, no recomputation)?",
             [f"{s}: {held[s]} = {rows[s][1]:g} micro-batches, {rows[s][2]:,.0f} B = {rows[s][2] / 1e9:,.2f} GB"
              for s, _ in SCHEDULES],
             {f"activations_{s}": rows[s][2] for s, _ in SCHEDULES})
    conventions = ["bubble as a fraction of the step", "activations as autograd saves them under torch.autocast (bf16 "
                   "matmul inputs, fp32 residual stream and norm inputs; flash attention)",
                   "GB = 1e9 B"]
    return Homework("bubble", seed, TITLE, intro, [a, b], conventions, p)
