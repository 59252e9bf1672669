"""cost4d step against PaLM 540B on 6144 TPU v4 chips (Chowdhery et al. 2022, arXiv:2204.02311): a held-out check.

    python benchmarks/check_step_palm.py

Nothing in the TPU v4 step model is fitted to a TPU run (hardware/tpu-v4.toml). PaLM's Table 3 reports the
540B model's training at 46.2% MFU (57.8% with rematerialisation's FLOPs, HFU) on 6144 TPU v4 chips. Its
layout (Sec. 4 and 5): two pods of 3072 chips; in each pod 12-way model parallelism (multi-query attention:
one KV head, kept whole on every model-parallel rank) and 256-way data parallelism with the state fully
sharded over it ("2D finalized parameter sharding"); the pods are data parallel over the data-centre
network; batch 2048 sequences of 2048 tokens; rematerialisation of the layers' forward in backward (taken
here as full recomputation, which reruns more than PaLM's: its HFU / MFU is 1.25, full recomputation's 1.33);
parallel attention + MLP blocks (the built-in palm-540b); the megatron recipe (bf16 compute, fp32 master
weights and optimizer state). The same from the command line:

    cost4d step --model palm-540b --hardware tpu-v4 --tp 12 --tp-kv replicate --fsdp 256 --dp 2 --zero 3 \
        --tokens 8192 --recompute full --recipe megatron
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from costmodel.cost.evaluate import evaluate_layout  # noqa: E402
from costmodel.specs.layout import Layout  # noqa: E402
from costmodel.specs.load import load_hardware, load_model, load_recipe  # noqa: E402

MEASURED_MFU = 0.462  # Chowdhery et al. 2022, Table 3 (PaLM 540B, 6144 TPU v4)
MEASURED_HFU = 0.578  # the same table, with rematerialisation's FLOPs
SEQUENCES_PER_REPLICA = 2048 // 512  # batch 2048 over 2 pods x 256 data-parallel ranks


def palm_case():
    """(model, recipe, layout, hardware) of PaLM 540B's training as cost4d expresses it."""
    layout = Layout(tp=12, tp_kv="replicate", fsdp=256, dp=2, zero=3, tokens=SEQUENCES_PER_REPLICA * 2048,
                    recompute="full")
    return load_model("palm-540b"), load_recipe("megatron"), layout, load_hardware("tpu-v4")


def predicted():
    """cost4d's StepTime for the case."""
    model, recipe, layout, hardware = palm_case()
    return evaluate_layout(model, recipe, layout, hardware).step


def main() -> None:
    step = predicted()
    mfu, hfu = step.mfu_with("full"), step.hfu
    print(f"PaLM 540B on 6144 x tpu-v4: predicted MFU {mfu:.1%} (measured {MEASURED_MFU:.1%}, "
          f"{mfu / MEASURED_MFU - 1:+.1%}); HFU {hfu:.1%} (measured {MEASURED_HFU:.1%})")
    print(f"step {step.step_s:.2f} s for {step.global_tokens:,} tokens")
    low, high = printed_mfu_range(step)
    print(f"printed range as MFU: {low:.1%} - {high:.1%}: measured {'inside' if low <= MEASURED_MFU <= high else 'outside'}")


def printed_mfu_range(step):
    """The step range `step` prints (cost.step_range.band), as MFU: (lowest, highest)."""
    from costmodel.cost.step_range import band

    fast, slow = band(step, palm_case()[3])
    mfu = step.mfu_with("full")
    return mfu * step.step_s / slow, mfu * step.step_s / fast


if __name__ == "__main__":
    main()
