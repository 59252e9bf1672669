"""The tensor axis: Megatron column/row split of every block, with or without sequence parallelism,
and the model's ends (vocabulary-parallel or replicated embedding and output layer).

Sharding: :mod:`.params` (what one TP rank holds); traffic: :mod:`.collectives`; rules: :func:`checks`.
"""

from costmodel.parallel.collective import Rule
from costmodel.parallel.tensor.collectives import collectives
from costmodel.parallel.tensor.params import stage_params_per_device

NAME = "tp"


def _divides(tp, size, flag: str, what: str) -> Rule:
    return Rule(size % tp == 0, lambda: f"{flag} {tp} does not divide {what} = {size:,}")


def checks(shape, point) -> list[Rule]:
    """Every width the split cuts must divide by t; with SP, the tokens too."""
    tp = point.tp
    if shape.attention:
        rules = [_divides(tp, shape.heads, "--tp", "the attention heads"),
                 _divides(tp, shape.kv_heads, "--tp", "the KV heads"),
                 _divides(tp, shape.mlp_width, "--tp", "the MLP hidden size (F)")]
    else:
        rules = [_divides(tp, shape.mlp_width, "--tp", "d_ff (F)")]
        if point.sp:
            rules.append(_divides(tp, shape.width, "--tp", "d_model (D), split by --sp"))
    if point.sp:
        rules.append(Rule(point.tokens % tp == 0,
                          lambda: f"--tp {tp} with --sp does not divide --tokens {point.tokens}"))
    return rules


__all__ = ["NAME", "checks", "collectives", "stage_params_per_device"]
