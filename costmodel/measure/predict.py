"""Predicted time of one measured collective on a hardware spec: the level it runs on, the
algorithm's formula, and the spec's latency/efficiency, or a fitted calibration when there is one."""

from __future__ import annotations

from dataclasses import dataclass

from costmodel.errors import CostModelError
from costmodel.formulas import collective_time as ct

PASSES = {"all-reduce": 2, "all-gather": 1, "reduce-scatter": 1, "all-to-all": 1}


@dataclass(frozen=True)
class Prediction:
    seconds: float
    level: str
    algorithm: str  # the formula used: ring, nvls, hierarchical
    calibrated: bool


def _formula(collective: str, algorithm: str) -> str:
    if collective not in PASSES:
        raise CostModelError(f"no time model for {collective} yet (modelled: {', '.join(PASSES)})")
    if algorithm in ("nvls", "nvlstree"):
        if collective != "all-reduce":
            raise CostModelError(f"NVLS is modelled for all-reduce only, not {collective}")
        return "nvls"
    return "ring"  # ring, auto and tree share the bandwidth term (tree: same bytes per link)


def _calibration(hardware, collective: str, algorithm: str, level: str, ranks: int):
    for c in hardware.calibration:
        if (c.collective, c.algorithm, c.level, c.ranks) == (collective, algorithm, level, ranks):
            return c
    return None


def level_time(level, formula: str, collective: str, buffer_bytes: float, ranks: int,
               latency=None, bandwidth=None) -> float:
    """One-level time by ``formula``; latency and bandwidth from the level unless given."""
    passes = PASSES[collective]
    if bandwidth is None:
        bandwidth = level.bandwidth_bytes_per_s * (level.efficiency or 1.0)
    if formula == "nvls":
        if latency is None:
            latency = level.nvls_latency_s or 0.0
        return ct.nvls_allreduce_seconds(buffer_bytes=buffer_bytes, ranks=ranks, bandwidth=bandwidth, latency=latency)
    if latency is None:
        latency = (level.latency_s or 0.0) + passes * (ranks - 1) * (level.hop_latency_s or 0.0)
    return ct.ring_seconds(buffer_bytes=buffer_bytes, ranks=ranks, bandwidth=bandwidth, latency=latency,
                           passes=passes)


def predict(hardware, *, collective: str, algorithm: str, buffer_bytes: float, nodes: int,
            gpus_per_node: int) -> Prediction:
    """Time of one collective of ``buffer_bytes`` over nodes x gpus_per_node devices."""
    formula = _formula(collective, algorithm)
    ranks = nodes * gpus_per_node
    fast = hardware.network[0]
    if nodes == 1:
        if fast.domain_size and gpus_per_node > fast.domain_size:
            raise CostModelError(f"{gpus_per_node} GPUs in one node exceed {hardware.name}'s "
                                 f"{fast.name} domain of {fast.domain_size}")
        if formula == "nvls" and not fast.nvls:
            raise CostModelError(f"{hardware.name}'s {fast.name} level has no NVLS (in-switch reduction)")
        cal = _calibration(hardware, collective, algorithm, fast.name, ranks)
        seconds = level_time(fast, formula, collective, buffer_bytes, ranks,
                             cal.latency_s if cal else None, cal.bandwidth_bytes_per_s if cal else None)
        return Prediction(seconds, fast.name, formula, cal is not None)
    if len(hardware.network) < 2:
        raise CostModelError(f"{hardware.name} has no scale-out level for {nodes} nodes")
    slow = hardware.network[-1]
    cal = _calibration(hardware, collective, algorithm, slow.name, ranks)
    if cal:
        return Prediction(level_time(slow, "ring", collective, buffer_bytes, ranks, cal.latency_s,
                                     cal.bandwidth_bytes_per_s), slow.name, "ring", True)
    shape = dict(buffer_bytes=buffer_bytes, gpus_per_node=gpus_per_node, nodes=nodes,
                 intra_bandwidth=fast.bandwidth_bytes_per_s * (fast.efficiency or 1.0),
                 inter_bandwidth=slow.bandwidth_bytes_per_s * (slow.efficiency or 1.0),
                 intra_latency=fast.latency_s or 0.0, inter_latency=slow.latency_s or 0.0)
    if collective == "all-reduce":
        return Prediction(ct.hierarchical_allreduce_seconds(**shape), slow.name, "hierarchical", False)
    return Prediction(ct.hierarchical_gather_seconds(**shape), slow.name, "hierarchical", False)
