"""Predicted time of one measured collective on a hardware spec, through the one time model
(:func:`costmodel.cost.network.collective_seconds`, the same as `comm` and `step` use)."""

from __future__ import annotations

from costmodel.cost import network
from costmodel.cost.placement import Placement
from costmodel.errors import CostModelError
from costmodel.formulas.comms import MODELLED
from costmodel.record import record


@record
class Prediction:
    """A collective's predicted time, the network level and formula used, and whether calibrated."""

    seconds: float
    level: str
    algorithm: str  # the formula used: ring, nvls, hierarchical, or NCCL's pick as algorithm/protocol
    calibrated: bool


def launch_floor_s(launch_s: float, gpus_per_thread: int) -> float:
    """The least time nccl-tests can measure when its one thread launches the kernels of G GPUs in turn: G launch_s.

    Source: nccl-tests src/common.cu:540-619, startColl: one ncclGroup over the thread's nGpus, a launch each
    (benchmarks/fit_launch_nccl_tests.py fits launch_s on the shipped 8-GPU logs). `comm` and `step` take 1 launch_s:
    each process drives one GPU.
    """
    return gpus_per_thread * launch_s


@record
class Predictor:
    """One collective on one group, priced once: ``at(S)`` is the time of a buffer of S bytes."""

    cost: network.LinkCost
    level: str
    algorithm: str
    calibrated: bool
    calibration: str = ""  # the fit that prices it, in words (network.calibration_used; a mirror's says so)

    def at(self, buffer_bytes: float, gpus_per_thread: int | None = None) -> Prediction:
        """The time of one buffer; a measurement whose thread drove G GPUs takes at least G launches."""
        from costmodel.cost.nccl import Calibrated, TunedCost, choice

        cost = self.cost
        if isinstance(cost, Calibrated):  # the fit of this group's level, where it scales NCCL's tuner
            level = cost.across if cost.domains > 1 else cost.inside
            cost = level if isinstance(level, TunedCost) else cost.tuned if level is None else cost
        if isinstance(cost, TunedCost):  # NCCL's pick at this size names the algorithm and protocol
            algorithm, protocol, _ = choice(cost.preset, cost.op, buffer_bytes, cost.nodes, cost.per_node,
                                            cost.algorithm, cost.hop_us, cost.version)
            # a fit leaves the log's floor out (measure/validate._tuner_fit): each log's is put back here
            seconds = max(cost.seconds(buffer_bytes), launch_floor_s(cost.launch, gpus_per_thread or 1))
            return Prediction(seconds, self.level, f"{algorithm}/{protocol}", self.calibrated)
        return Prediction(self.cost.seconds(buffer_bytes), self.level, self.algorithm, self.calibrated)


def predictor(hardware, *, collective: str, algorithm: str, nodes: int, gpus_per_node: int) -> Predictor:
    """The time model for ``collective`` over nodes x gpus_per_node devices, or one line saying why not."""
    if collective not in MODELLED:
        raise CostModelError(f"no time model for {collective} yet (modelled: {', '.join(MODELLED)})")
    algorithm = network.applied_algorithm(collective, algorithm)
    tuned = hardware.kind == "gpu" and network._tuned(hardware, collective)  # NCCL's tuner: any algorithm it has
    formula = "ring" if tuned else network.formula_for(collective, algorithm)  # a tuned one names NCCL's pick (at)
    fast = hardware.network[0]
    if nodes == 1:
        if fast.domain_size and gpus_per_node > fast.domain_size:
            raise CostModelError(f"{gpus_per_node} GPUs in one node exceed {hardware.name}'s "
                                 f"{fast.name} domain of {fast.domain_size}")
        if formula == "nvls" and not fast.nvls:
            raise CostModelError(f"{hardware.name}'s {fast.name} level has no NVLS (in-switch reduction)")
    elif len(hardware.network) < 2:
        raise CostModelError(f"{hardware.name} has no scale-out level for {nodes} nodes")
    where_ = Placement("measured", nodes * gpus_per_node, gpus_per_node, nodes)
    cost = network.link_cost(hardware, collective, where_, algorithm)
    calibrated = network.calibrated(hardware, collective, where_, algorithm)
    label = network.calibration_used(hardware, collective, where_, algorithm) if calibrated else ""
    level = fast.name if nodes == 1 else hardware.network[-1].name
    # what priced it, as network.link_cost decided (LinkCost.priced_as); NCCL's tuner names its pick per size (at)
    return Predictor(cost, level, formula if tuned else cost.priced_as, calibrated, label)


def predict(hardware, *, collective: str, algorithm: str, buffer_bytes: float, nodes: int,
            gpus_per_node: int) -> Prediction:
    """Time of one collective of ``buffer_bytes`` over nodes x gpus_per_node devices."""
    return predictor(hardware, collective=collective, algorithm=algorithm, nodes=nodes,
                     gpus_per_node=gpus_per_node).at(buffer_bytes)
