"""torchtitan's per-op selective activation checkpointing policy, as written in
pytorch/torchtitan torchtitan/distributed/activation_checkpoint.py (``_save_list``, ``_custom_policy``,
``selective_checkpointing_context_fn``), for torch.utils.checkpoint(use_reentrant=False, context_fn=...).

On CPU SDPA runs ``_scaled_dot_product_flash_attention_for_cpu``, which the save list gains in place of the CUDA
flash/cuDNN kernels (same outputs: the attention output and the fp32 log-sum-exp).
"""

from __future__ import annotations

from collections import defaultdict

import torch
from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts

#: torchtitan's save list (the ops of its _save_list that exist on CPU) and the CPU SDPA kernel
SAVE = {torch.ops.aten.mm.default, torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default,
        torch.ops.aten._scaled_dot_product_flash_attention.default,  # CUDA's flash op (the CP test runs it on CPU)
        torch.ops._c10d_functional.reduce_scatter_tensor.default, torch.ops.aten.max.default}


def context_fn():
    """torchtitan's selective_checkpointing_context_fn: a fresh mm count per checkpointed block call."""
    meta = defaultdict(int)

    def _custom_policy(ctx, func, *args, **kwargs):
        mode = "recompute" if ctx.is_recompute else "forward"
        mm_count_key = f"{mode}_mm_count"
        if func == torch.ops.aten.mm.default:
            meta[mm_count_key] += 1
        # Saves output of all compute ops, except every second mm
        to_save = func in SAVE and not (func == torch.ops.aten.mm.default and meta[mm_count_key] % 2 == 0)
        return CheckpointPolicy.MUST_SAVE if to_save else CheckpointPolicy.PREFER_RECOMPUTE

    return create_selective_checkpoint_contexts(_custom_policy)
