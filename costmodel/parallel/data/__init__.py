"""The data axis: DDP, ZeRO stages 1-3, FSDP and HSDP (dp replicas x fsdp shards).

Sharding: :mod:`.state` (which state ZeRO stage z divides by N, what FSDP gathers); traffic:
:mod:`.collectives`. The data axis rejects nothing the layout spec does not already reject.
"""

from costmodel.parallel.data.collectives import collectives
from costmodel.parallel.data.state import (fsdp_active, fsdp_in_pipeline, gather_dtype_bytes, precision_rules, runs_autocast,
                                           shards)

NAME = "data"


def checks(shape, point) -> list:
    """No divisibility: any N shards the flat state (FSDP pads the last shard)."""
    return []


__all__ = ["NAME", "checks", "collectives", "fsdp_active", "fsdp_in_pipeline", "gather_dtype_bytes", "precision_rules",
           "runs_autocast", "shards"]
