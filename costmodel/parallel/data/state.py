"""Which state the data axis shards (ZeRO stages) and in which dtype it gathers weights."""

from __future__ import annotations

from costmodel.mathops import above_one

#: Lowest ZeRO stage that shards each kind of state (Rajbhandari et al. 2020, arXiv:1910.02054, Sec. 5:
#: P_os shards optimizer state, P_os+g adds gradients, P_os+g+p adds parameters).
_FIRST_SHARDING_STAGE = {"weights": 3, "grads": 2, "optimizer": 1}


def first_sharding_stage(component: str, recipe) -> int:
    """ZeRO stage from which ``component`` is sharded.

    fp32 master weights belong to the optimizer (stage 1) when the model keeps its own
    low-precision weights; when autocast computes from them directly they are the parameters,
    sharded only at stage 3 (FSDP).
    """
    if component == "master_weights":
        return 1 if recipe.compute_weights == "persistent" else 3
    return _FIRST_SHARDING_STAGE[component]


def shards(component: str, recipe, zero: int, fsdp):
    """N if ZeRO stage ``zero`` shards ``component``, else 1 (N = 1 shards nothing either way)."""
    return fsdp if zero >= first_sharding_stage(component, recipe) else 1


def fsdp_active(zero: int, fsdp):
    """Whether weights are sharded and gathered per use (ZeRO-3 over more than one device)."""
    return above_one(fsdp) if zero >= 3 else False


def runs_autocast(recipe, zero: int, fsdp):
    """Whether the model runs under torch.autocast (fp32 residual stream, a bf16 cast per matmul): a
    recipe with transient compute weights, unless FSDP2's MixedPrecisionPolicy gathers them (``casts``
    fsdp) where the data axis shards weights, the module then running in the compute dtype. A bool, or
    per element for arrays of shard counts."""
    if not recipe.autocast:
        return False
    if recipe.casts == "autocast":
        return True
    active = fsdp_active(zero, fsdp)
    return ~active if hasattr(active, "dtype") else not bool(active)


def gather_dtype_bytes(recipe, zero: int) -> int:
    """Bytes per parameter all-gathered on the data axis.

    FSDP gathers weights in the compute dtype (FSDP2 MixedPrecisionPolicy param_dtype). ZeRO-1/2
    gather the updated parameters: the kept low-precision copy if there is one, else the master.
    """
    if zero >= 3 or recipe.compute_weights == "persistent":
        return recipe.compute_bytes
    return recipe.master_bytes
