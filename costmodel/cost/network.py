"""The one time model of a collective on a group's placement (cost/placement.py: where each axis runs).

Time: :func:`collective_seconds` is the only time model; ``comm``, ``step``, ``solve`` and
``validate`` all call it. One domain: the level's ring (or NVLS) formula with its latency and
efficiency. Several: the hierarchical two-level algorithm. A fitted calibration (``cost4d validate
--fit``) replaces the latency and bandwidth of the level it was fitted on, and is named in the output.
"""

from __future__ import annotations

import math
from dataclasses import replace

from costmodel.cost.calibrations import fits_for
from costmodel.cost.nccl_fits import by_ranks, fit_words, tuner_fits
from costmodel.cost.placement import Placement
from costmodel.errors import CostModelError
from costmodel.formulas import collective_time as ct
from costmodel.formulas import comms
from costmodel.mathops import above_one, family, where
from costmodel.record import record

#: collectives that cross nodes in two levels (a ring in the node, one between nodes); the others
#: (all-to-all, sends, broadcast, reduce, gather, scatter) cross the NICs as one flat group
HIERARCHICAL = ("all-reduce", "all-gather", "reduce-scatter")
def reached_level(hardware, where_: Placement):
    """The slowest level a single layout's group reaches: the fast one, or the scale-out (DCN) one."""
    if hardware.kind == "tpu":
        return hardware.level("dcn") if where_.dcn is True else hardware.level("ici")
    return hardware.network[0] if where_.domains <= 1 else hardware.network[-1]


def egress_bandwidth(hardware, where_: Placement):
    """B/s one device sends at on the level a group reaches (TPU ICI: W_ici M)."""
    level = reached_level(hardware, where_)
    return level.bandwidth_bytes_per_s * (where_.scale if level.kind == "ici" else 1)


def level_label(hardware, where_: Placement, op: str = "") -> str:
    """The level a single layout's group runs on (for tables): a ring across nodes uses both levels,
    any other collective across nodes the scale-out level."""
    if hardware.kind == "tpu":
        return "dcn" if where_.dcn is True else "ici"
    if where_.domains <= 1:
        return hardware.network[0].name
    if op not in HIERARCHICAL:
        return hardware.network[-1].name
    return f"{hardware.network[0].name}+{hardware.network[-1].name}"


def calibration(hardware, op: str, level: str, ranks, algorithm: str = "auto"):
    """(latency, bandwidth, label) fitted for ``op`` (or its mirror) on ``level``: the fit at these ranks, else the
    one at the most ranks; None where nothing was fitted. Values are where()-selected for arrays."""
    fits = fits_for(hardware, op, level, "ring", algorithm)
    if not fits:
        return None
    fits.sort(key=lambda c: c.ranks)
    latency, bandwidth = fits[-1].latency_s, _fitted_bandwidth(fits[-1])
    for c in fits[:-1]:
        match = ranks == c.ranks
        latency, bandwidth = where(match, c.latency_s, latency), where(match, _fitted_bandwidth(c), bandwidth)
    label = ", ".join(f"{c.collective}/{c.algorithm} on {c.level} at {c.ranks} ranks" for c in fits)
    return latency, bandwidth, f"calibrated ({label}; {fits[-1].source})"


def _fitted_bandwidth(fit) -> float:
    """A calibration's bandwidth; none stored (time did not grow with size) is infinite."""
    return math.inf if fit.bandwidth_bytes_per_s is None else fit.bandwidth_bytes_per_s


@record
class LinkCost:
    """t = latency + per_byte x S for one call of an op on a group (both 0 for a group of one), and what priced it
    (validate's `assumed` column): 'p2p' (each rank's shares sent straight to their peers), 'chain' (broadcast, reduce
    pipelined through the ranks), 'ring' or 'nvls' on one level, 'hierarchical' (two levels, :func:`_across_domains`),
    'none' (a group of one); arrays and letters that mix two say both ('ring or hierarchical')."""

    latency: object
    per_byte: object
    priced_as: str = "none"

    def seconds(self, buffer_bytes):
        return self.latency + self.per_byte * buffer_bytes


