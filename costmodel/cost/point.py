"""A layout as the aggregator reads it: degrees that are numbers, numpy arrays or sympy symbols.

Structure (ZeRO stage, SP, recompute policy, schedule, CP kind, model ends, ...) stays Python
values: the wiring branches on it. Quantities (degrees, tokens, micro-batches) may be numbers (one
layout, the CLI), arrays (one element per layout, the planner) or letters (the printed formula).
"""

from __future__ import annotations

from dataclasses import fields, replace
from functools import cached_property

from costmodel.inputs.placement import DEFAULT_PLACEMENT
from costmodel.mathops import exact_fraction, letter
from costmodel.record import record

#: the letters of the symbolic view, by field (Scaling Book: N, Y, B; R for DP replicas)
LETTERS = {"fsdp": "N", "dp": "R", "tp": "Y", "pp": "p", "cp": "c", "ep": "E_p", "etp": "Y_e", "tokens": "B", "microbatches": "m",
           "chunks": "v", "grad_accum": "k_a", "mx": "M_X", "my": "M_Y", "recompute_layers": "K"}
QUANTITIES = tuple(LETTERS)


@record
class Point:
    """One layout (or a grid of them) with every quantity explicit."""

    # quantities: numbers, arrays or symbols
    dp: object = 1
    fsdp: object = 1
    tp: object = 1
    pp: object = 1
    cp: object = 1
    ep: object = 1  # experts spread over ep devices of the data axis
    etp: object = None  # expert TP: each routed expert split over etp of the tp ranks (None: all of them)
    tokens: object = 0  # one replica's micro-batch x sequence
    microbatches: object = 1  # m
    chunks: object = 1  # v
    grad_accum: object = 1
    mx: object = 1
    my: object = 1
    recompute_layers: object = 1
    shard_activations: object = 0
    # structure: Python values
    zero: int = 3
    sp: bool = False
    recompute: str = "none"
    flash: bool = True
    eager: bool = False  # Hugging Face eager attention: K, V repeated to all heads, fp32 softmax
    checkpoint: str = "reentrant"  # full recompute: rerun the whole layer, or stop early (non-reentrant)
    norm_stats: bool = True
    schedule: str = "1f1b"
    split: str = "even"  # layers over pipeline stages: even, ends (L + 2 slots) or compute-balanced
    cp_kind: str = "ring"
    tp_ends: str = "vocab-parallel"
    tp_kv: str = "split"  # KV heads under TP: split over t, or replicated when t exceeds them
    reshard_after_forward: bool = True
    zero1_reduce: str = "reduce-scatter"  # ZeRO-1's gradient reduction (a framework's: nanotron all-reduces)
    cp_in_data: bool = False  # the data axis shards and reduces over its ranks and the CP ranks together (a framework's)
    fused_swiglu: bool = False  # SwiGLU saves its input only, SiLU recomputed in backward (a framework's: Megatron-core)
    moe_imbalance: float = 1.0  # the busiest EP rank's routed tokens / the even share (dropless)
    placement: str = DEFAULT_PLACEMENT  # GPUs: the order the axes fill the network, innermost first
    document: int | None = None  # tokens per document when attention is masked to documents (None: the sequence)

    @classmethod
    def of(cls, layout) -> "Point":
        """The point of one validated :class:`~costmodel.specs.layout.Layout`."""
        values = {f.name: getattr(layout, f.name) for f in fields(cls)
                  if f.name not in ("microbatches", "split", "zero1_reduce", "cp_in_data", "cp_kind", "fused_swiglu")}
        return cls(microbatches=layout.m, split=layout.split or "even", cp_kind=layout.cp_kind or "ring", **values)

    def symbolic(self) -> "Point":
        """Letters for every quantity that is not trivial (1; 0 tokens); the activation fraction exact."""
        return replace(self, shard_activations=exact_fraction(self.shard_activations),
                       moe_imbalance=exact_fraction(self.moe_imbalance),
                       **{name: letter(LETTERS[name]) for name in self.values()})

    def values(self) -> dict:
        """Field -> value of this numeric point for each quantity :meth:`symbolic` writes as a letter."""
        trivial = {"tokens": 0}
        return {name: getattr(self, name) for name in QUANTITIES
                if getattr(self, name) is not None and not _is_literal(getattr(self, name), trivial.get(name, 1))}

    @cached_property
    def data(self):
        """X: the whole data axis, dp x fsdp."""
        return self.dp * self.fsdp

    @cached_property
    def sharding(self) -> "Point":
        """The point the data axis sees. Where the framework shards and reduces over the data and CP ranks together
        (``cp_in_data``: torchtitan's dp_shard x cp FSDP mesh, Megatron-core's dp x cp gradient buffers and
        distributed optimizer), the c CP ranks are further shards of it: fsdp x cp shards, placed as one group
        right outside tp (cp sits directly inside the data axis in both frameworks' meshes), and no CP gradient
        reduction of their own. Else this point."""
        if not self.cp_in_data:
            return self
        return replace(self, fsdp=self.fsdp * self.cp, cp=1, cp_in_data=False)

    @cached_property
    def devices(self):
        return self.dp * self.fsdp * self.tp * self.pp * self.cp

    @cached_property
    def micro_steps(self):
        """Forward-backward passes per optimizer step: grad_accum x m."""
        return self.grad_accum * self.microbatches


def _is_literal(value, literal) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value == literal
