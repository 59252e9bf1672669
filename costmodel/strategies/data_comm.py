"""Collectives of the data axis per step: DDP all-reduce, ZeRO-1/2, FSDP (ZeRO-3), HSDP.

Source: Rajbhandari et al. 2020, arXiv:1910.02054, Sec. 7 (2 Psi per step for DP and stages 1-2,
3 Psi for stage 3); Scaling Book training chapter (FSDP: all-gather forward, all-gather +
reduce-scatter backward); Zhao et al. 2023, arXiv:2304.11277 (FSDP, HSDP).
"""

from __future__ import annotations

from costmodel.specs.recipe import Recipe
from costmodel.strategies.collective import Collective
from costmodel.strategies.data import gather_dtype_bytes


def data_collectives(*, params, recipe: Recipe, zero_stage: int, fsdp, dp, layers,
                     reshard_after_forward: bool = True, has_fsdp: bool, has_dp: bool) -> list[Collective]:
    """Collectives one device joins on the data axis in one step.

    ``params`` is this device's share before data-axis sharding; ``layers`` the blocks FSDP
    wraps one by one (one all-gather / reduce-scatter per block). ``has_fsdp``/``has_dp`` say
    which axes exist (degree > 1), so that symbolic degrees keep the same structure.
    """
    grads = recipe.grad_comm_bytes * params
    if not has_fsdp or zero_stage == 0:
        if not (has_dp or has_fsdp):
            return []
        group = dp * fsdp
        return [Collective("all-reduce", "data", "gradients", "backward", group, 1, grads)]
    out = []
    if zero_stage == 3:
        gathered = recipe.compute_bytes * params
        out.append(Collective("all-gather", "fsdp", "weights", "forward", fsdp, layers, gathered / layers))
        if reshard_after_forward:
            out.append(Collective("all-gather", "fsdp", "weights again", "backward", fsdp, layers, gathered / layers))
        out.append(Collective("reduce-scatter", "fsdp", "gradients", "backward", fsdp, layers, grads / layers))
    else:
        out.append(Collective("reduce-scatter", "fsdp", "gradients", "backward", fsdp, 1, grads))
        out.append(Collective("all-gather", "fsdp", "updated weights", "optimizer", fsdp, 1,
                              gather_dtype_bytes(recipe, zero_stage) * params))
    if has_dp:  # HSDP: replicas all-reduce the gradient shard
        out.append(Collective("all-reduce", "dp", "gradient shards", "backward", dp, 1, grads / fsdp))
    return out
