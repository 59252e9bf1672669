"""The tensor axis: Megatron column/row split of every block, with or without sequence parallelism,
and the model's ends (vocabulary-parallel or replicated embedding and output layer).

Sharding: :mod:`.params` (what one TP rank holds); traffic: :mod:`.collectives`; rules: :func:`checks`.
"""

from dataclasses import replace

from costmodel.mathops import ceil_div, divides, either, exact_div
from costmodel.parallel.collective import Rule
from costmodel.parallel.tensor.collectives import collectives, column_row_pairs
from costmodel.parallel.tensor.params import (block_params_per_device, block_vector_params_per_device,
                                              stage_params_per_device, vocab_rows_per_device)

NAME = "tp"


def _divides(tp, size, flag: str, what: str) -> Rule:
    return Rule(divides(tp, size), lambda: f"{flag} {tp} does not divide {what} = {size:,}")


def kv_heads_per_rank(shape, point):
    """KV heads one TP rank holds: k / t, or with ``--tp-kv replicate`` and t > k one (a copy of the
    head its query heads read; vLLM's and TensorRT-LLM's rule for GQA under wide TP)."""
    if point.tp_kv == "replicate":
        return ceil_div(shape.kv_heads, point.tp)
    return exact_div(shape.kv_heads, point.tp)


def as_held(shape, point):
    """The model as the TP group holds it: with replicated KV heads, t copies of each rank's heads
    (k' = t ceil(k / t)), so that every per-rank quantity divided by t counts them; else the model."""
    if not shape.attention or point.tp_kv != "replicate":
        return shape
    return replace(shape, kv_heads=kv_heads_per_rank(shape, point) * point.tp)


def checks(shape, point) -> list[Rule]:
    """Every width the split cuts must divide by t; with SP, the tokens too."""
    tp = point.tp
    if shape.attention:
        kv = Rule(divides(tp, shape.kv_heads),
                  lambda: f"--tp {tp} does not divide the KV heads = {shape.kv_heads:,}" + (
                      " (--tp-kv replicate keeps a copy of a KV head on each rank that reads it)"
                      if tp % shape.kv_heads == 0 else ""))
        if point.tp_kv == "replicate":
            kv = Rule(either(divides(tp, shape.kv_heads), divides(shape.kv_heads, tp)),
                      lambda: f"--tp {tp} with --tp-kv replicate needs --tp to divide or be a multiple of the "
                      f"KV heads = {shape.kv_heads:,}")
        rules = [_divides(tp, shape.heads, "--tp", "the attention heads"), kv,
                 _divides(tp, shape.mlp_width, "--tp", "the MLP hidden size (F)")]
    else:
        rules = [_divides(tp, shape.mlp_width, "--tp", "d_ff (F)")]
        if point.sp:
            rules.append(_divides(tp, shape.width, "--tp", "d_model (D), split by --sp"))
    if point.sp:
        rules.append(Rule(divides(tp, point.tokens),
                          lambda: f"--tp {tp} with --sp does not divide --tokens {point.tokens}"))
    return rules


__all__ = ["NAME", "as_held", "block_params_per_device", "block_vector_params_per_device", "checks", "collectives",
           "column_row_pairs",
           "kv_heads_per_rank", "stage_params_per_device", "vocab_rows_per_device"]
