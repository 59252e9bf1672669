"""Predicted against measured, per collective and message size; and a fit of latency and bandwidth.

Error = (predicted - measured) / measured. The summary is the median absolute error over sizes
>= 1 MiB (below that, launch latency and protocol switches dominate and one formula is not meant
to hold), overall and per collective.
"""

from __future__ import annotations

import math
import statistics

from costmodel.errors import CostModelError
from costmodel.formulas.comms import nvls_factor
from costmodel.cost.network import applied_algorithm, formula_for, one_level_seconds
from costmodel.cost.nccl import TUNED
from costmodel.formulas.comms import MODELLED
from costmodel.measure.predict import launch_floor_s, predictor
from costmodel.formulas.comms import bus_factor
from costmodel.record import record

MIB = 2**20


@record
class Row:
    """One measured size of one collective from a log, with its predicted time."""

    collective: str
    algorithm: str
    bytes: int
    nodes: int
    gpus_per_node: int
    measured_s: float
    predicted_s: float
    level: str
    assumed: str = ""  # the algorithm the prediction assumed (NCCL's pick as algorithm/protocol where tuned)
    release: str = ""  # the NCCL release whose tuner priced it, and whose word that is (where tuned)
    calibration: str = ""  # the fit that priced it, in words ("" where none did)
    placement: str = "out-of-place"
    dtype: str = ""  # as the log names it (nccl-tests -d all runs several)

    @property
    def error_pct(self) -> float:
        return 100 * (self.predicted_s - self.measured_s) / self.measured_s


def measured_rows(documents: list[dict], placement: str = "out-of-place"):
    """(collective, algorithm, environment, row, NCCL release the log states or None, its files) for every measured
    row."""
    for doc in documents:
        release, files = (doc.get("source") or {}).get("nccl"), (doc.get("source") or {}).get("files") or ["results"]
        if release is not None and not isinstance(release, str):
            raise CostModelError(f"{', '.join(map(str, files))}: source.nccl: expected a release such as \"2.26.2\", "
                                 f"found {release!r}"[:300])
        for run in doc["runs"]:
            env = run.get("environment") or doc["environment"]
            ran = run.get("nccl", release)  # merged logs: each run's own
            for row in run["rows"]:
                if placement in ("both", row.get("placement", "out-of-place")) and row["bytes"] > 0:
                    yield run["collective"], run["algorithm"], env, row, ran, files


def as_run(hardware, release: str | None):
    """(the spec with the NCCL release a log states it ran, whose word the release is): the log's where its
    header names one that cost4d models (2.19 on), else the spec's."""
    from costmodel.formulas.nccl_versions import parse

    if hardware.nccl is None:
        return hardware, ""
    spec = hardware.nccl.version
    if not release:
        return hardware, f"{spec} (the spec)"
    try:
        ran = parse(release)
    except ValueError:
        return hardware, f"{spec} (the spec's; the log's {release} predates the tuners modelled)"
    if ran == parse(spec):
        return hardware, f"{spec} (the log and the spec)"
    return (hardware.model_copy(update={"nccl": hardware.nccl.model_copy(update={"version": release})}),
            f"{release} (the log's header; the spec says {spec})")


def compare(documents: list[dict], hardware, placement: str = "out-of-place") -> list[Row]:
    rows, priced = [], {}
    for collective, algorithm, env, row, release, files in measured_rows(documents, placement):
        if env["world_size"] == 1:  # one GPU sends nothing: its time is a local copy, not a collective's
            continue
        algorithm = applied_algorithm(collective, algorithm)  # NCCL_ALGO leaves the point-to-point ops alone
        key = (collective, algorithm, env["nodes"], env["gpus_per_node"], release)
        try:  # a model's refusal names the log and its test
            if key not in priced:  # one time model per group, not per row: a long log stays fast
                device, said = as_run(hardware, release)
                model = predictor(device, collective=collective, algorithm=algorithm, nodes=env["nodes"],
                                  gpus_per_node=env["gpus_per_node"])
                priced[key] = model, said, model.calibration
            p = priced[key][0].at(row["bytes"], env.get("gpus_per_thread"))
        except CostModelError as err:
            raise CostModelError(f"{', '.join(files)}: the {collective} test ({algorithm}, {env['nodes']} x "
                                 f"{env['gpus_per_node']}): {err}") from None
        rows.append(Row(collective, algorithm, row["bytes"], env["nodes"], env["gpus_per_node"], row["time_s"],
                        p.seconds, p.level, p.algorithm, priced[key][1] if "/" in p.algorithm else "", priced[key][2],
                        row.get("placement", "out-of-place"), row.get("dtype") or ""))
    return rows


