"""torchtitan's per-op checkpointing (``--recompute op``) of a :class:`~costmodel.cost.shape.Shape`'s block: its
matmuls in forward order, what a block keeps and what it reruns (formulas/op_checkpoint.py).

``Shape`` inherits these methods. They cover what the policy was measured on: a dense sequential block of
bias-free projections (q, k, v or one fused QKV; the output projection; gate and up, one fused gate-up or one
GeLU up-projection; down) with SDPA attention; :func:`rules` refuses the rest.
"""

from __future__ import annotations

from costmodel.formulas import op_checkpoint as oc
from costmodel.mathops import above_one, either, where
from costmodel.parallel.collective import Rule
from costmodel.parallel.context import TORCH_KINDS


class OpCheckpoint:
    """Shape's per-quantity methods of torchtitan's op policy (the fields are Shape's)."""

    def block_matmuls(self) -> list[tuple]:
        """(input width, output width, row-parallel) of a dense sequential block's matmuls in forward order."""
        d, f = self.width, self.mlp_width
        q, kv = self.heads * self.head_dim, self.kv_heads * self.head_dim
        attention = [(d, q + 2 * kv, False)] if self.fused else [(d, q, False), (d, kv, False), (d, kv, False)]
        if not self.gated:
            up = [(d, f, False)]
        else:
            up = [(d, 2 * f, False)] if self.fused else [(d, f, False), (d, f, False)]
        return attention + [(q, d, True)] + up + [(f, d, True)]

    def op_layer_bytes_per_token(self, *, act_bytes, residual_bytes, tp, sp: bool):
        """What one block keeps per token on a rank: column-parallel outputs split t ways, row-parallel ones whole
        (partial sums before their reduction); attention's output and log-sum-exp split t ways; under SP the
        input and each row-parallel output's reduce-scatter result split t ways."""
        matmuls = self.block_matmuls()
        outputs = [act_bytes * (out if row else out / tp) for _, out, row in matmuls]
        scattered = act_bytes * self.width / tp * sum(1 for *_, row in matmuls if row)
        return oc.layer_bytes_per_token(
            layer_input=residual_bytes * self.width / (tp if sp else 1), matmul_outputs=outputs,
            attention=(act_bytes * self.heads * self.head_dim + 4 * self.heads) / tp,
            reduce_scatters=where(above_one(tp), scattered, 0) if sp else 0)

    def op_rerun_flops_per_token(self, stops_early: bool):
        """Forward FLOPs one block reruns per token (2 in x out per matmul rerun); ``stops_early``: torch's early
        stop (--checkpoint non-reentrant), else the rerun goes to the block's end (torchtitan's early_stop off)."""
        return oc.rerun_matmul_flops([2 * i * o for i, o, _ in self.block_matmuls()], stops_early=stops_early)


def unmodelled_block(shape) -> str | None:
    """What keeps ``--recompute op`` from a model's block (None: a dense sequential block of bias-free matmuls)."""
    if not shape.attention:
        return "an FFN stack (no transformer block)"
    if shape.moe or shape.mla:
        return "mixture-of-experts layers" if shape.moe else "latent attention (MLA)"
    if shape.block != "sequential":
        return f"a {shape.block} block"
    if shape.bias or shape.qkv_bias or shape.out_bias or shape.mlp_bias:
        return "biased projections (aten.addmm, not counted by the policy)"
    return None


def rules(shape, point) -> list:
    """``--recompute op`` needs the block it was measured on and attention on its save list."""
    if point.recompute != "op":
        return []
    why = unmodelled_block(shape)
    out = [Rule(why is None, lambda: f"--recompute op (torchtitan's per-op policy) is modelled for dense sequential "
                f"Llama-style blocks; {shape.name} has {why} (use none, selective, full or every:K)")]
    out.append(Rule(bool(point.flash), lambda: "--recompute op saves the SDPA kernel's output; math attention "
                    "(--no-flash) reruns its matmuls and softmax under it, which is not modelled"))
    out.append(Rule(either(point.cp <= 1, point.cp_kind in TORCH_KINDS),
                    lambda: f"--recompute op with --cp {point.cp} --cp-kind {point.cp_kind}: the policy saves the SDPA op "
                    "whole, which holds torch's ring attention (allgather, alltoall) but not this kind's traffic; "
                    "not modelled"))
    return out
