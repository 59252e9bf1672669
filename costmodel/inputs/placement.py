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


#: each block's axes innermost first, as the dense layers see the devices: data is fsdp inside dp
DENSE_AXES = {"tp": ("tp",), "cp": ("cp",), "data": ("fsdp", "dp"), "pp": ("pp",)}
#: and as the routed experts see the same devices: the expert-parallel group is the data block's innermost
#: ranks, expert TP the tp block's (Megatron-core's expert rank generator takes the same order)
EXPERT_AXES = {"tp": ("etp",), "cp": ("cp",), "data": ("ep", "expert-fsdp", "expert-dp"), "pp": ("pp",)}


def axis_order(placement: str, experts: bool = False) -> tuple:
    """The axes innermost first for a placement (``tp,cp,data,pp`` or another order of those blocks), as the
    dense layers see them or (``experts``) as the routed experts do."""
    blocks = EXPERT_AXES if experts else DENSE_AXES
    return tuple(name for block in placement.split(",") for name in blocks[block])