def one_level_cost(level, op: str, ranks, formula: str, cal, scale=1) -> LinkCost:
    """One level: ring (or NVLS, or a send) with the level's latency and efficiency, or a calibration's."""
    bandwidth = cal[1] if cal else level.bandwidth_bytes_per_s * scale * (level.efficiency or 1.0)
    if op == "send/recv":
        return LinkCost(cal[0] if cal else level.latency_s or 0.0, ct.p2p_seconds_per_byte(bandwidth=bandwidth), "p2p")
    if op in comms.WHOLE:  # broadcast, reduce: a pipelined chain through n - 1 hops, S once per link
        latency = cal[0] if cal else (level.latency_s or 0.0) + (ranks - 1) * (level.hop_latency_s or 0.0)
        return LinkCost(latency, ct.p2p_seconds_per_byte(bandwidth=bandwidth), "chain")
    passes = comms.PASSES[op]
    if formula == "nvls":
        latency = cal[0] if cal else level.nvls_latency_s or 0.0
        return LinkCost(latency, ct.nvls_seconds_per_byte(ranks=ranks, bandwidth=bandwidth), "nvls")
    latency = cal[0] if cal else (level.latency_s or 0.0) + passes * (ranks - 1) * (level.hop_latency_s or 0.0)
    return LinkCost(latency, ct.ring_seconds_per_byte(ranks=ranks, bandwidth=bandwidth, passes=passes),
                    "p2p" if op in POINT_TO_POINT else "ring")  # all-to-all, gather, scatter: shares sent straight


def one_level_seconds(level, op: str, buffer_bytes, ranks, formula: str, cal, scale=1):
    """Seconds of one call on one level (what a fit's residuals are computed with)."""
    return one_level_cost(level, op, ranks, formula, cal, scale).seconds(buffer_bytes)


#: the ops NCCL runs as point-to-point sends (all-to-all, gather, scatter, send/recv): NCCL_ALGO does not apply to them
POINT_TO_POINT = ("all-to-all", "gather", "scatter", "send/recv")


def applied_algorithm(op: str, algorithm: str) -> str:
    """The algorithm a log's NCCL_ALGO gives ``op``: its own for NCCL's collectives; for the point-to-point ops,
    which take none, 'auto' in place of a collective algorithm (ring stays: a calibration's name for them)."""
    return "auto" if op in POINT_TO_POINT and algorithm not in ("auto", "ring") else algorithm


def formula_for(op: str, algorithm: str) -> str:
    """The formula an algorithm name selects: nvls (all-reduce only) or ring (ring, tree, auto)."""
    if op not in comms.MODELLED:
        raise CostModelError(f"no time model for {op} yet (modelled: {', '.join(comms.MODELLED)})")
    if algorithm in ("nvls", "nvlstree"):
        if op != "all-reduce":
            raise CostModelError(f"NVLS is modelled for all-reduce only, not {op}")
        return "nvls"
    return "ring"


def _select(condition, a: LinkCost, b: LinkCost) -> LinkCost:
    return LinkCost(where(condition, a.latency, b.latency), where(condition, a.per_byte, b.per_byte),
                    _priced_as(condition, a.priced_as, b.priced_as))


def _priced_as(condition, a: str, b: str) -> str:
    """What priced a selected cost: the one picked where the condition holds alike for every layout (a number, an
    array all true or all false, sympy's true or false); arrays and letters that mix two name both."""
    kind = family(condition)
    if kind == "numpy":
        condition = True if condition.all() else False if not condition.any() else None
    elif kind == "sympy":
        condition = True if condition == True else False if condition == False else None  # noqa: E712 sympy.true
    return a if a == b else f"{a} or {b}" if condition is None else a if condition else b


