"""Predicted time of one measured collective on a hardware spec, through the one time model
(:func:`costmodel.cost.network.collective_seconds`, the same as `comm` and `step` use)."""

from __future__ import annotations

from dataclasses import dataclass

from costmodel.cost import network
from costmodel.errors import CostModelError
from costmodel.formulas.comms import PASSES


@dataclass(frozen=True)
class Prediction:
    seconds: float
    level: str
    algorithm: str  # the formula used: ring, nvls, hierarchical
    calibrated: bool


def predict(hardware, *, collective: str, algorithm: str, buffer_bytes: float, nodes: int,
            gpus_per_node: int) -> Prediction:
    """Time of one collective of ``buffer_bytes`` over nodes x gpus_per_node devices."""
    if collective not in PASSES:
        raise CostModelError(f"no time model for {collective} yet (modelled: {', '.join(PASSES)})")
    formula = network.formula_for(collective, algorithm)
    fast = hardware.network[0]
    if nodes == 1:
        if fast.domain_size and gpus_per_node > fast.domain_size:
            raise CostModelError(f"{gpus_per_node} GPUs in one node exceed {hardware.name}'s "
                                 f"{fast.name} domain of {fast.domain_size}")
        if formula == "nvls" and not fast.nvls:
            raise CostModelError(f"{hardware.name}'s {fast.name} level has no NVLS (in-switch reduction)")
    elif len(hardware.network) < 2:
        raise CostModelError(f"{hardware.name} has no scale-out level for {nodes} nodes")
    ranks = nodes * gpus_per_node
    where_ = network.Placement("measured", ranks, gpus_per_node, nodes)
    seconds = network.collective_seconds(hardware, op=collective, buffer_bytes=buffer_bytes, where_=where_,
                                         algorithm=algorithm)
    calibrated = network.calibration_used(hardware, collective, where_, algorithm) != "datasheet"
    if nodes == 1:
        return Prediction(seconds, fast.name, formula, calibrated)
    return Prediction(seconds, hardware.network[-1].name, "ring" if calibrated else "hierarchical", calibrated)