def check_networked(documents: list[dict]) -> None:
    """One line where every run of the measurements ran on one GPU: a local copy each, which no network model
    prices (such runs beside others are left out of the comparison)."""
    if all((run.get("environment") or doc["environment"])["world_size"] == 1
           for doc in documents for run in doc["runs"]):
        raise CostModelError("no collective over 2 or more ranks in the measurements: one GPU's times are local "
                             "copies, which no network model prices")


def median_abs_error(rows: list[Row], min_bytes: int = MIB) -> float | None:
    errors = [abs(r.error_pct) for r in rows if r.bytes >= min_bytes]
    return statistics.median(errors) if errors else None


def summary(rows: list[Row], min_bytes: int = MIB) -> dict:
    """Median absolute error overall, per (collective, algorithm, nodes x GPUs) and per network level."""
    groups: dict[str, list[Row]] = {}
    levels: dict[str, list[Row]] = {}
    for r in rows:
        groups.setdefault(f"{r.collective} ({r.algorithm}, {r.nodes}x{r.gpus_per_node})", []).append(r)
        levels.setdefault(r.level, []).append(r)
    return {"median_abs_error_pct": median_abs_error(rows, min_bytes),
            "per_collective": {k: median_abs_error(v, min_bytes) for k, v in groups.items()},
            "per_level": {k: median_abs_error(v, min_bytes) for k, v in levels.items()}}


@record
class Fit:
    """A latency and bandwidth fitted to one collective's measured sizes on one group."""

    collective: str
    algorithm: str
    level: str
    ranks: int
    latency_s: float
    bandwidth_bytes_per_s: float
    residuals_pct: list  # (bytes, error %) per fitted row
    median_abs_error_pct: float
    model: str = "ring"  # ring: latency + c S / bandwidth; nccl: latency + scale x NCCL's tuned time
    scale: float | None = None

    @property
    def stored_bandwidth(self) -> float | None:
        """The bandwidth as files and JSON hold it: None where time did not grow with size (infinite)."""
        return self.bandwidth_bytes_per_s if math.isfinite(self.bandwidth_bytes_per_s) else None


def relative_line(points: list[tuple[float, float]], weights: list[float] | None = None) -> tuple[float, float]:
    """(a, b) of t = a + b x over (x, t) points minimising sum w ((a + b x - t) / t)^2: the normal
    equations of a linear model with weights w / t^2, in closed form; a is clipped at 0 (refit through
    the origin: a latency is not negative)."""
    w = [(1.0 if weights is None else wi) / t**2 for wi, (_, t) in zip(weights or points, points)]
    sw = sum(w)
    swx = sum(wi * x for wi, (x, _) in zip(w, points))
    swxx = sum(wi * x * x for wi, (x, _) in zip(w, points))
    swt = sum(wi * t for wi, (_, t) in zip(w, points))
    swxt = sum(wi * x * t for wi, (x, t) in zip(w, points))
    det = sw * swxx - swx * swx
    if det <= 0:
        raise CostModelError("--fit: the fitted rows predict one time for every size (e.g. all on the launch "
                             "floor); raise --min-bytes")
    a, b = (swxx * swt - swx * swxt) / det, (sw * swxt - swx * swt) / det
    return (0.0, swxt / swxx) if a < 0 else (a, b)


def fit_latency_bandwidth(points: list[tuple[float, float]], coefficient: float) -> tuple[float, float]:
    """Least squares in relative error for t = alpha + c S / B over (S, t) points: (alpha, B), by
    :func:`relative_line` with beta = c / B."""
    alpha, beta = relative_line(points)
    if beta <= 0:  # time does not grow with size over these points (noise): latency alone
        return sum(1 / t for _, t in points) / sum(1 / t**2 for _, t in points), math.inf
    return alpha, coefficient / beta


