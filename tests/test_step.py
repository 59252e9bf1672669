"""Step time against Korthikanti et al. 2022 (arXiv:2205.05198) Table 5, on the shipped A100 spec."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent / "benchmarks"))
from check_step_korthikanti import TABLE, errors, korthikanti_case  # noqa: E402  (Table 3's configurations)

from costmodel import api
from costmodel.specs.load import load_hardware
from costmodel.specs.recipe import RECIPES
from costs import step as step_breakdown

H100 = load_hardware("h100-sxm")

A100 = load_hardware("a100-80gb")
TABLE_5_MFU = {"22B": 41.5, "175B": 51.4, "530B": 56.0, "1T": 56.3}  # % of 312 TFLOP/s, Table 5


def test_the_readme_states_the_held_out_errors():
    """Nothing in the A100 step model is fitted to Korthikanti's runs: the README's per-model errors (+a/-b/...% for
    22B/175B/530B/1T) are what `cost4d step` predicts, and within 15% of the measured iteration times."""
    found = errors(A100)
    readme = " ".join((Path(__file__).resolve().parents[1] / "README.md").read_text().split())
    said = "/".join(f"{100 * e:+.1f}" for e in found.values())
    assert f"`cost4d step` gives {said}% for 22B/175B/530B/1T" in readme
    assert all(abs(e) < 0.15 for e in found.values())
    from check_step_korthikanti import printed_ranges

    inside = [name for name, (low, high) in printed_ranges(A100).items() if low <= TABLE[name][-1] <= high]
    outside = [name for name in TABLE if name not in inside]
    assert f"holds the measured time for {len(inside)} of the 4 (not {', '.join(outside)})" in readme
    for name in TABLE:  # the check script's figure is the step's
        model, layout, measured = korthikanti_case(name)
        assert step_breakdown(model, RECIPES["megatron"], layout, A100).step_s == pytest.approx(
            (1 + found[name]) * measured, rel=1e-12)


def test_the_a100_step_model_is_sourced_not_fitted():
    """matmul_efficiency is the README's measured single kernel (86.9% of 312 TFLOP/s), the step fraction h100-sxm's
    fitted one, the HBM efficiency a measured stream kernel's (85.2%)."""
    sm, h100 = A100.step_model, load_hardware("h100-sxm").step_model
    readme = " ".join((Path(__file__).resolve().parents[1] / "README.md").read_text().split())
    assert sm.sustained_fraction == h100.sustained_fraction
    assert f"({100 * sm.matmul_efficiency:.1f}% of 312 TFLOP/s at its best shape)" in readme
    assert f"a measured stream kernel's bandwidth ({100 * sm.hbm_efficiency:.1f}% of 2,039 GB/s)" in readme
    borrowed = ("h100-sxm's fitted", "t_0 fitted on the H100 table")  # a run's fit, and a single-kernel table's
    before = sm.source.split("Nothing here is fitted")[0]
    assert "fitted" not in before.replace(borrowed[0], "").replace(borrowed[1], "")


@pytest.mark.parametrize("name", list(TABLE))
def test_model_flops_reproduce_the_papers_mfu(name):
    """Independent of any fit: our model FLOPs over the measured time give Table 5's MFU."""
    model, layout, measured = korthikanti_case(name)
    b = step_breakdown(model, RECIPES["megatron"], layout, A100)
    mfu = 100 * b.model_flops / (measured * b.devices * 312e12)
    assert mfu == pytest.approx(TABLE_5_MFU[name], abs=0.3)  # the paper prints one decimal


