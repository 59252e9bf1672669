"""cost4d step against NVIDIA's DGX Cloud H100 recipes (bf16 rows of the training set).

    python benchmarks/check_step_dgxc.py [CSV]          # predicted vs measured with the shipped spec
    python benchmarks/check_step_dgxc.py --fit [CSV]    # fit h100-sxm's sustained_fraction, leave-one-workload-out
    python benchmarks/check_step_dgxc.py --fit-fp8 [CSV]  # then its fp8_efficiency on the fp8 rows

Each row of shared/data/training-runs/nvidia_dgxc_h100_training.csv gives a workload, a GPU count,
the measured step time and the layout in words; the layouts are written out below from the
`config` column (NeMo: distributed optimizer as --fsdp N --zero 1, SP with TP; MaxText: pure FSDP).
The 405B runs split their layers as NeMo's recipe does, the embedding and the loss counting as a layer each
(``split="ends"``: 126 + 2 over 8 x 8 chunks); its 32-128 GPU columns are proxy models of 8, 30 and 62 layers with
their own GBS and PP (NVIDIA/dgxc-benchmarking@741c886 llama3.1/llama31_utils.py, llama31_auto_configs).
Rows cost4d cannot express are listed with the reason. Prints predicted vs measured step time and the error per
row, per workload and overall.
"""

from __future__ import annotations

import csv
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from costmodel.cost.evaluate import evaluate_layout  # noqa: E402
from costmodel.specs.layout import Layout  # noqa: E402
from costmodel.specs.load import load_hardware, load_model, load_recipe  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "training-runs" / "nvidia_dgxc_h100_training.csv"


@dataclass(frozen=True)
class Case:
    workload: str
    gpus: int
    measured_s: float
    model: str | None = None
    recipe: str = "megatron"
    layout: dict | None = None
    skipped: str | None = None
    layers: int | None = None  # a proxy model's layer count (the rest of ``model`` as it is)
    precision: str = "bf16"
    fp8_casts: str = "te"  # MaxText: XLA fuses the fp8 quantization into its neighbours


def _nemo(model, gpus, *, tp, pp, cp, vp, per_replica_dp, microbatches, seq, split="even"):
    dp = gpus // per_replica_dp
    return dict(model=model, layout=dict(
        tp=tp, sp=tp > 1, pp=pp, cp=cp, fsdp=dp, zero=1, tokens=seq, microbatches=microbatches if pp > 1 else None,
        grad_accum=1 if pp > 1 else microbatches, schedule="interleaved" if vp > 1 else "1f1b", chunks=vp,
        split=split))


#: the 405B recipe's proxies: GPUs -> (layers, PP, VP, GBS) (llama31_auto_configs; TP8 CP2 throughout)
PROXIES_405B = {32: (8, 1, 1, 64), 64: (30, 4, 8, 64), 128: (62, 4, 8, 128)}