def fit(documents: list[dict], hardware, placement: str = "out-of-place", min_bytes: int = MIB) -> list[Fit]:
    """Latency and effective bandwidth per (collective, algorithm, ranks), fitted on sizes >= min_bytes."""
    groups: dict[tuple, list[tuple[float, float]]] = {}
    for collective, algorithm, env, row, release, _ in measured_rows(documents, placement):
        algorithm = applied_algorithm(collective, algorithm)
        if row["bytes"] >= min_bytes and collective in MODELLED and env["world_size"] > 1:  # one rank moves no data
            key = (collective, algorithm, env["nodes"], env["gpus_per_node"], release)
            groups.setdefault(key, []).append((row["bytes"], row["time_s"], env.get("gpus_per_thread") or 1))
    if not groups:
        raise CostModelError(f"--fit: no modelled collective over 2 or more ranks has rows of {min_bytes:,} bytes "
                             "or more (lower --min-bytes?)")
    fits = []
    for (collective, algorithm, nodes, per_node, release), points in groups.items():
        ranks = nodes * per_node
        sizes = {s for s, _, _ in points}
        if len(sizes) < 2:
            raise CostModelError(f"--fit {collective} ({algorithm}, {nodes}x{per_node}): a latency and a bandwidth "
                                 f"need two or more sizes >= --min-bytes, found {len(sizes)} "
                                 "(lower --min-bytes, or measure more sizes)")
        level = hardware.network[0] if nodes == 1 else hardware.network[-1]
        if hardware.nccl is not None and collective in TUNED:
            fits.append(_tuner_fit(as_run(hardware, release)[0], collective, algorithm, level.name, nodes, per_node,
                                   points))
            continue
        formula = formula_for(collective, algorithm)
        coefficient = nvls_factor(group=ranks) if formula == "nvls" else bus_factor(op=collective, group=ranks)
        points = [(s, t) for s, t, _ in points]  # no launch floor in the datasheet model
        latency, bandwidth = fit_latency_bandwidth(points, coefficient)
        fitted = (latency, bandwidth)
        residuals = [(s, 100 * (one_level_seconds(level, collective, s, ranks, formula, fitted) - t) / t)
                     for s, t in points]
        fits.append(Fit(collective, algorithm, level.name, ranks, latency, bandwidth, residuals,
                        statistics.median(abs(e) for _, e in residuals)))
    return fits


def fit_offset_scale(pairs: list[tuple[float, float]], rounds: int = 50) -> tuple[float, float]:
    """(a, b) of t = a + b x over (x, t) pairs, least absolute relative error (the median-like fit a
    tuner's shape needs: its few sizes far off must not pull the rest), by iteratively reweighted least
    squares (weights 1/|residual|, Schlossmacher 1973, JASA 68:857); a is clipped at 0."""
    a, b, weights = 0.0, 1.0, [1.0] * len(pairs)
    for _ in range(rounds):
        a, b = relative_line(pairs, weights)
        weights = [1 / max(abs((a + b * x - t) / t), 1e-6) for x, t in pairs]
    return a, max(b, 0.0)


def _tuner_fit(hardware, collective, algorithm, level, nodes, per_node, points) -> Fit:
    """t = a + b x NCCL's tuned time (the tuner as the spec has it, uncalibrated), least squares in
    relative error like the ring fit with S replaced by the tuned time: a scale that carries over to
    other group sizes on the level, where a ring fit holds for the fitted size only. ``points``: (S, t, G), G the
    GPUs the log's one thread drove; rows the tuner puts on that log's launch floor (G x launch_s) are left out, as
    they time the host, not the collective: the floor stays the log's (:meth:`Predictor.at`), not the fit's."""
    from costmodel.cost.nccl import tuned_cost

    tuned = tuned_cost(hardware, collective, nodes, per_node, algorithm)
    above = [(s, t) for s, t, threads in points if tuned.seconds(s) > launch_floor_s(tuned.launch, threads)]
    if len({s for s, _ in above}) < 2:
        raise CostModelError(f"--fit {collective} ({algorithm}, {nodes}x{per_node}): a latency and a scale need two "
                             "or more sizes above the log's launch floor (raise --min-bytes, or measure larger sizes)")
    pairs = [(tuned.seconds(s), t) for s, t in above]
    latency, scale = fit_offset_scale(pairs)
    residuals = [(s, 100 * (latency + scale * x - t) / t) for (s, t), (x, _) in zip(above, pairs)]
    return Fit(collective, algorithm, level, nodes * per_node, latency, math.inf, residuals,
               statistics.median(abs(e) for _, e in residuals), "nccl", scale)


def calibrated_spec(hardware, fits: list[Fit], source: str) -> dict:
    """The hardware spec as a dict with the fits as its calibration (replacing earlier ones that match)."""
    spec = hardware.model_dump(exclude_none=True)
    new = {(f.collective, f.algorithm, f.level, f.ranks) for f in fits}
    kept = [c for c in spec.get("calibration", [])
            if (c["collective"], c["algorithm"], c["level"], c["ranks"]) not in new]
    spec["calibration"] = kept + [
        {"collective": f.collective, "algorithm": f.algorithm, "level": f.level, "ranks": f.ranks,
         "latency_s": f.latency_s, "bandwidth_bytes_per_s": f.stored_bandwidth, "model": f.model,
         **({"scale": f.scale} if f.model == "nccl" else {}),
         "median_abs_error_pct": f.median_abs_error_pct, "source": source} for f in fits]
    return spec
