"""torchtitan's per-op selective activation checkpointing (``--recompute op``): what a block keeps and reruns.

Source: pytorch/torchtitan@238fa995 torchtitan/distributed/activation_checkpoint.py, ``_custom_policy`` (the
save list and the every-second-mm rule as there; other versions name ops differently and save more kernels).
Each transformer block runs under torch.utils.checkpoint (non-reentrant) with a selective-checkpoint policy: the
outputs of the ops on its save list (aten.mm, the SDPA kernels, _c10d_functional.reduce_scatter_tensor, aten.max)
are kept (MUST_SAVE), except the output of every second mm of the block (``mm_count % 2 == 0``); every other op
reruns in backward (PREFER_RECOMPUTE), from the block input the checkpoint holds. With torch's early stop (its
default) the rerun ends once every tensor backward needs exists again, so a block's last matmul, whose output only
feeds the residual add, does not rerun; torchtitan turns early stop off (config/job_config.py
ActivationCheckpoint.early_stop = False), so the rerun goes to the block's end. Measured on CPU in
tests/test_torch_op_checkpoint.py (saved bytes with a live-storage count, rerun FLOPs with an mm counter in
backward, both ways).

Numbers, numpy arrays and sympy letters alike; the lists are a block's matmuls in forward order.
"""

from __future__ import annotations


def kept_matmul_outputs(outputs):
    """Bytes per token the policy keeps of a block's matmul outputs (``outputs`` in forward order): the 1st,
    3rd, 5th, ... (a running count whose even values rerun). Llama's q, k, v, o, gate, up, down keep q, v,
    gate and down."""
    return sum(outputs[0::2])


def rerun_matmul_flops(flops, *, stops_early: bool):
    """FLOPs per token of the matmuls a block reruns in backward (``flops`` in forward order): the 2nd, 4th, ...,
    the last among them only without an early stop. Llama's q, k, v, o, gate, up, down rerun k, o and up either
    way; a fused qkv, o, gate-up, down reruns o, and down too without an early stop."""
    return sum((flops[:-1] if stops_early else flops)[1::2])


def layer_bytes_per_token(*, layer_input, matmul_outputs, attention, reduce_scatters=0):
    """What one block keeps per token: its input (held by the checkpoint), the kept matmul outputs
    (:func:`kept_matmul_outputs`), attention's output and fp32 log-sum-exp (flash/cuDNN SDPA: b_a a d_h + 4 a),
    and under sequence parallelism each row-parallel output's reduce-scatter result (b_a D / t each); every
    width already split over TP as the rank holds it."""
    return layer_input + kept_matmul_outputs(matmul_outputs) + attention + reduce_scatters
