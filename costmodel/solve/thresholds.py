"""Single-strategy compute-bound thresholds on a device's network levels (Scaling Book).

DP / FSDP: B/X > alpha / M_X with alpha = C / W; TP: Y < M_Y F / alpha; across slices over DCN:
B per slice > C / W_dcn. On GPUs alpha uses the level the data axis crosses (NVLink or the NIC).
"""

from __future__ import annotations

from costmodel.formulas import scaling as sc
from costmodel.record import record


@record
class Threshold:
    """The batch above which one strategy is compute-bound, with its condition in letters."""

    strategy: str
    condition: str  # what must hold, in Scaling Book letters
    value: float
    unit: str


def single_strategy_thresholds(hardware, *, d_ff: int, peak_flops: float, bandwidth: float) -> list[Threshold]:
    """Thresholds for pure DP/FSDP, the TP degree limit and DCN, on ``hardware``'s levels."""
    rows = []
    if hardware.kind == "tpu":
        ici = hardware.level("ici")
        alpha = sc.intensity(peak_flops=peak_flops, bandwidth=bandwidth)
        for m in range(1, (ici.torus_axes or 1) + 1):
            rows.append(Threshold(f"DP/FSDP over {m} torus ax" + ("es" if m > 1 else "is"),
                                  f"B/X > alpha/M_X, M_X = {m}", sc.data_batch_per_device(alpha=alpha, mx=m),
                                  "tokens per device"))
        for m in range(1, (ici.torus_axes or 1) + 1):
            rows.append(Threshold(f"TP over {m} torus ax" + ("es" if m > 1 else "is"),
                                  f"Y < M_Y F/alpha, M_Y = {m}", sc.tp_degree_limit(alpha=alpha, my=m, d_ff=d_ff),
                                  "largest TP degree"))
        levels = [lvl for lvl in hardware.network if lvl.kind == "dcn"]
    else:
        levels = list(hardware.network)
    for level in levels:
        alpha = sc.intensity(peak_flops=peak_flops, bandwidth=level.bandwidth_bytes_per_s)
        scope = "across slices" if level.kind == "dcn" else (
            f"within one {level.name} domain" if level.domain_size else f"across nodes ({level.name})")
        unit = "tokens per slice" if level.kind == "dcn" else "tokens per device"
        rows.append(Threshold(f"DP/FSDP {scope}", f"B > C/W_{level.name}",
                              sc.data_batch_per_device(alpha=alpha, mx=1), unit))
        if hardware.kind != "tpu":  # a TPU's TP runs on the torus (above), not over DCN
            rows.append(Threshold(f"TP {scope}", f"Y < F/alpha_{level.name}",
                                  sc.tp_degree_limit(alpha=alpha, my=1, d_ff=d_ff), "largest TP degree"))
    return rows