def case(row: dict) -> Case:
    """The layout of one row, from its `config` text (see the module docstring)."""
    name, gpus, measured = row["workload"], int(row["gpus"]), float(row["step_time_s"])
    precision = "fp8" if "FP8" in name else "bf16"
    base = Case(name, gpus, measured, precision=precision)
    if name.startswith("Llama 3.1 8b"):  # TP1 PP1 CP2, DP = G/2, MBS1, GBS = 16 G: 32 micro-batches
        return Case(**{**base.__dict__, **_nemo("llama3-8b", gpus, tp=1, pp=1, cp=2, vp=1, per_replica_dp=2,
                                                microbatches=32, seq=8192)})
    if name.startswith("Llama 3.1 70b FP8"):  # TP4 PP8 CP1 VP5, DP = G/32, GBS = 2 G: 64 micro-batches
        return Case(**{**base.__dict__, **_nemo("llama3-70b", gpus, tp=4, pp=8, cp=1, vp=5, per_replica_dp=32,
                                                microbatches=64, seq=8192)})
    if name.startswith("Llama 3.1 70b"):  # TP4 PP4 CP2 VP5, DP = G/32, GBS = 2 G: 64 micro-batches
        return Case(**{**base.__dict__, **_nemo("llama3-70b", gpus, tp=4, pp=4, cp=2, vp=5, per_replica_dp=32,
                                                microbatches=64, seq=8192)})
    if name.startswith("Llama 3.1 405b"):  # TP8 PP8 CP2 VP8, DP = G/128, GBS = G/2: 64 micro-batches
        if gpus in PROXIES_405B:  # a proxy with fewer layers (the row's note)
            layers, pp, vp, gbs = PROXIES_405B[gpus]
            replica = 8 * pp * 2
            return Case(**{**base.__dict__, "layers": layers, **_nemo(
                "llama3-405b", gpus, tp=8, pp=pp, cp=2, vp=vp, per_replica_dp=replica,
                microbatches=gbs // (gpus // replica), seq=8192, split="ends")})
        return Case(**{**base.__dict__, **_nemo("llama3-405b", gpus, tp=8, pp=8, cp=2, vp=8, per_replica_dp=128,
                                                microbatches=64, seq=8192, split="ends")})
    if name.startswith("NeMo Megatron"):  # GPT-3 175B seq 2048, TP4 PP8 VP6, DP = G/32, GBS = 2 G: 64
        return Case(**{**base.__dict__, **_nemo("gpt3-175b", gpus, tp=4, pp=8, cp=1, vp=6, per_replica_dp=32,
                                                microbatches=64, seq=2048)})
    if name.startswith("Maxtext Llama3 70b"):  # FSDP 8 x dcn, per-device batch 2 x 8192, GA1
        # the row names no remat policy; only full recomputation fits (cost4d memory: none and selective
        # need 453 GB per device at --fsdp 128, full 39 GB), so full it is
        fsdp = {128: 128, 256: 256, 512: 128, 1024: 128, 2048: 128}[gpus]  # ici 8 x dcn_fsdp 16/32/16/16/16
        return Case(name, gpus, measured, model="llama3-70b", recipe="cs336", precision=precision, fp8_casts="fused",
                    layout=dict(fsdp=fsdp, dp=gpus // fsdp, zero=3, tokens=2 * 8192, recompute="full"))
    return Case(name, gpus, measured, skipped="workload not mapped")


def predicted(c: Case, hardware) -> float:
    model = load_model(c.model)
    if c.layers is not None:
        model = model.model_copy(update={"layers": c.layers})
    cost = evaluate_layout(model, load_recipe(c.recipe), Layout(**c.layout), hardware,
                           precision=c.precision, fp8_casts=c.fp8_casts)
    return cost.step.step_s


def cases(path=DATA) -> list[Case]:
    with open(path, newline="") as handle:
        return [case(row) for row in csv.DictReader(handle)]


def with_sustained(hardware, fraction: float, field: str = "sustained_fraction"):
    """The spec with another sustained_fraction (or fp8_efficiency): what the fit varies."""
    model = hardware.step_model.model_copy(update={field: fraction})
    return hardware.model_copy(update={"step_model": model})


def fit_sustained(sample: list[Case], hardware, field: str = "sustained_fraction") -> float:
    """The value of ``field`` with the smallest median |error|: steps of 0.01 from 0.30 to 1.00, then
    of 0.001 within 0.01 of the best (ties: the larger value)."""
    def score(milli: int) -> float:
        spec = with_sustained(hardware, milli / 1000, field)
        return statistics.median(abs(predicted(c, spec) / c.measured_s - 1) for c in sample)

    coarse = min(range(300, 1301, 10), key=lambda m: (score(m), -m))
    fine = range(max(300, coarse - 10), min(1300, coarse + 10) + 1)
    return min(fine, key=lambda m: (score(m), -m)) / 1000


def fit_report(all_cases: list[Case], hardware, precision: str = "bf16") -> dict:
    """In-sample and leave-one-workload-out median |error|: bf16 rows fit the sustained fraction; fp8
    rows (with the spec's sustained fraction) fit fp8_efficiency."""
    field = "sustained_fraction" if precision == "bf16" else "fp8_efficiency"
    sample = [c for c in all_cases if not c.skipped and c.precision == precision]
    fraction = fit_sustained(sample, hardware, field)
    spec = with_sustained(hardware, fraction, field)
    fitted = [predicted(c, spec) / c.measured_s - 1 for c in sample]
    inside = statistics.median(abs(e) for e in fitted)
    held, residuals = {}, list(fitted)  # the band spans the held-out rows' errors and the fitted rows' own
    for workload in sorted({c.workload for c in sample}):
        other = fit_sustained([c for c in sample if c.workload != workload], hardware, field)
        spec_out = with_sustained(hardware, other, field)
        errors = [predicted(c, spec_out) / c.measured_s - 1 for c in sample if c.workload == workload]
        residuals += errors
        held[workload] = (other, statistics.median(abs(e) for e in errors))
    band = (round(min(residuals), 3), round(max(residuals), 3))
    return {"fraction": fraction, "in_sample": inside, "rows": len(sample), "held_out": held, "band": band}


def main(argv: list[str]) -> None:
    if argv and argv[0] in ("--fit", "--fit-fp8"):
        h100 = load_hardware("h100-sxm")
        if argv[0] == "--fit":
            report = fit_report(cases(Path(argv[1]) if len(argv) > 1 else DATA), with_sustained(h100, 1.0))
            name = "sustained_fraction"
        else:
            report = fit_report(cases(Path(argv[1]) if len(argv) > 1 else DATA), h100, "fp8")
            name = "fp8_efficiency"
        print(f"{name} = {report['fraction']:.3f}: median |error| {report['in_sample']:.1%} in-sample "
              f"over {report['rows']} rows")
        for workload, (fraction, error) in report["held_out"].items():
            print(f"  leave out {workload:<26} fitted {fraction:.3f}, median |error| on it {error:.1%}")
        low, high = report["band"]
        print(f"leave-one-workload-out and in-sample errors range over {low:+.3f} .. {high:+.3f} (the printed band)")
        return
    hardware = load_hardware("h100-sxm")
    errors: dict[str, list[float]] = {}
    for c in cases(Path(argv[0]) if argv else DATA):
        if c.skipped:
            print(f"  skip {c.workload} x {c.gpus}: {c.skipped}")
            continue
        p = predicted(c, hardware)
        errors.setdefault(c.workload, []).append(p / c.measured_s - 1)
        print(f"  {c.workload:<26} {c.gpus:>5}  measured {c.measured_s:7.3f} s  predicted {p:7.3f} s  {p / c.measured_s - 1:+.1%}")
    every = [e for v in errors.values() for e in v]
    for name, values in errors.items():
        print(f"{name:<26} median error {statistics.median(values):+.1%} over {len(values)} rows")
    print(f"all: median |error| {statistics.median(abs(e) for e in every):.1%} over {len(every)} rows")


if __name__ == "__main__":
    main(sys.argv[1:])