def link_cost(hardware, op: str, where_: Placement, algorithm: str = "auto") -> LinkCost:
    """Latency and seconds per byte of one call of ``op`` over the group ``where_`` (0 for one rank), or
    NCCL's tuned time where the spec says how (cost/nccl.py)."""
    if hardware.kind == "gpu" and _tuned(hardware, op):
        return _tuned_cost(hardware, op, where_, algorithm)
    formula = formula_for(op, algorithm)
    ranks = where_.ranks
    if hardware.kind == "tpu":
        ici = hardware.level("ici")
        cost = one_level_cost(ici, op, ranks, "ring", calibration(hardware, op, ici.name, ranks, algorithm),
                              where_.scale)
        if where_.dcn is not False:
            dcn = hardware.level("dcn")
            on_dcn = one_level_cost(dcn, op, ranks, "ring", calibration(hardware, op, dcn.name, ranks))
            cost = _select(where_.dcn, on_dcn, cost)
    else:
        fast, _ = _levels(hardware)
        cost = one_level_cost(fast, op, ranks, formula, calibration(hardware, op, fast.name, ranks, algorithm))
        if len(hardware.network) > 1:
            cost = _select(where_.domains > 1, _across_domains(hardware, op, where_, algorithm), cost)
    return _select(above_one(ranks), cost, LinkCost(0, 0))


def _levels(hardware):
    """(fastest, slowest) GPU level: as NCCL's topology sees them where the spec names it (cost/nccl.py),
    else as the spec gives them."""
    fast, slow = hardware.network[0], hardware.network[-1]
    if hardware.nccl is None:
        return fast, slow
    from costmodel.cost.nccl import as_nccl_sees, preset_of

    return as_nccl_sees(preset_of(hardware), fast, slow)


def _tuned(hardware, op: str) -> bool:
    """NCCL's tuner prices ``op`` on this GPU: the spec names its topology."""
    from costmodel.cost.nccl import TUNED

    return hardware.nccl is not None and op in TUNED


def _tuned_cost(hardware, op: str, where_: Placement, algorithm: str):
    """NCCL's tuner, scaled where the spec holds a calibration of model nccl for the level (the group's own size's,
    else the most ranks': cost/nccl_fits.py), and replaced where it holds one of model ring: a fit inside the node
    prices groups inside a node, one across nodes groups across nodes; the tuner prices the rest."""
    from costmodel.cost.nccl import ALGORITHM_NAMES, Calibrated, tuned_cost

    tuned = tuned_cost(hardware, op, where_.domains, where_.per_domain, algorithm, memo=where_.memo)
    fast, slow = _levels(hardware)
    levels = (fast, slow) if len(hardware.network) > 1 else (fast,)
    priced = []
    for level in levels:
        if not any(tuner_fits(hardware, op, level.name, algorithm)):
            ring = calibration(hardware, op, level.name, where_.ranks, algorithm)
            priced.append(one_level_cost(level, op, where_.ranks, formula_for(op, algorithm), ring) if ring else None)
            continue

        def scaled_at(ranks, name=level.name):
            scaled, picks = tuner_fits(hardware, op, name, algorithm, ranks)
            return replace(tuned, offset=scaled.latency_s if scaled else 0.0, scale=scaled.scale if scaled else 1.0,
                           by_algorithm=tuple((ALGORITHM_NAMES[c.algorithm], c.latency_s, c.scale) for c in picks))

        priced.append(by_ranks(where_.ranks, scaled_at, hardware, op, level.name, algorithm))
    if not any(priced):
        return tuned
    return Calibrated(tuned, where_.domains, where_.ranks, *priced)


def collective_seconds(hardware, *, op: str, buffer_bytes, where_: Placement, algorithm: str = "auto"):
    """Seconds of one call of ``op`` on a buffer of S bytes over the group ``where_`` (0 for one rank)."""
    return link_cost(hardware, op, where_, algorithm).seconds(buffer_bytes)


