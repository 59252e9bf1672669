"""Which state the data axis shards (ZeRO stages) and in which dtype it gathers weights."""

from __future__ import annotations

from costmodel.mathops import above_one, both, either, negation
from costmodel.parallel.collective import Rule

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


def fsdp_casts_module(zero: int, fsdp, cp):
    """Where FSDP2's MixedPrecisionPolicy runs the module in the compute dtype, as torchtitan applies it
    (distributed/utils.py maybe_enable_amp, parallel_dims.fsdp_enabled): the data axis shards weights (ZeRO-3
    over fsdp > 1) or CP is on (torchtitan shards over the data and CP ranks together). A bool, or per element
    for arrays."""
    return either(fsdp_active(zero, fsdp), above_one(cp))


def fsdp_in_pipeline(point):
    """Whether FSDP shards weights inside pipeline stages (ZeRO-3 over more than one shard, pp > 1; the shards of
    the point's data-axis view, Point.sharding), where torch's stages sync gradients once per step
    (parallel/data/collectives.py). A bool, or per element for arrays."""
    return both(fsdp_active(point.zero, point.sharding.fsdp), above_one(point.pp))


def runs_autocast(recipe, point):
    """Whether the model runs under torch.autocast (fp32 residual stream, a bf16 cast per matmul): a
    recipe with transient compute weights, unless FSDP2's MixedPrecisionPolicy gathers them (``casts``
    fsdp) where :func:`fsdp_casts_module`, the module then running in the compute dtype. A bool, or per
    element for arrays."""
    if not recipe.autocast:
        return False
    if recipe.casts == "autocast":
        return True
    return negation(fsdp_casts_module(point.zero, point.fsdp, point.cp))


def precision_rules(recipe, point) -> list:
    """FSDP2's policy without FSDP or CP under TP or PP: torchtitan turns mixed precision off there and trains
    in fp32 (maybe_enable_amp: 'Mixed precision training with TP or PP is only supported when FSDP/HSDP/CP is
    enabled'), which cost4d does not model."""
    if not (recipe.autocast and recipe.casts == "fsdp"):
        return []
    split = either(above_one(point.tp), above_one(point.pp))
    ok = either(fsdp_casts_module(point.zero, point.fsdp, point.cp), negation(split))
    return [Rule(ok, lambda: f"--recipe {recipe.name} (FSDP2's policy) with --tp {point.tp} / --pp {point.pp} and no "
                 "FSDP (--fsdp > 1 at ZeRO-3) or CP: torchtitan trains in fp32 there (maybe_enable_amp), which is not "
                 "modelled; shard with --fsdp or use another --recipe")]


def gather_dtype_bytes(recipe, zero: int) -> int:
    """Bytes per parameter all-gathered on the data axis.

    FSDP gathers weights in the compute dtype (FSDP2 MixedPrecisionPolicy param_dtype). ZeRO-1/2
    gather the updated parameters: the kept low-precision copy if there is one, else the master.
    """
    if zero >= 3 or recipe.compute_weights == "persistent":
        return recipe.compute_bytes
    return recipe.master_bytes
