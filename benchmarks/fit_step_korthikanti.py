"""Fit the A100 step-model parameters to Korthikanti et al. 2022 Table 5 and report the errors.

Two parameters, one set for all four models: the matmul efficiency e (achieved / 312 TFLOP/s) and the
elementwise passes g. With the library's own breakdown at e = 1, g = 1 (so each part is a coefficient),
T (1 - bubble) - comm - optimizer step = F / e + g E is linear in (1/e, g): least squares in relative error.
Also prints leave-one-out errors (fit on three models, predict the fourth).

Usage: python benchmarks/fit_step_korthikanti.py  (prints the TOML lines for hardware/a100-80gb.toml)
"""

from __future__ import annotations

import numpy as np

from costmodel.specs.layout import Layout
from costmodel.specs.load import load_hardware
from costmodel.specs.model import Transformer
from costmodel.specs.recipe import RECIPES
from costmodel.cost.evaluate import evaluate_layout

# Table 3 configurations and Table 5 iteration times (s), present work: SP + selective recompute
TABLE = {  # heads, hidden, layers, tp, pp, gpus, global batch, micro-batch, interleave chunks, measured s
    "22B": (64, 6144, 48, 8, 1, 8, 4, 4, 1, 1.10),
    "175B": (96, 12288, 96, 8, 8, 64, 64, 1, 3, 13.75),
    "530B": (128, 20480, 105, 8, 35, 280, 280, 1, 3, 37.83),
    "1T": (160, 25600, 128, 8, 64, 512, 512, 1, 1, 71.49),
}


def korthikanti_case(name):
    heads, hidden, layers, tp, pp, gpus, batch, micro, chunks, measured = TABLE[name]
    model = Transformer(name=name, hidden=hidden, ffn_hidden=4 * hidden, layers=layers, heads=heads, kv_heads=heads,
                        vocab=51200, tied_embeddings=True, mlp="gelu", norm="layernorm", bias=True,
                        position="learned", max_position=2048, seq_len=2048, dropout=True)
    layout = Layout(tp=tp, pp=pp, sp=True, recompute="selective", flash=False, tokens=micro * 2048,
                    microbatches=batch // micro, schedule="interleaved" if chunks > 1 else "1f1b", chunks=chunks)
    return model, layout, measured


def parts(hardware):
    """(F, E, comm and the optimizer step, bubble, measured) per model with e = 1, g = 1."""
    unit = hardware.model_copy(update={"step_model": hardware.step_model.model_copy(
        update={"matmul_efficiency": 1.0, "matmul_table": None, "elementwise_passes": 1.0})})
    out = {}
    for name in TABLE:
        model, layout, measured = korthikanti_case(name)
        b = evaluate_layout(model, RECIPES["megatron"], layout, unit).step
        out[name] = (b.matmul_s, b.elementwise_s, b.tp_s + b.cp_s + b.p2p_s + b.data_exposed_s + b.optimizer_s, b.bubble,
                     measured)
    return out


def fit(rows):
    a = np.array([[f, e] for f, e, _, _, _ in rows])
    y = np.array([t * (1 - bub) - comm for _, _, comm, bub, t in rows])
    w = 1 / np.array([t for *_, t in rows])
    (inv_e, passes), *_ = np.linalg.lstsq(a * w[:, None], y * w, rcond=None)
    return 1 / inv_e, passes


def predict(row, e, g):
    f, el, comm, bub, _ = row
    return (f / e + g * el) / (1 - bub) + comm


def main():
    data = parts(load_hardware("a100-80gb"))
    e, g = fit(list(data.values()))
    print(f"fitted on all four: matmul_efficiency = {e:.4f}, elementwise_passes = {g:.2f}")
    for name, row in data.items():
        print(f"  {name}: measured {row[-1]:.2f} s, predicted {predict(row, e, g):.2f} s "
              f"({100 * (predict(row, e, g) / row[-1] - 1):+.1f}%)")
    print("leave one out (fit on the other three):")
    for name, row in data.items():
        e_loo, g_loo = fit([r for n, r in data.items() if n != name])
        print(f"  {name}: predicted {predict(row, e_loo, g_loo):.2f} s ({100 * (predict(row, e_loo, g_loo) / row[-1] - 1):+.1f}%)"
              f" with e = {e_loo:.3f}, g = {g_loo:.1f}")


if __name__ == "__main__":
    main()