def test_step_cli_json():
    out = subprocess.run([sys.executable, "-m", "costmodel", "step", "--model", "llama3-8b", "--hardware", "h100-sxm",
                          "--fsdp", "8", "--tokens", "8192", "--json"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    payload = json.loads(out.stdout)
    assert payload["tokens_per_step"] == 8 * 8192
    assert payload["tokens_per_s"] == pytest.approx(payload["tokens_per_step"] / payload["step_s"])
    assert 0 < payload["mfu"] <= payload["hfu"] <= 1


def _without_step_model(tmp_path) -> str:
    text = (Path(__file__).resolve().parents[1] / "hardware" / "tpu-v5p.toml").read_text()
    path = tmp_path / "no-step.toml"
    path.write_text(text[:text.index("[step_model]")])
    return str(path)


@pytest.mark.parametrize("args, needle", [
    (["--hardware", "NO_STEP", "--fsdp", "16", "--tokens", "4096"], "no step_model section"),
    (["--hardware", "h100-sxm", "--fsdp", "8"], "--tokens must be positive"),
])
def test_step_bad_input(args, needle, tmp_path):
    args = [_without_step_model(tmp_path) if a == "NO_STEP" else a for a in args]
    out = subprocess.run([sys.executable, "-m", "costmodel", "step", "--model", "xxl", *args],
                         capture_output=True, text=True)
    assert out.returncode == 2 and needle in out.stderr and len(out.stderr.strip().splitlines()) == 1


@pytest.mark.slow
@pytest.mark.skipif(not (Path(__file__).resolve().parents[2] / "shared" / "data" / "training-runs").is_dir(),
                    reason="../shared/data is beside the checkout (CI links it)")
def test_h100_sustained_fraction_is_the_dgxc_fit_and_the_readme_says_so():
    """h100-sxm's sustained_fraction and band are what benchmarks/check_step_dgxc.py --fit gives, and the
    README's figures are its output."""
    import importlib.util
    import re
    import statistics

    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("check_step_dgxc", root / "benchmarks" / "check_step_dgxc.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    from costmodel.specs.load import load_hardware

    h100 = load_hardware("h100-sxm")
    report = module.fit_report(module.cases(), module.with_sustained(h100, 1.0))
    sm = h100.step_model
    assert (sm.sustained_fraction, (sm.error_low, sm.error_high)) == (report["fraction"], report["band"])
    readme = " ".join((root / "README.md").read_text().split())
    said = re.search(r"sustains, \*\*([\d.]+)\*\*.*?Median \|error\| of the step time ([\d.]+)% in-sample over (\d+) "
                     r"rows; leaving each workload out of the fit, ([\d.]+)% to ([\d.]+)%", readme)
    assert said
    held = [error for _, error in report["held_out"].values()]
    assert [float(x) for x in said.groups()] == [report["fraction"], round(100 * report["in_sample"], 1),
                                                  report["rows"], round(100 * min(held), 1), round(100 * max(held), 1)]
    unfitted = [module.predicted(c, module.with_sustained(h100, 1.0)) / c.measured_s - 1 for c in module.cases()
                if not c.skipped and c.precision == "bf16"]
    low, high = re.search(r"Without it \(a fraction of 1\) every row is (\d+)-(\d+)% too", readme).groups()
    assert (round(-100 * max(unfitted)), round(-100 * min(unfitted))) == (int(low), int(high))
    shipped = [module.predicted(c, h100) / c.measured_s - 1 for c in module.cases()
               if not c.skipped and c.precision == "bf16"]
    assert statistics.median(abs(e) for e in shipped) == report["in_sample"]
    gemm = h100.model_copy(update={"step_model": sm.model_copy(update={"attention_table": None,
                                                                        "attention_kernel": None})})
    before = module.fit_report(module.cases(), gemm)  # attention at the GEMM efficiency, full s x s
    said = re.search(r"\(`--attention-kernel gemm`, the model before\) gives ([\d.]+)% in-sample and ([\d.]+)% to "
                     r"([\d.]+)% per left-out workload", readme)
    held_before = [error for _, error in before["held_out"].values()]
    assert [float(x) for x in said.groups()] == [round(100 * before["in_sample"], 1), round(100 * min(held_before), 1),
                                                  round(100 * max(held_before), 1)]
    fp8 = module.fit_report(module.cases(), h100, "fp8")
    assert (sm.fp8_efficiency, (sm.fp8_error_low, sm.fp8_error_high)) == (fp8["fraction"], fp8["band"])
    said = re.search(r"`fp8_efficiency` \*\*([\d.]+)\*\*.*?([\d.]+)% median \|error\| in-sample, but leaving a "
                     r"workload out gives ([\d.]+)% to ([\d.]+)% on it", readme)
    assert said
    held = [error for _, error in fp8["held_out"].values()]
    assert [float(x) for x in said.groups()] == [fp8["fraction"], round(100 * fp8["in_sample"], 1),
                                                  round(100 * min(held), 1), round(100 * max(held), 1)]
    import dataclasses

    uncounted = module.fit_report([dataclasses.replace(c, fp8_casts="fused") for c in module.cases()], h100, "fp8")
    alone = [error for _, error in uncounted["held_out"].values()]
    said = re.search(r"one factor alone giving ([\d.]+)% in-sample and ([\d.]+)% to ([\d.]+)%", readme)
    assert said and [float(x) for x in said.groups()] == [round(100 * uncounted["in_sample"], 1),
                                                          round(100 * min(alone), 1), round(100 * max(alone), 1)]


@pytest.mark.slow
def test_step_json_has_the_range():
    args = [sys.executable, "-m", "costmodel", "step", "--model", "llama3-8b", "--recipe", "megatron", "--tp", "2",
            "--sp", "--fsdp", "4", "--zero", "1", "--tokens", "8192", "--json", "--hardware"]
    h100 = json.loads(subprocess.run(args + ["h100-sxm"], capture_output=True, text=True, check=True).stdout)
    assert h100["step_s_low"] < h100["step_s"] < h100["step_s_high"]
    a100 = json.loads(subprocess.run(args + ["a100-80gb"], capture_output=True, text=True, check=True).stdout)
    assert a100["step_s_low"] < a100["step_s"] < a100["step_s_high"]  # borrowed, widened (the test below)
    b200 = json.loads(subprocess.run(args + ["b200"], capture_output=True, text=True, check=True).stdout)
    assert b200["step_s_low"] is None and b200["step_s_high"] is None  # no fraction range: no band


@pytest.mark.slow
def test_mfu_attention_convention():
    """Causal MFU removes half of attention's Q K^T and A V (3 L x 4 s a d_h per token, forward and
    backward) from the model FLOPs; the step time does not change."""
    base = [sys.executable, "-m", "costmodel", "step", "--model", "llama3-8b", "--hardware", "h100-sxm", "--recipe",
            "megatron", "--fsdp", "8", "--zero", "1", "--tokens", "8192", "--json", "--attention-flops"]
    full, causal = (json.loads(subprocess.run(base + [c], capture_output=True, text=True, check=True).stdout)
                    for c in ("full", "causal"))
    assert full["step_s"] == causal["step_s"] and full["mfu_convention"] == "attention full, against the bf16 peak"
    attention = 3 * 32 * 4 * 8192 * 32 * 128  # per token
    model = full["mfu"] * full["step_s"] * 8 * 989.4e12 / full["tokens_per_step"]  # model FLOPs per token
    assert causal["mfu"] / full["mfu"] == pytest.approx((model - attention / 2) / model, rel=1e-12)


@pytest.mark.parametrize("tp_overlap, p2p_overlap", [("none", "none"), ("overlap", "none"), ("overlap", "overlap")])
def test_critical_path_sums_to_the_step_and_overlap_hides(tp_overlap, p2p_overlap):
    base = [sys.executable, "-m", "costmodel", "step", "--model", "llama3-70b", "--hardware", "h100-sxm", "--recipe",
            "megatron", "--tp", "8", "--sp", "--pp", "4", "--fsdp", "8", "--zero", "1", "--tokens", "8192",
            "--microbatches", "16", "--json"]
    data = json.loads(subprocess.run(base + ["--tp-overlap", tp_overlap, "--p2p-overlap", p2p_overlap],
                                     capture_output=True, text=True, check=True).stdout)
    parts = data["breakdown"]
    assert sum(parts.values()) == pytest.approx(data["step_s"], rel=1e-12)
    tp, matmul = data["totals"]["tp_s"], data["totals"]["matmul_s"]
    assert parts["tp_exposed_s"] == (tp if tp_overlap == "none" else pytest.approx(max(0.0, tp - matmul)))
    assert data["overlaps"] == {"data": "overlap", "tp": tp_overlap, "p2p": p2p_overlap, "cp": "none"}


def test_cp_traffic_hides_behind_attention_where_ring_attention_overlaps_it():
    """--cp-overlap: the exact accounting keeps CP on the critical path (as the step fraction was fitted); a framework's
    ring attention hides its passes behind the attention blocks, an all-gather of K, V (torch's allgather rotation,
    waited for at the second block) behind the first block only (attention / c), and only what exceeds them shows;
    the CP ranks' gradient all-reduce (weights replicated over CP) and Ulysses' all-to-alls (a2a) never hide."""
    from costmodel.cost.evaluate import evaluate_layout
    from costmodel.specs.framework_catalog import FRAMEWORKS
    from costmodel.specs.layout import Layout
    from costmodel.specs.load import load_hardware, load_model, load_recipe

    spec, h100 = load_model("llama3-8b"), load_hardware("h100-sxm")

    def cost(framework=None, recipe="fsdp2", **options):
        layout = Layout(**{"fsdp": 4, "cp": 2, "tokens": 16384, **options.pop("layout", {})})
        return evaluate_layout(spec, load_recipe(recipe), layout, h100,
                               framework=FRAMEWORKS[framework] if framework else None, **options)

    def traffic(c, op):
        return sum(r.seconds for r in c.collectives if r.collective.axis == "cp" and r.collective.op == op)

    exact, titan = cost(), cost("torchtitan")
    assert exact.step.cp_overlap == "none" and exact.step.cp_exposed_s == exact.step.cp_s > 0
    attention = titan.step.attention_s
    assert titan.step.cp_overlap == "overlap" and traffic(titan, "all-gather") > 0
    assert titan.step.cp_exposed_s == pytest.approx(max(0.0, traffic(titan, "all-gather") - attention / 2)
                                                    + max(0.0, traffic(titan, "send/recv") - attention / 2), abs=1e-15)
    assert cost("torchtitan", cp_overlap="none").step.cp_exposed_s == titan.step.cp_s
    ring = cost(cp_overlap="overlap")  # the exact accounting's ring: its gradient all-reduce stays exposed
    assert traffic(ring, "all-reduce") > 0 and ring.step.cp_exposed_s == pytest.approx(
        traffic(ring, "all-reduce") + max(0.0, traffic(ring, "send/recv") - ring.step.attention_s / 2), abs=1e-15)
    ulysses = cost("megatron", "megatron", layout={"zero": 1, "cp_kind": "a2a"}).step
    assert ulysses.cp_overlap == "none" and ulysses.cp_exposed_s == ulysses.cp_s > 0
    forced = cost("megatron", "megatron", layout={"zero": 1, "cp_kind": "a2a"}, cp_overlap="overlap").step
    assert forced.cp_exposed_s == forced.cp_s  # an all-to-all feeds attention: nothing to hide it behind
    assert cost("deepspeed", "cs336", layout={"zero": 1}).step.cp_overlap == "none"  # Ulysses, its only kind
    assert titan.step.step_s < cost("torchtitan", cp_overlap="none").step.step_s


def test_once_per_step_reduction_hides_behind_the_last_backward_only():
    """DDP with gradient accumulation reduces once, when the last micro-batch's backward makes the
    gradients final: accumulating 4 micro-batches must not hide 4 backwards' worth (a notebook found it)."""
    from costmodel.cost.evaluate import evaluate_layout
    from costmodel.specs.layout import Layout
    from costmodel.specs.load import load_hardware, load_model, load_recipe

    def exposed(k):
        step = evaluate_layout(load_model("nanotron-1b"), load_recipe("megatron"), Layout(dp=64, tokens=1024,
                               grad_accum=k), load_hardware("h100-sxm")).step
        return step.data_exposed_s, step.data_comm_s

    (one, comm), (four, same) = exposed(1), exposed(4)
    assert comm == same and one > 0
    assert four == pytest.approx(one, rel=1e-12)  # the same last backward hides the same traffic


@pytest.mark.slow
def test_every_shipped_device_has_a_sourced_step_model():
    """`step` runs on every device in hardware/ (issue 11): each has a step_model whose source says
    where its numbers come from."""
    from costmodel.specs.load import load_hardware

    names = sorted(p.stem for p in (Path(__file__).resolve().parents[1] / "hardware").glob("*.toml"))
    assert len(names) >= 12
    for name in names:
        device = load_hardware(name)
        assert device.step_model is not None and device.step_model.source, name
        out = subprocess.run([sys.executable, "-m", "costmodel", "step", "--model", "llama3-8b", "--hardware", name,
                              "--fsdp", "8", "--tokens", "8192", "--json"], capture_output=True, text=True)
        assert out.returncode == 0, (name, out.stderr)
        assert 0 < json.loads(out.stdout)["mfu"] < 1, name


def test_readme_device_step_model_figures_are_the_specs():
    """The README's device efficiencies are the values in hardware/*.toml, not typed apart."""
    from costmodel.measure.matmul import table_efficiency
    from costmodel.specs.load import load_hardware, table_file

    readme = " ".join((Path(__file__).resolve().parents[1] / "README.md").read_text().split())
    eff = {name: load_hardware(name).step_model.matmul_efficiency for name in ("mi325x", "tpu-v5e", "trn2")}
    b200 = load_hardware("b200")
    largest = table_efficiency(table_file(b200, b200.step_model.matmul_table), 4096, 4096, 4096, b200.flops("bf16"))
    assert f"its 4096^3 at {largest:.0%} of dense peak" in readme
    assert f"hipBLASLt {eff['mi325x']:.1%}" in readme
    assert f"matmul at {eff['tpu-v5e']:.1%} on v5e" in readme
    assert f"{632 / 667:.3f}" == f"{eff['trn2']:.3f}" and "632 of the chip's 667" in readme
    assert all(load_hardware(n).step_model.matmul_efficiency == eff["tpu-v5e"] for n in ("tpu-v4", "tpu-v5p", "tpu-v6e"))


@pytest.mark.parametrize("framework", ["exact", "nanotron"])
def test_step_json_says_whether_it_fits_as_memory_does(framework):
    """`step --json` carries the memory verdict its text prints: the same need, capacity and verdict as
    `memory --hardware --json` for the same flags."""
    from typer.testing import CliRunner

    from costmodel.cli import app

    flags = ["--model", "llama3-70b", "--hardware", "h100-sxm", "--tp", "8", "--pp", "4", "--sp", "--fsdp", "8",
             "--zero", "1", "--tokens", "8192", "--microbatches", "16", "--recompute", "full", "--framework",
             framework, "--json"]  # full: nanotron's recompute_layer (it has no selective mode)
    step, memory = (json.loads(CliRunner().invoke(app, [command, *flags]).stdout) for command in ("step", "memory"))
    fits = memory["fits"]
    assert (step["framework"], step["recipe"]) == (memory["framework"], memory["recipe"]) == (
        framework, {"exact": "cs336", "nanotron": "megatron"}[framework])
    assert (step["memory_bytes"], step["memory_capacity_bytes"], step["memory_verdict"], step["peak_phase"]) == (
        fits["needed_bytes"], fits["capacity_bytes"], fits["verdict"], memory["peak_phase"])


def test_data_overlap_defaults_to_the_frameworks_own():
    """Unset, --data-overlap takes the framework's default: Megatron-core's overlap_grad_reduce is False
    (distributed_data_parallel_config.py), so megatron exposes all the data-axis traffic; DeepSpeed's overlap_comm
    is on at ZeRO-3 only (zero/config.py L351-353) and off under its pipeline engine; torchtitan (FSDP2) and the
    exact accounting overlap. The flag wins over any default."""
    from costmodel.cost.evaluate import evaluate_layout
    from costmodel.specs.framework_catalog import FRAMEWORKS
    from costmodel.specs.layout import Layout
    from costmodel.specs.load import load_hardware, load_model, load_recipe

    spec, h100 = load_model("llama3-8b"), load_hardware("h100-sxm")

    def step(framework, recipe="megatron", overlap=None, **layout):
        frame = FRAMEWORKS[framework] if framework != "exact" else None
        return evaluate_layout(spec, load_recipe(recipe), Layout(tokens=8192, grad_accum=4, **layout), h100,
                               framework=frame, overlap=overlap).step

    mega = step("megatron", fsdp=16, zero=1)
    assert mega.overlap == "none" and mega.data_exposed_s == mega.data_comm_s > 0
    assert "overlap_grad_reduce" in mega.overlap_why
    told = step("megatron", overlap="overlap", fsdp=16, zero=1)
    assert told.overlap == "overlap" and told.data_exposed_s < mega.data_exposed_s and told.overlap_why == "--data-overlap"
    assert mega.step_s - told.step_s == pytest.approx(mega.data_exposed_s - told.data_exposed_s, rel=1e-12)
    for zero, hidden in ((1, False), (2, False), (3, True)):
        ds = step("deepspeed", "zero", fsdp=16, zero=zero)
        assert ds.overlap == ("overlap" if hidden else "none"), zero
        assert (ds.data_exposed_s == ds.data_comm_s) is not hidden or ds.data_comm_s == 0
    on = FRAMEWORKS["deepspeed"].model_copy(update={"overlap_comm": True})
    assert evaluate_layout(spec, load_recipe("zero"), Layout(tokens=8192, fsdp=16, zero=1), h100,
                           framework=on).step.overlap == "overlap"
    piped = evaluate_layout(spec, load_recipe("zero"), Layout(tokens=8192, fsdp=4, zero=1, pp=2, microbatches=4), h100,
                            framework=on).step
    assert piped.overlap == "none"  # the pipeline engine turns overlap_comm off (engine.py L1639-1642)
    asked = evaluate_layout(spec, load_recipe("zero"), Layout(tokens=8192, fsdp=4, zero=1, pp=2, microbatches=4), h100,
                            framework=on, overlap="overlap").step
    assert asked.overlap == "overlap" and "pipeline engine cannot" in asked.overlap_why  # the flag holds, and is told
    assert step("torchtitan", "cs336", fsdp=16, zero=3).overlap == "overlap"
    assert step("exact", "cs336", fsdp=16, zero=3).overlap == "overlap"


def test_a_plans_mask_of_overlaps_is_each_layouts_own():
    """Arrays over pipeline depths take DeepSpeed's overlap layout by layout, as single layouts do: with overlap_comm
    on, hidden without a pipeline and exposed under its pipeline engine."""
    import numpy as np

    from costmodel.cost.evaluate import evaluate
    from costmodel.cost.point import Point
    from costmodel.cost.shape import Shape
    from costmodel.specs.framework_catalog import FRAMEWORKS
    from costmodel.specs.load import load_hardware, load_model, load_recipe

    shape, zero, h100 = Shape.of(load_model("llama3-8b")), load_recipe("zero"), load_hardware("h100-sxm")
    ds = FRAMEWORKS["deepspeed"].model_copy(update={"overlap_comm": True})
    pp, m, acc = np.array([1, 2, 4]), np.array([1, 4, 4]), np.array([4, 1, 1])
    arrays = evaluate(shape, zero, Point(fsdp=np.array([16, 8, 4]), zero=1, pp=pp, microbatches=m, tokens=np.array([8192] * 3),
                                         grad_accum=acc), h100, framework=ds).step
    assert arrays.overlap == "by layout"
    for i in range(3):
        one = evaluate(shape, zero, Point(fsdp=16 // int(pp[i]), zero=1, pp=int(pp[i]), microbatches=int(m[i]), tokens=8192,
                                          grad_accum=int(acc[i])), h100, framework=ds).step
        assert one.overlap == ("overlap" if pp[i] == 1 else "none")
        assert np.isclose(arrays.data_exposed_s[i], one.data_exposed_s) and np.isclose(arrays.step_s[i], one.step_s)


def test_gemm_shape_curve_by_hand_and_its_fit():
    """A one-kernel device: t = F / (e_max C) + t_0 through the measured kernel, capped at it. A100 by hand at the
    kernel (its own efficiency), above it (capped), and at a small GEMM; t_0 in the specs is what
    benchmarks/fit_gemm_overhead.py fits on the H100 table, and the README's figures are its report."""
    import importlib.util

    from costmodel.formulas.step import gemm_shape_efficiency
    from costmodel.specs.load import load_hardware

    a100 = load_hardware("a100-80gb").step_model
    peak, t0, e_m = 312e12, 5.9e-6, 0.869
    f_m = 2 * 1024 * 10240 * 5120
    e_max = f_m / (peak * (f_m / (e_m * peak) - t0))

    def curve(flops):
        return gemm_shape_efficiency(flops=flops, peak_flops=peak, measured_flops=f_m, measured_efficiency=e_m,
                                     overhead_s=t0)

    assert curve(f_m) == pytest.approx(e_m, rel=1e-12) and curve(10 * f_m) == e_m
    small = 2 * 2048 * 1792 * 4096  # Llama 3 8B's MLP GEMM at TP 8, 2,048 tokens
    assert curve(small) == pytest.approx(small / (peak * (small / (e_max * peak) + t0)), rel=1e-12)
    assert curve(small) < e_m
    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("fit_gemm_overhead", root / "benchmarks" / "fit_gemm_overhead.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    report = module.report()
    assert all(load_hardware(n).step_model.matmul_overhead_s == report["overhead_s"] for n in ("a100-80gb", "mi325x"))
    assert a100.matmul_shape == [1024, 10240, 5120] and a100.matmul_efficiency == e_m
    readme = " ".join((root / "README.md").read_text().split())
    errs = report["errors"]
    said = (f"plus a fixed {report['overhead_s'] * 1e6:.1f} us", f"fits t_0 on the H100 table: {errs['h100-sxm'][0]:.1%}",
            f"predicts the B200 table at {errs['b200'][0]:.1%} and AMD gfx942's at {errs['gfx942'][0]:.1%}, where one "
            f"constant efficiency errs by {errs['b200'][1]:.1%} and {errs['gfx942'][1]:.1%}")
    assert all(text in readme for text in said), said


def test_one_kernel_devices_slow_small_gemms():
    """On A100 a small GEMM (8B at TP 8, 2,048 tokens) runs below the measured kernel's 86.9%; large ones do not."""
    from costmodel.cost.gemm import matmul_efficiency
    from costmodel.cost.point import Point
    from costmodel.cost.shape import Shape
    from costmodel.specs.load import load_hardware, load_model

    a100, shape = load_hardware("a100-80gb"), Shape.of(load_model("llama3-8b"))
    sustained = a100.step_model.sustained_fraction
    assert matmul_efficiency(shape, Point(tp=8, sp=True, tokens=2048), a100) < 0.869 * sustained
    assert matmul_efficiency(shape, Point(tokens=16384), a100) == 0.869 * sustained


def test_the_500w_variant_range_allows_for_the_nvl_peak():
    """torchtitan's H100s run at 500 W, their peak "between SXM and NVL": the variant keeps h100-sxm's point and
    widens its band's slow end by 989.4 / 835.5 (NVL's 1,671 sparse TFLOP/s halved), bf16 and fp8 alike."""
    from costmodel.specs.load import load_hardware

    sxm, variant = load_hardware("h100-sxm").step_model, load_hardware("h100-96gb-500w").step_model
    nvl = 1671e12 / 2 / load_hardware("h100-sxm").flops("bf16")
    assert variant.error_low == round((1 + sxm.error_low) * nvl - 1, 3) and variant.error_high == sxm.error_high
    assert variant.fp8_error_low == round((1 + sxm.fp8_error_low) * nvl - 1, 3)
    assert variant.fp8_error_high == sxm.fp8_error_high and variant.sustained_fraction == sxm.sustained_fraction


def test_a_measured_kernel_smaller_than_the_per_gemm_time_is_refused(tmp_path):
    """A one-kernel spec whose kernel takes less than matmul_overhead_s would give a negative e_max (negative step
    times): refused in one line naming both fields."""
    from hostile import assert_refused, run

    text = (Path(__file__).resolve().parents[1] / "hardware" / "a100-80gb.toml").read_text()
    bad = tmp_path / "bad.toml"
    bad.write_text(text.replace("matmul_shape = [1024, 10240, 5120]", "matmul_shape = [64, 64, 64]"))
    assert_refused(run(["step", "-m", "llama3-8b", "--hardware", str(bad), "--fsdp", "8", "--tokens", "4096"]),
                   "matmul_shape 64 x 64 x 64", "matmul_overhead_s")


def test_a_copy_with_another_peak_scales_the_gemm_table(tmp_path):
    """The GEMM table measured FLOP/s on its own device (tables_peak_flops): a copy of h100-sxm whose bf16
    peak is edited keeps the table's efficiency by shape, so its matmuls take peak-proportionally longer."""
    from costmodel.cost.evaluate import evaluate_layout
    from costmodel.specs.layout import Layout
    from costmodel.specs.load import load_hardware, load_model, load_recipe

    text = (Path(__file__).resolve().parents[1] / "hardware" / "h100-sxm.toml").read_text()
    assert "bf16 = 989.4e12" in text
    slow = tmp_path / "slow.toml"
    slow.write_text(text.replace("bf16 = 989.4e12", "bf16 = 494.7e12").replace('name = "h100-sxm"', 'name = "slow"'))
    layout = Layout(tokens=8192, fsdp=8, zero=1)
    spec, recipe = load_model("llama3-8b"), load_recipe("megatron")
    fast, half = (evaluate_layout(spec, recipe, layout, load_hardware(h)).step for h in ("h100-sxm", str(slow)))
    assert half.matmul_efficiency == fast.matmul_efficiency
    assert half.matmul_s == pytest.approx(2 * fast.matmul_s, rel=1e-12)
    assert half.attention_s == pytest.approx(2 * fast.attention_s, rel=1e-12)  # flash attention's rates too
    assert [r / 2 for r in fast.attention_rates] == pytest.approx(half.attention_rates, rel=1e-12)


def test_the_readme_states_the_palm_check():
    """PaLM 540B on TPU v4 (Chowdhery et al. 2022 Table 3, 46.2% MFU, 57.8% HFU), a held-out check: the README's
    figures are what the check script computes, and its layout on the command line gives the same MFU."""
    from typer.testing import CliRunner

    from check_step_palm import MEASURED_HFU, MEASURED_MFU, predicted
    from costmodel.cli import app

    step = predicted()
    mfu, hfu = step.mfu_with("full"), step.hfu
    readme = " ".join((Path(__file__).resolve().parents[1] / "README.md").read_text().split())
    assert ("46.2% MFU on 6144 chips" in readme and f"`cost4d step` gives {mfu:.1%} MFU ({mfu / MEASURED_MFU - 1:+.1%})"
            in readme and f"whose HFU ({hfu:.1%}) counts more rerun work than PaLM's {MEASURED_HFU:.1%}" in readme)
    assert abs(mfu / MEASURED_MFU - 1) < 0.10  # the bound for a held-out dataset
    from check_step_palm import printed_mfu_range

    low, high = printed_mfu_range(step)
    assert low <= MEASURED_MFU <= high and f"the printed range, as MFU {low:.1%} to {high:.1%}, holds it" in readme
    args = ("step --model palm-540b --hardware tpu-v4 --tp 12 --tp-kv replicate --fsdp 256 --dp 2 --zero 3 "
            "--tokens 8192 --recompute full --recipe megatron --json").split()
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["mfu"] == pytest.approx(mfu, rel=1e-12)


def test_the_readme_states_what_eager_kernels_cost():
    """The README's torchtitan eager figures are `step`'s, with --kernels eager (the profile's) and fused."""
    from typer.testing import CliRunner

    from costmodel.cli import app

    flags = ["--model", "llama3-8b", "--hardware", "h100-sxm", "--fsdp", "8", "--tokens", "16384",
             "--framework", "torchtitan", "--json"]
    eager, fused = (json.loads(CliRunner().invoke(app, ["step", *flags, *extra]).stdout)
                    for extra in ([], ["--kernels", "fused"]))
    assert (eager["kernels"], fused["kernels"]) == ("eager", "fused")
    assert eager["fsdp_copy_s"] == fused["fsdp_copy_s"] > 0  # FSDP2's copies: the same kernels either way
    ratio = ((eager["breakdown"]["elementwise_s"] - eager["fsdp_copy_s"])
             / (fused["breakdown"]["elementwise_s"] - fused["fsdp_copy_s"]))
    longer = eager["step_s"] / fused["step_s"] - 1
    readme = " ".join((Path(__file__).resolve().parents[1] / "README.md").read_text().split())
    assert f"take {ratio:.2f}x their fused time and the step {longer:.1%} longer" in readme


def test_a_borrowed_step_fraction_widens_the_band_over_its_range():
    """a100-80gb borrows h100-sxm's fraction (0.876) and band: the range times the matmuls and attention at fractions
    1 and 0.777 (its base / boost clock), stretched by the bubble, then adds the band; exposed data traffic and the
    optimizer step do not scale. By hand, with traffic exposed and with a pipeline."""
    from typer.testing import CliRunner

    from costmodel.cli import app
    from costmodel.cost.evaluate import evaluate_layout
    from costmodel.specs.layout import Layout
    from costmodel.specs.load import load_model, load_recipe

    a100 = load_hardware("a100-80gb")
    assert a100.step_model.fraction_range == [0.777, 1.0] and a100.step_model.sustained_fraction == 0.876
    model = load_model("llama3-8b")
    cases = {"exposed": (Layout(fsdp=8, tokens=8192), "none"),
             "pipelined": (Layout(pp=4, dp=2, tokens=8192, microbatches=8), "overlap")}
    for name, (layout, overlap) in cases.items():
        step = evaluate_layout(model, load_recipe("cs336"), layout, a100, overlap=overlap).step
        timed = (step.matmul_s + step.attention_s) / (1 - step.bubble)
        low = (step.step_s + timed * (0.876 / 1.0 - 1)) / (1 + 0.024)
        high = (step.step_s + timed * (0.876 / 0.777 - 1)) / (1 - 0.038)
        assert (step.data_exposed_s > 0) if name == "exposed" else (step.bubble > 0)
        flags = ["--pp", "4", "--dp", "2", "--microbatches", "8"] if name == "pipelined" else ["--fsdp", "8"]
        data = json.loads(CliRunner().invoke(app, ["step", "--model", "llama3-8b", "--hardware", "a100-80gb", *flags,
                                                   "--tokens", "8192", "--data-overlap", overlap, "--json"]).stdout)
        assert (data["step_s_low"], data["step_s_high"]) == pytest.approx((low, high), rel=1e-12), name
    readme = " ".join((Path(__file__).resolve().parents[1] / "README.md").read_text().split())
    step = evaluate_layout(model, load_recipe("cs336"), Layout(fsdp=8, tokens=8192), a100).step
    timed = step.matmul_s + step.attention_s
    low = (step.step_s + timed * (0.876 - 1)) / 1.024
    high = (step.step_s + timed * (0.876 / 0.777 - 1)) / 0.962
    assert f"(a step of Llama 3 8B on 8 A100s: {low / step.step_s - 1:+.1%} to {high / step.step_s - 1:+.1%})" in readme


def test_a_fraction_range_must_hold_the_fraction_and_widen_a_band():
    from costmodel.specs.hardware import StepModel

    base = dict(matmul_efficiency=0.8, hbm_efficiency=0.9, source="x", sustained_fraction=0.868)
    with pytest.raises(ValueError, match="must hold"):
        StepModel.model_validate({**base, "fraction_range": [0.9, 1.0], "error_low": -0.03, "error_high": 0.03})
    with pytest.raises(ValueError, match="give error_low"):
        StepModel.model_validate({**base, "fraction_range": [0.8, 1.0]})


@pytest.mark.slow
def test_torchtitan_runs_its_own_recompute_modes():
    """torchtitan's activation checkpointing is none, full, selective by layer (every:K) or by op (op): priced without
    recomputation, step and memory point to its configs' op; Megatron's selective is refused in one line."""
    from typer.testing import CliRunner

    from costmodel.cli import app

    base = ["--model", "llama3-8b", "--fsdp", "8", "--tokens", "8192", "--framework", "torchtitan", "--plain"]
    for command in (["step", "--hardware", "h100-sxm"], ["memory"]):
        plain = " ".join(CliRunner().invoke(app, [*command, *base]).stdout.split())
        assert "Recomputation (torchtitan): its train configs run selective AC 'op'" in plain and "--recompute op" in plain
        op = CliRunner().invoke(app, [*command, *base, "--recompute", "op"])
        assert op.exit_code == 0 and "Recomputation (torchtitan)" not in op.stdout
        refused = subprocess.run([sys.executable, "-m", "costmodel", *command, *base, "--recompute", "selective"],
                                 capture_output=True, text=True)
        assert refused.returncode == 2 and refused.stderr.strip().splitlines() == [
            "error: --framework torchtitan recomputes with --recompute none|full|every:K|op, not selective (Megatron's: "
            "the attention core)"], refused.stderr


def test_fsdp2_copies_inside_pipeline_stages_add_the_gradient_accumulation():
    """torchtitan with FSDP inside pipeline stages (2 stages of 4 shards, 8 micro-batches): the step's FSDP2 copies
    are each gather's copy-out (2 S), each reduce-scatter's copy-in from the fp32 accumulator (read 4, write 4 B per
    element: 2 S) and the accumulation itself, the first micro-batch cast to fp32 (2 + 4 B per element) and the 7
    later ones added in (2 + 4 + 4 B), at the HBM rate the memory-bound ops get (torch measured in
    tests/test_torch_distributed_llama.py); without a pipeline there is no accumulation."""
    from costmodel.cost.evaluate import evaluate_layout
    from costmodel.specs.framework_catalog import FRAMEWORKS
    from costmodel.specs.layout import Layout
    from costmodel.specs.load import load_hardware, load_model, load_recipe

    h100, m = load_hardware("h100-sxm"), 8
    cost = evaluate_layout(load_model("llama3-8b"), load_recipe("fsdp2"), Layout(pp=2, fsdp=4, microbatches=m,
                           tokens=8192), h100, framework=FRAMEWORKS["torchtitan"])
    total = 0
    for c in (r.collective for r in cost.collectives if r.collective.axis == "fsdp"):
        if c.op == "all-gather":
            total += c.calls * 2 * c.buffer_bytes
        elif c.op == "reduce-scatter":
            elements = c.buffer_bytes / 4  # the fp32 reduce-scatter input
            total += c.calls * (2 * c.buffer_bytes + elements * (2 + 4) + (m - 1) * elements * (2 + 4 + 4))
    rate = h100.hbm.bandwidth_bytes_per_s * h100.step_model.hbm_efficiency
    assert cost.step.fsdp_copy_s == pytest.approx(total / rate, rel=1e-12)
    flat = evaluate_layout(load_model("llama3-8b"), load_recipe("fsdp2"), Layout(fsdp=8, tokens=8192, grad_accum=m), h100,
                           framework=FRAMEWORKS["torchtitan"])
    copies = sum(c.calls * (2 * c.buffer_bytes if c.op == "all-gather" else c.buffer_bytes * (1 + 2 / 4))
                 for c in (r.collective for r in flat.collectives if r.collective.axis == "fsdp"))
    assert flat.step.fsdp_copy_s == pytest.approx(copies / rate, rel=1e-12)  # bf16 gradients cast in, no accumulator


@pytest.mark.parametrize("recompute", ["none", "full"])
def test_hfu_counts_attention_as_mfu_does(recompute):
    """Under --attention-flops causal HFU halves attention and its rerun as MFU halves attention: without
    recomputation the two are equal; with it HFU exceeds MFU by the rerun alone."""
    import json

    from hostile import run

    def step(convention):
        return json.loads(run(["step", "--model", "llama3-8b", "--hardware", "h100-sxm", "--tokens", "8192",
                               "--recompute", recompute, "--attention-flops", convention, "--json"]).stdout)

    full, causal = step("full"), step("causal")
    assert full["step_s"] == causal["step_s"]
    if recompute == "none":
        assert causal["hfu"] == pytest.approx(causal["mfu"], rel=1e-12) and full["hfu"] == pytest.approx(full["mfu"])
    else:
        assert causal["hfu"] - causal["mfu"] < full["hfu"] - full["mfu"]  # the rerun's attention halved too
        assert causal["hfu"] > causal["mfu"]


def test_the_text_table_adds_up_to_the_step():
    """`step`'s table lists the parts that sum to the step (hidden traffic as 0 s with its total in the note, the
    bubble in seconds), as its JSON breakdown."""
    import re

    from hostile import run

    out = run(["step", "--model", "llama3-70b", "--hardware", "h100-sxm", "--tp", "8", "--pp", "4", "--sp", "--fsdp",
               "8", "--tokens", "8192", "--microbatches", "16", "--recompute", "selective", "--plain"]).stdout
    rows = {m.group(1): float(m.group(2)) for m in re.finditer(r"^(\w[\w ]*?)\s{2,}(\d+\.\d+)\s", out, re.M)}
    step = rows.pop("step")
    assert {"bubble", "tp exposed", "data exposed"} <= set(rows)
    assert sum(rows.values()) == pytest.approx(step, abs=5e-4 * len(rows))


def _step_json(*args):
    return json.loads(subprocess.run([sys.executable, "-m", "costmodel", "step", "--model", "llama3-8b", "--hardware",
                                      "h100-sxm", "--tokens", "8192", *args, "--json"],
                                     capture_output=True, text=True, check=True).stdout)


def test_a_framework_no_run_times_reaches_the_slowest_measured_framework():
    """torchtitan has no run in the training data: its range's slow end is the same layout under the profile with
    nanotron's fitted time (the slowest framework that has runs), its fast end the DGXC band; Megatron's runs are
    among those h100-sxm's step model was fitted on, so its range is that fit's band."""
    from costmodel.cost.evaluate import evaluate_layout
    from costmodel.specs.framework_catalog import FRAMEWORKS
    from costmodel.specs.layout import Layout
    from costmodel.specs.load import load_model

    titan = _step_json("--fsdp", "8", "--framework", "torchtitan")
    as_slow = FRAMEWORKS["torchtitan"].model_copy(update={"time": FRAMEWORKS["nanotron"].time})
    slow = evaluate_layout(load_model("llama3-8b"), RECIPES["fsdp2"], Layout(fsdp=8, tokens=8192), H100,
                           framework=as_slow).step.step_s
    sm = H100.step_model
    assert slow > titan["step_s"] / (1 + sm.error_low)  # nanotron's floors and unoverlapped data traffic: slower
    assert titan["step_s_high"] == pytest.approx(slow, rel=1e-12)
    assert titan["step_s_low"] == pytest.approx(titan["step_s"] / (1 + sm.error_high), rel=1e-12)
    megatron = _step_json("--fsdp", "8", "--framework", "megatron")
    assert megatron["step_s_high"] == pytest.approx(megatron["step_s"] / (1 + sm.error_low), rel=1e-12)
    assert not FRAMEWORKS["megatron"].unmeasured_time and not FRAMEWORKS["nanotron"].unmeasured_time
    assert FRAMEWORKS["deepspeed"].unmeasured_time and FRAMEWORKS["torchtitan"].unmeasured_time


def test_readme_states_torchtitans_range_as_step_prints_it():
    readme = " ".join((Path(__file__).resolve().parents[1] / "README.md").read_text().split())
    out = _step_json("--fsdp", "8", "--framework", "torchtitan", "--recompute", "op")
    said = (f"Llama 3 8B on 8 H100s with FSDP under torchtitan (`--recompute op`, 8,192 tokens), "
            f"{out['step_s_low']:.2f} to {out['step_s_high']:.2f} s for a {out['step_s']:.2f} s prediction")
    assert said in readme


def test_an_unmeasured_framework_off_the_fitted_device_says_its_range_leaves_its_overheads_out():
    """torchtitan has no runs in the training data; on h100-sxm its range reaches nanotron's fitted time, which
    applies there only: on a100-80gb and h200 the Range line says the range leaves its overheads out (it said
    nothing), and a layout without a framework says nothing of it."""
    def text(*flags):
        out = subprocess.run([sys.executable, "-m", "costmodel", "step", "--model", "llama3-8b", "--fsdp", "8",
                              "--tokens", "8192", *flags], capture_output=True, text=True, check=True).stdout
        return " ".join(out.split())

    said = ("No run of torchtitan is in the training data, and nanotron's fitted time, which bounds its slow end on "
            "h100-sxm, does not apply here: the range leaves its framework overheads out")
    for device in ("a100-80gb", "h200"):
        assert said in text("--framework", "torchtitan", "--hardware", device), device
    assert "framework overheads out" not in text("--hardware", "a100-80gb")
    assert "framework overheads out" not in text("--framework", "torchtitan", "--hardware", "h100-sxm")
    flags = ("--model", "llama3-8b", "--fsdp", "8", "--tokens", "8192", "--framework", "torchtitan")
    assert [api.cost(*flags[1:2], hardware=d, framework="torchtitan", fsdp=8, tokens=8192).range_omits_framework
            for d in ("a100-80gb", "h100-sxm")] == [True, False]
    out = json.loads(subprocess.run([sys.executable, "-m", "costmodel", "step", *flags, "--hardware", "h200", "--json"],
                                    capture_output=True, text=True, check=True).stdout)
    assert out["range_omits_framework"] is True


def test_every_borrowed_step_constant_is_h100s_fit():
    """The devices that borrow h100-sxm's fitted step fraction and band (their specs say so; B200 and Trainium2 the
    fraction only) hold its values, and a
    borrowed fraction_range starts at it (a100's starts at its base / boost clock instead); H200 borrows the fp8
    factor and band too (the same GH100 tensor cores); the 500 W variant extends h100-sxm and keeps its fit. A refit
    of h100-sxm that leaves one behind fails here."""
    h100 = load_hardware("h100-sxm").step_model
    for name in ("a100-80gb", "b200", "h200", "mi325x", "tpu-v4", "tpu-v5e", "tpu-v5p", "tpu-v6e", "trn2",
                 "h100-96gb-500w"):
        sm = load_hardware(name).step_model
        assert sm.sustained_fraction == h100.sustained_fraction, name
        if sm.error_high is None:  # B200 and Trainium2 print no range (their specs say why)
            assert name in ("b200", "trn2") and sm.error_low is None
            continue
        assert sm.error_high == h100.error_high, name
        assert sm.error_low == h100.error_low or name == "h100-96gb-500w", name  # widened for its unknown peak
        if sm.fraction_range is not None and name != "a100-80gb":
            assert sm.fraction_range[0] == h100.sustained_fraction, name
    for name in ("h200", "h100-96gb-500w"):
        sm = load_hardware(name).step_model
        assert (sm.fp8_efficiency, sm.fp8_error_high) == (h100.fp8_efficiency, h100.fp8_error_high), name
    assert load_hardware("h200").step_model.fp8_error_low == h100.fp8_error_low
    assert load_hardware("h100-96gb-500w").step_model.fp8_error_low == round(
        (1 + h100.fp8_error_low) * 835.5 / 989.4 - 1, 3)
    assert load_hardware("h100-96gb-500w").step_model.error_low == round((1 + h100.error_low) * 835.5 / 989.4 - 1, 3)