def _across_domains(hardware, op: str, where_: Placement, algorithm: str) -> LinkCost:
    """A group spanning domains: a calibration fitted across them (flat), else two levels:
    all-reduce = reduce-scatter in the domain + all-reduce of S/g across + all-gather in the domain;
    all-gather, reduce-scatter = across (S/g) + inside; all-to-all = the node-crossing share over the NICs, the
    rest over NVLink at once; the rest cross the NICs as one group."""
    fast, slow = _levels(hardware)
    cal = calibration(hardware, op, slow.name, where_.ranks, algorithm)
    if cal or op not in HIERARCHICAL + ("all-to-all",):
        return one_level_cost(slow, op, where_.ranks, "ring", cal)
    g, nodes = where_.per_domain, where_.domains
    shape = dict(gpus_per_node=g, nodes=nodes, intra_bandwidth=fast.bandwidth_bytes_per_s * (fast.efficiency or 1.0),
                 inter_bandwidth=slow.bandwidth_bytes_per_s * (slow.efficiency or 1.0))
    if op == "all-to-all":  # one grouped exchange: the network's latency, the NICs' share and NVLink's at once
        return LinkCost(one_level_cost(slow, op, where_.ranks, "ring", None).latency,
                        ct.hierarchical_all_to_all_per_byte(**shape), "hierarchical")
    inside = where(above_one(g), fast.latency_s or 0.0, 0.0)  # a ring in the node, if the node holds more than one
    across = slow.latency_s or 0.0
    if op == "all-reduce":
        return LinkCost(2 * inside + across, ct.hierarchical_allreduce_per_byte(**shape), "hierarchical")
    return LinkCost(inside + across, ct.hierarchical_gather_per_byte(**shape), "hierarchical")


def calibration_used(hardware, op: str, where_: Placement, algorithm: str = "auto") -> str:
    """Which calibration (or NCCL's tuner, or 'datasheet') a single layout's collective uses, in the
    order :func:`_tuned_cost` prices them: a tuner calibration, a ring one, the tuner, the datasheet; each fit
    named by the op and algorithm it was fitted on (cost/nccl_fits.fit_words), in `comm`, `step` and `validate`
    alike."""
    level = reached_level(hardware, where_).name
    tuned = hardware.kind == "gpu" and _tuned(hardware, op)
    ranks = where_.ranks if family(where_.ranks) == "number" else None  # as nccl_fits.by_ranks tells them
    scaled, picks = tuner_fits(hardware, op, level, algorithm, ranks) if tuned else (None, ())
    cal = None if scaled or picks else calibration(hardware, op, level, where_.ranks, algorithm)
    if cal:
        return cal[2]
    if tuned:
        from costmodel.cost.nccl import preset_of

        tuner = f"NCCL {hardware.nccl.version} tuner ({preset_of(hardware)})"
        words = [fit_words(c, op, ranks, f"where NCCL picks {c.algorithm}") for c in picks]
        if scaled:
            own = "the fit of NCCL's own choice" if scaled.algorithm != algorithm else ""
            words.append(fit_words(scaled, op, ranks, "its other picks" if picks else own))
        sources = sorted({c.source for c in hardware.calibration if c.model == "nccl" and c.level == level})
        return f"{tuner}, calibrated on {level}: {', '.join(words)} ({'; '.join(sources)})" if words else tuner
    return "datasheet"


def calibrated(hardware, op: str, where_: Placement, algorithm: str = "auto") -> bool:
    """Whether a fit to measurements (of either model) prices this collective."""
    level = reached_level(hardware, where_).name
    tuned = hardware.kind == "gpu" and _tuned(hardware, op)
    return bool((tuned and any(tuner_fits(hardware, op, level, algorithm)))
                or calibration(hardware, op, level, where_.ranks, algorithm))
