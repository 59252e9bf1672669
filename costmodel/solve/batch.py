"""The batch at which an FSDP x TP layout becomes compute-bound (Scaling Book, training chapter).

T_math = k B D F / (N C), T_FSDP = k D F / (Y W M_X), T_TP = k B D / (X W_Y M_Y), k = 4 for the
forward pass and 12 for a whole step (the book's FSDP + TP row: 4 + 8 FLOPs and bytes). On a TPU torus
W_Y = W (ICI per axis); on GPUs each axis runs at the level its group reaches (TP inside an NVLink domain,
FSDP across nodes: the GPU chapter's per-level roofline).
"""

from __future__ import annotations

import math
import numbers

from costmodel.errors import CostModelError
from costmodel.formulas import scaling as sc
from costmodel.record import record


#: what solve/explain batch price (the Scaling Book's training chapter): said wherever they answer
MLP_ONLY = ("a layer is its MLP's two D x F matmuls (the Scaling Book's model): attention, a gated MLP's third "
            "matrix and a mixture's other experts are not in it")


@record
class BatchProblem:
    """The inputs of the compute-bound question, every hardware constant explicit."""

    d_model: int
    d_ff: int
    fsdp: int  # X
    tp: int  # Y
    mx: int  # M_X
    my: int  # M_Y
    peak_flops: float  # C
    bandwidth: float  # W (ICI: per axis, bidirectional); on GPUs the FSDP axis's level
    overlap: str = "sum"
    pass_: str = "forward"
    tp_bandwidth: float | None = None  # W_Y where the TP axis runs on another level (GPUs); None: W

    @property
    def w_tp(self) -> float:
        """W_Y: the TP axis's bandwidth."""
        return self.bandwidth if self.tp_bandwidth is None else self.tp_bandwidth

    @property
    def devices(self) -> int:
        return self.fsdp * self.tp

    @property
    def alpha(self) -> float:
        return sc.intensity(peak_flops=self.peak_flops, bandwidth=self.bandwidth)

    @property
    def alpha_tp(self) -> float:
        """C / W_Y (alpha on a torus)."""
        return sc.intensity(peak_flops=self.peak_flops, bandwidth=self.w_tp)

    def times(self, batch: float) -> dict:
        """T_math, T_FSDP, T_TP, T_comms for a global batch of ``batch`` tokens (seconds per layer)."""
        k = sc.PASS_FACTOR[self.pass_]
        t_math = sc.math_seconds(batch=batch, d_model=self.d_model, d_ff=self.d_ff, devices=self.devices,
                                 peak_flops=self.peak_flops, factor=k)
        t_fsdp = sc.fsdp_seconds(d_model=self.d_model, d_ff=self.d_ff, tp=self.tp, bandwidth=self.bandwidth,
                                 mx=self.mx, factor=k) if self.fsdp > 1 else 0.0
        t_tp = sc.tp_seconds(batch=batch, d_model=self.d_model, fsdp=self.fsdp, bandwidth=self.w_tp,
                             my=self.my, factor=k) if self.tp > 1 else 0.0
        return {"math": t_math, "fsdp": t_fsdp, "tp": t_tp,
                "comms": sc.comms_seconds(fsdp_time=t_fsdp, tp_time=t_tp, overlap=self.overlap)}


@record
class BatchAnswer:
    """The per-device batch at which a layout turns compute-bound, and the term that binds."""

    problem: BatchProblem
    per_device_batch: float  # B/N, tokens; 0 when compute-bound at any batch, inf when never
    binding_term: str  # fsdp | tp | none (no term binds: compute-bound at any batch)

    @property
    def global_batch(self) -> float:
        return self.per_device_batch * self.problem.devices

    @property
    def compute_bound_ever(self) -> bool:
        return math.isfinite(self.per_device_batch)

    @property
    def any_batch(self) -> bool:
        """Compute-bound at every batch: no FSDP gather (X = 1), and T_TP / T_math < 1 (or no TP axis)."""
        return self.per_device_batch == 0

    @property
    def verdict(self) -> str:
        """One sentence: the bound and the term that binds, or why there is none."""
        p = self.problem
        a_y = "alpha" if p.tp_bandwidth is None else "alpha_Y"
        if not self.compute_bound_ever:
            return (f"never compute-bound: T_TP/T_math = {a_y} Y/(M_Y F) = {tp_share(p):.3g} >= 1 at every batch "
                    f"(Y = {p.tp} must stay below M_Y F/{a_y} = {p.my * p.d_ff / p.alpha_tp:,.1f})")
        if self.any_batch:
            tp = (f"T_TP/T_math = {a_y} Y/(M_Y F) = {tp_share(p):.3g} < 1 at every batch" if p.tp > 1 else
                  "no TP axis (Y = 1)")
            return f"compute-bound at any batch: no FSDP weight gather (X = 1) and {tp}; no term binds"
        return (f"compute-bound when B/N > {self.per_device_batch:,.1f} tokens per device "
                f"(the {'FSDP weight gather' if self.binding_term == 'fsdp' else 'TP activation traffic'} binds)")


def fsdp_bound(p: BatchProblem) -> float:
    """alpha / (Y M_X), or 0 with no FSDP axis."""
    return sc.fsdp_batch_bound(alpha=p.alpha, tp=p.tp, mx=p.mx) if p.fsdp > 1 else 0.0


def tp_share(p: BatchProblem) -> float:
    """T_TP / T_math = alpha_Y Y / (M_Y F), or 0 with no TP axis."""
    return sc.tp_comm_share(alpha=p.alpha_tp, tp=p.tp, my=p.my, d_ff=p.d_ff) if p.tp > 1 else 0.0


def solve_batch(p: BatchProblem) -> BatchAnswer:
    """Smallest B/N with T_math >= T_comms, and the term that binds there."""
    share = tp_share(p)
    if share >= 1:  # T_TP >= T_math at every batch
        return BatchAnswer(p, math.inf, "tp")
    per_device = sc.fsdp_tp_batch_per_device(fsdp_bound=fsdp_bound(p), tp_share=share, overlap=p.overlap)
    if p.fsdp == 1:  # no weight gather: T_math / T_comms = 1 / share > 1 at every B, so B/N = 0 and nothing binds
        return BatchAnswer(p, per_device, "none")
    t = p.times(per_device * p.devices)
    return BatchAnswer(p, per_device, "fsdp" if t["fsdp"] >= t["tp"] else "tp")


def check_problem(p: BatchProblem) -> None:
    """One clear line for inputs the formulas cannot take."""
    for name in ("fsdp", "tp", "mx", "my", "d_model", "d_ff"):
        value = getattr(p, name)
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
            raise CostModelError(f"{name} must be a positive integer (got {value!r})")
    for name, flag in (("peak_flops", "--peak-flops"), ("bandwidth", "--ici-bandwidth"), ("w_tp", "--ici-bandwidth")):
        value = getattr(p, name)
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 < value < math.inf:
            raise CostModelError(f"{flag} must be a positive finite number (got {value!r})")


def require_compute_bound(p: BatchProblem) -> BatchAnswer:
    """solve_batch's answer, or one line where the layout is never compute-bound (solve, explain, the api)."""
    answer = solve_batch(p)
    if not answer.compute_bound_ever:
        raise CostModelError(f"TP degree Y = {p.tp} is never compute-bound: Y must stay below M_Y F/alpha_Y = "
                             f"{p.my * p.d_ff / p.alpha_tp:,.1f}")
    return answer

