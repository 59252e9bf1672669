"""The data axis: DDP, ZeRO stages 1-3 and FSDP: which state each shards, and what it sends."""

from __future__ import annotations

from costmodel.specs.recipe import Recipe

#: Lowest ZeRO stage that shards each kind of state (Rajbhandari et al. 2020, Sec. 5:
#: P_os shards optimizer state, P_os+g adds gradients, P_os+g+p adds parameters).
_FIRST_SHARDING_STAGE = {"weights": 3, "grads": 2, "optimizer": 1}


def first_sharding_stage(component: str, recipe: Recipe) -> int:
    """ZeRO stage from which ``component`` is sharded.

    fp32 master weights belong to the optimizer (stage 1) when the model keeps its own
    low-precision weights; when autocast computes from them directly they are the parameters,
    sharded only at stage 3 (FSDP).
    """
    if component == "master_weights":
        return 1 if recipe.compute_weights == "persistent" else 3
    return _FIRST_SHARDING_STAGE[component]


def shards(component: str, recipe: Recipe, zero_stage: int, fsdp):
    """N_FSDP if ZeRO stage ``zero_stage`` shards ``component``, else 1."""
    return fsdp if zero_stage >= first_sharding_stage(component, recipe) else 1


def gather_dtype_bytes(recipe: Recipe, zero_stage: int) -> int:
    """Bytes per parameter all-gathered on the data axis.

    FSDP gathers weights in the compute dtype (FSDP2 MixedPrecisionPolicy param_dtype). ZeRO-1/2
    gather the updated parameters: the kept low-precision copy if there is one, else the master.
    """
    if zero_stage >= 3 or recipe.compute_weights == "persistent":
        return recipe.compute_bytes
    return recipe.master_bytes
