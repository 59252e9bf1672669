"""The orders a GPU layout's axes may fill the network in (``--placement``): the blocks, innermost first.

``data`` is one block, fsdp inside dp: HSDP's shards share the fast domain before its replicas do.
"""

from __future__ import annotations

import itertools

#: Megatron's order: TP innermost (NVLink), then CP, the data axis, the pipeline outermost
BLOCKS = ("tp", "cp", "data", "pp")
DEFAULT_PLACEMENT = ",".join(BLOCKS)
#: every order of the blocks, the default first
PLACEMENTS = tuple(",".join(order) for order in itertools.permutations(BLOCKS))


def axis_order(placement: str) -> tuple:
    """The axes innermost first for a placement (``tp,cp,data,pp`` or another order of those blocks): data is
    fsdp then dp."""
    return tuple(name for block in placement.split(",") for name in (("fsdp", "dp") if block == "data" else (block,)))
