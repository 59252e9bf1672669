"""Collectives of the data axis per step: DDP all-reduce, ZeRO-1/2, FSDP (ZeRO-3), HSDP.

Source: Rajbhandari et al. 2020, arXiv:1910.02054, Sec. 7 (2 Psi per step for DP and stages 1-2,
3 Psi for stage 3); Scaling Book training chapter (FSDP: all-gather forward, all-gather +
reduce-scatter backward); Zhao et al. 2023, arXiv:2304.11277 (FSDP, HSDP).
"""

from __future__ import annotations

from costmodel.specs.recipe import Recipe
from costmodel.strategies.collective import Collective
from costmodel.strategies.data import gather_dtype_bytes


def data_collectives(*, params, recipe: Recipe, zero_stage: int, fsdp, dp, layers, root_params=0,
                     reshard_after_forward: bool = True, has_fsdp: bool, has_dp: bool) -> list[Collective]:
    """Collectives one device joins on the data axis in one step.

    ``params`` is this device's share before data-axis sharding, of which ``root_params`` sit outside
    the ``layers`` blocks (embeddings, final norm, output layer). FSDP wraps each block (one
    all-gather / reduce-scatter per block) and the root; the root keeps its weights gathered from
    forward to backward (FSDP2's default heuristic for the root module, torch 2.13 _fsdp_state.py).
    ``has_fsdp``/``has_dp`` say which axes exist, so that symbolic degrees keep the same structure.
    """
    grads = recipe.grad_comm_bytes * params
    if not has_fsdp or zero_stage == 0:
        if not (has_dp or has_fsdp):
            return []
        return [Collective("all-reduce", "data", "gradients", "backward", dp * fsdp, 1, grads)]
    out = []
    if zero_stage == 3:
        out += _fsdp_unit("blocks", params - root_params, layers, recipe, fsdp, reshard_after_forward)
        if root_params:
            out += _fsdp_unit("root: embeddings, norm, output", root_params, 1, recipe, fsdp, False)
    else:
        out.append(Collective("reduce-scatter", "fsdp", "gradients", "backward", fsdp, 1, grads))
        out.append(Collective("all-gather", "fsdp", "updated weights", "optimizer", fsdp, 1,
                              gather_dtype_bytes(recipe, zero_stage) * params))
    if has_dp:  # HSDP: replicas all-reduce the gradient shard
        out.append(Collective("all-reduce", "dp", "gradient shards", "backward", dp, 1, grads / fsdp))
    return out


def _fsdp_unit(what: str, params, units, recipe: Recipe, fsdp, reshard: bool) -> list[Collective]:
    """One FSDP unit type (``units`` of them): gather forward, again in backward if resharded, reduce-scatter."""
    gathered = recipe.compute_bytes * params / units
    out = [Collective("all-gather", "fsdp", f"weights ({what})", "forward", fsdp, units, gathered)]
    if reshard:
        out.append(Collective("all-gather", "fsdp", f"weights again ({what})", "backward", fsdp, units, gathered))
    out.append(Collective("reduce-scatter", "fsdp", f"gradients ({what})", "backward", fsdp, units,
                          recipe.grad_comm_bytes * params / units))
    return out
