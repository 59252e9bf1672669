"""Where each axis's group runs on the network: its ranks per fast domain and the domains it spans.

Axes are laid out innermost first (tp, cp, fsdp, dp, pp: the Megatron order, unless the layout's ``placement``
says otherwise). A group of n ranks of an axis whose inner axes span ``inner`` devices has g = min(n, domain /
inner) ranks in one fast domain (an NVLink node; at least 1) and n / g such domains. TPU: every axis runs on
ICI at W_ici M, with M the torus axes it spans (M_X for the data axis, M_Y for tp); a mesh larger than one ICI
domain puts the data axes on DCN. cost/network.py prices a collective on such a placement.
"""

from __future__ import annotations

from dataclasses import field

from costmodel.errors import CostModelError
from costmodel.inputs.placement import axis_order
from costmodel.mathops import exact_div, floor_div, maximum, minimum
from costmodel.parallel import expert
from costmodel.parallel.collective import SUBGROUPS
from costmodel.record import record


@record
class Placement:
    """Where a group of ``ranks`` ranks of one axis sits: ``per_domain`` of them share a fast domain."""

    axis: str
    ranks: object
    per_domain: object  # g
    domains: object  # n / g
    scale: object = 1  # TPU: torus axes M the axis spans (bandwidth W_ici M)
    dcn: object = False  # TPU: the axis crosses slices over DCN
    #: arrays: what pricing computes once for every op on this group (cost/nccl.py: its distinct shapes)
    memo: dict = field(default_factory=dict, compare=False, repr=False)


def _degree(point, axis: str):
    if axis == "ep":
        return point.ep
    if axis == "etp":
        return expert.expert_tp(point)
    if axis in ("expert-fsdp", "expert-dp"):
        seen = expert.expert_point(point)
        return seen.fsdp if axis == "expert-fsdp" else seen.dp
    return {"tp": point.tp, "cp": point.cp, "fsdp": point.fsdp, "dp": point.dp, "pp": point.pp}[axis]


def placement(hardware, point, axis: str) -> Placement:
    """Where ``axis`` (tp, cp, fsdp, dp, pp, or data = dp x fsdp as one group; ep and the experts'
    expert-fsdp, expert-dp and expert-data) runs."""
    return _placement(hardware, point, axis, None)


def subgroup_placement(hardware, point, axis: str, ranks) -> Placement:
    """Where a group of ``ranks`` adjacent ranks of ``axis`` runs (SUBGROUPS: the TP ranks that hold copies of
    one KV head, which sum those copies' gradients): inside the fast domain when ``ranks`` fit in it."""
    return _placement(hardware, point, SUBGROUPS[axis], ranks)


def _placement(hardware, point, axis: str, subgroup) -> Placement:
    if axis in ("fsdp", "dp", "data"):  # with a framework's CP ranks folded into the shards: one group inside tp
        point = point.sharding
    expert_axis = axis in ("ep", "etp") or axis.startswith("expert-")
    stop = {"data": "fsdp", "expert-data": "expert-fsdp"}.get(axis, axis)
    if isinstance(point.placement, str):
        inner = 1
        for name in axis_order(point.placement, expert_axis):
            if name == stop:
                break
            inner = inner * _degree(point, name)
    else:  # arrays: each layout's own order (an index into inputs.placement.PLACEMENTS)
        inner = _inner_by_layout(point, stop, expert_axis)
    if subgroup is not None:
        ranks = subgroup
    elif axis in ("data", "expert-data"):
        ranks = point.data if axis == "data" else exact_div(expert.folded_tp(point) * point.data, point.ep)
    else:
        ranks = _degree(point, axis)
    if hardware.kind == "tpu":
        return _tpu_placement(hardware, point, axis, ranks, inner)
    fast = hardware.network[0]
    if fast.domain_size is None or len(hardware.network) == 1:
        return Placement(axis, ranks, ranks, 1)
    per_domain = minimum(ranks, maximum(floor_div(fast.domain_size, inner), 1))
    return Placement(axis, ranks, per_domain, ranks / per_domain)


def _inner_by_layout(point, axis: str, experts: bool):
    """Devices the axes inside ``axis`` span, each layout placed in its own order (``point.placement``: indices
    into PLACEMENTS): the product of the degrees of the blocks before ``axis``'s block, and of the axes inside
    it in its own block (dp: its fsdp; the experts' data block: ep, then expert-fsdp)."""
    import numpy as np

    from costmodel.inputs.placement import BLOCKS, DENSE_AXES, EXPERT_AXES, PLACEMENTS

    axes = EXPERT_AXES if experts else DENSE_AXES
    position = np.array([[order.split(",").index(block) for block in BLOCKS] for order in PLACEMENTS])[point.placement]
    own = next(block for block in BLOCKS if axis in axes[block])
    inner = 1
    for name in axes[own][:axes[own].index(axis)]:
        inner = inner * _degree(point, name)
    mine = position[:, BLOCKS.index(own)]
    for i, block in enumerate(BLOCKS):
        degree = 1
        for name in axes[block]:
            degree = degree * _degree(point, name)
        inner = inner * np.where(position[:, i] < mine, degree, 1)
    return inner


def _tpu_placement(hardware, point, axis: str, ranks, inner=1) -> Placement:
    """A data axis, or the pipeline (outermost), crosses slices over DCN when it and the axes inside it
    (``inner``, the default order) hold more chips than one ICI domain: PaLM's 2 x 3072 chips keep TP x FSDP in
    each pod, DP across them."""
    ici = hardware.level("ici")
    data_axis = axis in ("dp", "fsdp", "data", "ep") or axis.startswith("expert-")
    dcn = False
    if ici.domain_size and (data_axis or axis == "pp"):
        dcn = inner * ranks > ici.domain_size
        if dcn is True and not any(level.kind == "dcn" for level in hardware.network):
            raise CostModelError(f"{inner * ranks} chips exceed one {hardware.name} ICI domain "
                                 f"({ici.domain_size}) and the spec has no 'dcn' level")
    m = point.my if axis in ("tp", "etp") else point.mx if data_axis else 1
    return Placement(axis, ranks, ranks, 1, scale=m, dcn=dcn)
