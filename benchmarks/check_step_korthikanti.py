"""cost4d step against Korthikanti et al. 2022 (arXiv:2205.05198) Table 5 on the shipped A100 spec: a held-out check.

Nothing in hardware/a100-80gb.toml's step model is fitted to these runs (a measured single GEMM kernel, h100-sxm's
fitted step fraction, the memory-bound ops counted op by op at a measured stream kernel's bandwidth), so the
errors printed are predictions, not residuals.

Usage: python benchmarks/check_step_korthikanti.py
"""

from __future__ import annotations

from costmodel.cost.evaluate import evaluate_layout
from costmodel.specs.layout import Layout
from costmodel.specs.load import load_hardware
from costmodel.specs.model import Transformer
from costmodel.specs.recipe import RECIPES

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


def errors(hardware) -> dict:
    """Predicted / measured - 1 per model."""
    out = {}
    for name in TABLE:
        model, layout, measured = korthikanti_case(name)
        out[name] = evaluate_layout(model, RECIPES["megatron"], layout, hardware).step.step_s / measured - 1
    return out


def printed_ranges(hardware) -> dict:
    """The range `step` prints for each model (cost.step_range.band): (low, high) seconds."""
    from costmodel.cost.step_range import band

    out = {}
    for name in TABLE:
        model, layout, _ = korthikanti_case(name)
        out[name] = band(evaluate_layout(model, RECIPES["megatron"], layout, hardware).step, hardware)
    return out


def main():
    a100 = load_hardware("a100-80gb")
    ranges = printed_ranges(a100)
    for name, error in errors(a100).items():
        (low, high), measured = ranges[name], TABLE[name][-1]
        print(f"  {name}: measured {measured:.2f} s, predicted {(1 + error) * measured:.2f} s ({error:+.1%}); "
              f"printed range {low:.2f} - {high:.2f} s: measured {'inside' if low <= measured <= high else 'outside'}")


if __name__ == "__main__":
    main()
