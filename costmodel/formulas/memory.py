"""Bytes held per device, one component per function."""

from __future__ import annotations


def state_bytes_per_device(*, params, bytes_per_param, shards):
    """Persistent state of one kind (weights, master, grads or optimizer): b P / N.

    Source: Rajbhandari et al. 2020, arXiv:1910.02054, Sec. 5 (each ZeRO stage divides one kind
    of state by N_d); N = 1 for state a stage leaves replicated.
    """
    return bytes_per_param * params / shards


def sharded_activation_bytes_per_device(*, activation_bytes, fraction, shards):
    """Activations with a fraction f sharded over N devices: A f / N + A (1 - f).

    Source: CS336 A2 communication_accounting (b): "half of your activations (in practice every
    second layer) are sharded across N_FSDP devices", i.e. f = 1/2.
    """
    return activation_bytes * fraction / shards + activation_bytes * (1 - fraction)


def ffn_activation_elements_per_token(*, d_model, d_ff, layers, gated=False, activation="none", tp=1, sp=False):
    """Elements saved for backward per token by the FFN stack: L (D' + F (1 + s_act + 2 g) / t).

    Per block, autograd keeps: the block input (D, read by the first matmul(s); D/t with sequence
    parallel), the input of the last matmul (F), the nonlinearity's input when its backward needs it
    (GeLU, SiLU: +F; ReLU saves its output, which is the F already counted), and with a gate the two
    factors of the elementwise product (+2F). F-sized tensors are split over the t TP ranks.
    Source: the backward formulas of torch autograd (derivatives.yaml: mm saves both operands, gelu
    and silu save self, relu saves result, mul saves both factors); checked in tests/test_torch_ffn.py.
    """
    saves_input = 1 if activation in ("gelu", "silu") else 0
    block_input = d_model / tp if sp else d_model
    return layers * (block_input + d_ff * (1 + saves_input + (2 if gated else 0)) / tp)


def autocast_input_cast_elements_per_token(*, d_model, gated=False):
    """Extra copies of the stack's input under autocast: autocast casts an fp32 input once per
    matmul that reads it, so a gated first block keeps two bf16 copies of it: g D.
    """
    return d_model if gated else 0


def autocast_weight_copy_bytes(*, params, compute_bytes, unsaved_params=0):
    """bf16 weight copies autocast makes and autograd saves: b_c (P - P_unsaved).

    torch autocast casts each fp32 weight to bf16 at use; the matmul saves that copy to compute the
    input gradient. Weights whose input needs no gradient (the first layer of a stack fed with
    data) are not saved. Under FSDP the gathered copy is freed after forward instead.
    Source: shared/reference/conventions.md ("Under torch autocast without FSDP ..."); torch
    derivatives.yaml (mm saves mat2 only when self requires grad).
    """
    return compute_bytes * (params - unsaved_params)


def pipelined_fsdp_grad_bytes(*, params, reduce_bytes):
    """FSDP2 inside torch's pipeline stages: no gradient sync until the last micro-batch's backward, so the stage's
    gradients accumulate unsharded, in the reduce dtype: b_r P (torch 2.13 distributed/pipelining/stage.py
    backward_one_chunk: set_requires_gradient_sync(False); _fully_shard/_fsdp_param.py
    to_accumulated_grad_if_needed, accumulate_unsharded_grad_if_needed) beside the shard's b_g P / N (held from an
    earlier schedule step under gradient accumulation; freed before the optimizer step, which sees the shard)."""
    return reduce_bytes * params
