"""`cost4d plot` and the drawing functions behind it (costmodel.report.plot): every kind as PNG and SVG with
labelled axes, each figure showing the numbers the other commands compute, and bad input as one line.

matplotlib is in the `test` extra, so CI runs these (and fails on any skip: .ci/run sets COST4D_REQUIRE_TORCH=1);
they skip only where matplotlib is missing."""

import subprocess
import sys

import pytest
from typer.testing import CliRunner

pytest.importorskip("matplotlib")

from costmodel import api  # noqa: E402
from costmodel.cli import app  # noqa: E402
from costmodel.cost.evaluate import evaluate_layout  # noqa: E402
from costmodel.report import plot  # noqa: E402
from costmodel.solve.crossover import curves  # noqa: E402
from costmodel.formulas.flops import matmul_intensity  # noqa: E402
from costmodel.solve.roofline import roofline  # noqa: E402
from costmodel.solve.timeline import idle_fraction, timeline  # noqa: E402
from costmodel.specs.layout import Layout  # noqa: E402
from costmodel.specs.load import load_hardware, load_model, load_recipe  # noqa: E402
from costmodel.units import UnitSystem  # noqa: E402

SHIPPED = "shipped:h100-8gpu-together-nccl-tests"
#: conventions.md (c): the XXL problem on v5p with C = 4.6e14 and W = 1.8e11, X = 16, Y = 4, M_X = 2
XXL = dict(fsdp=16, tp=4, mx=2, my=1, peak_flops=4.6e14, bandwidth=1.8e11)
LLAMA70 = dict(tp=8, pp=4, sp=True, fsdp=8, tokens=8192, microbatches=16)


@pytest.fixture(scope="module")
def h100():
    return load_hardware("h100-sxm")


@pytest.fixture(scope="module")
def llama70_cost(h100):
    return evaluate_layout(load_model("llama3-70b"), load_recipe("cs336"), Layout(**LLAMA70), h100)


@pytest.fixture(scope="module")
def validation_rows(h100):
    from costmodel.cli.measure import load_measurements
    from costmodel.measure.validate import compare

    return compare(load_measurements([SHIPPED]), h100)


@pytest.fixture(scope="module")
def planned(h100):
    from costmodel.solve.plan import plan as search

    spec = load_model("llama3-8b")
    return search(spec, load_recipe("cs336"), h100, devices=16, global_tokens=2**20, seq=8192, top=1)


@pytest.fixture(scope="module")
def figures(llama70_cost, h100, validation_rows, planned):
    """One figure of each kind, drawn by the functions the CLI calls."""
    ops = timeline("interleaved", 4, 8, chunks=2)
    answers = [api.solve_batch("xxl", "tpu-v5p", overlap=o, **XXL) for o in ("sum", "max")]
    header = {"model": "llama3-8b", "hardware": "h100-sxm", "devices": 16, "global_tokens": 2**20,
              "framework": "exact", "precision": "bf16"}
    return {"pipeline": plot.pipeline_timeline(ops, 4, "interleaved", idle_fraction(ops, 4), chunks=2),
            "memory": plot.stage_memory(llama70_cost, None, UnitSystem.iec),
            "fsdp": _fsdp_figure(),
            "batch": plot.batch_crossover(curves(answers), "xxl on tpu-v5p"),
            "roofline": plot.roofline(roofline(llama70_cost, h100), "llama3-70b on h100-sxm"),
            "validate": plot.validation(validation_rows, "h100-sxm"),
            "plan": plot.plan_cloud(planned, header)}


KINDS = ["pipeline", "memory", "fsdp", "batch", "roofline", "validate", "plan"]


def _fsdp_figure():
    """XXL under 95 GB (conventions.md: N_FSDP = 38), its curve from 2 to 128 shards."""
    from costmodel.solve.fsdp import memory_at, solve_fsdp

    spec, rec, layout = load_model("xxl"), load_recipe("cs336"), Layout(fsdp=2)
    answer = solve_fsdp(spec, rec, layout, 95e9).n_fsdp
    shards = [2, 4, 8, 16, 32, answer, 64, 128]
    return plot.fsdp_memory(shards, [memory_at(spec, rec, layout, n) for n in shards], 95e9, answer, "xxl",
                            "--limit 95GB", UnitSystem.si)


@pytest.mark.slow
def test_fsdp_figure_marks_the_answer_under_the_limit(figures):
    """The curve crosses the limit between the marked N - 1 and N: XXL's 38 under 95 GB (conventions.md)."""
    ax = figures["fsdp"].axes[0]
    curve = ax.lines[0]
    xs, ys = list(curve.get_xdata()), list(curve.get_ydata())
    limit = ax.lines[1].get_ydata()[0]
    assert ax.lines[2].get_xdata()[0] == 38
    assert ys[xs.index(38)] < limit < ys[xs.index(32)]


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_each_kind_as_png_and_svg_with_labelled_axes(figures, tmp_path, kind):
    fig = figures[kind]
    ax = fig.axes[0]
    labels = ax.get_xlabel(), ax.get_ylabel()
    assert all(labels) and ax.get_title()
    assert any("(" in label for label in labels)  # a unit or a convention named
    fig.savefig(tmp_path / "f.png")
    fig.savefig(tmp_path / "f.svg")
    assert (tmp_path / "f.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (tmp_path / "f.png").stat().st_size > 10_000
    svg = (tmp_path / "f.svg").read_text()
    for label in labels:  # matplotlib writes each text as a comment beside its glyphs
        assert label.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;") in svg or label in svg, label


def test_pipeline_figure_draws_every_pass(figures):
    """One bar per pass: interleaved p = 4, m = 8, v = 2 runs 2 x 4 x 8 x 2 chunk-passes; the title states the
    bubble (p - 1)/(v m + p - 1) = 3/19."""
    ax = figures["pipeline"].axes[0]
    bars = sum(len(c.get_paths()) for c in ax.collections)
    assert bars == 2 * 4 * 8 * 2
    assert f"{3 / 19:.1%}" in ax.get_title()


def test_batch_figure_marks_the_crossovers_by_hand(figures):
    """conventions.md (c): B = 25,302 tokens (sum) and 20,444 (max) for XXL; each is marked on T_math."""
    ax = figures["batch"].axes[0]
    dots = sorted(round(line.get_xdata()[0]) for line in ax.lines if line.get_marker() == "o")
    assert dots == [20_444, 25_302]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any("(sum)" in t for t in legend) and any("(max)" in t for t in legend)


def test_batch_curves_cross_at_the_answer():
    """T_math = T_comms at the solver's crossover, on the curves the figure draws (sum: T_FSDP + T_TP)."""
    import numpy as np

    answer = api.solve_batch("xxl", "tpu-v5p", overlap="sum", **XXL)
    c = curves([answer], np.array([answer.global_batch]))
    assert c.math_s[0] == pytest.approx(c.comms_s["sum"][0], rel=1e-12)
    assert c.comms_s["sum"][0] == pytest.approx(c.fsdp_s[0] + c.tp_s[0], rel=1e-12)


def test_matmul_intensity_by_hand():
    """A square bf16 GEMM of side n moves 3 n^2 x 2 bytes for 2 n^3 FLOPs: n / 3 FLOP/B (the Scaling Book's
    2BDF / (2BD + 2DF + 2BF) with B = D = F); a skinny one, B = 1 row, tends to 1 FLOP/B."""
    assert matmul_intensity(rows=4096, cols=4096, depth=4096, element_bytes=2) == pytest.approx(4096 / 3)
    assert matmul_intensity(rows=1, cols=8192, depth=8192, element_bytes=2) == pytest.approx(1, rel=1e-3)


def test_roofline_parts_are_the_step_models(llama70_cost, h100):
    """Each mark's time is the step's part: matmuls, elementwise, TP and data-axis traffic as `step` prints."""
    step = llama70_cost.step
    marks = {m.name: m for m in roofline(llama70_cost, h100).marks}
    assert marks["matmuls"].seconds == step.matmul_s
    assert marks["elementwise ops"].seconds == step.elementwise_s
    assert marks["TP collectives"].seconds == pytest.approx(step.tp_s, rel=1e-12)
    assert marks["data-axis collectives"].seconds == pytest.approx(step.data_comm_s, rel=1e-12)
    assert marks["pipeline sends"].seconds == pytest.approx(step.p2p_s, rel=1e-12)
    assert marks["elementwise ops"].bytes == pytest.approx(step.elementwise_s * h100.hbm.bandwidth_bytes_per_s
                                                           * h100.step_model.hbm_efficiency)
    longest = max(marks.values(), key=lambda m: m.seconds)
    assert longest is min(marks.values(), key=lambda m: m.flops_per_s)  # the lowest point takes the longest


def test_validation_figure_is_validates_rows(figures, validation_rows):
    """One series per collective and algorithm, labelled with the median |error| `cost4d validate` prints."""
    from costmodel.measure.validate import summary

    ax = figures["validate"].axes[0]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    expected = [f"{k}: {v:.1f}%" for k, v in summary(validation_rows)["per_collective"].items()]
    assert sorted(legend) == sorted(expected) and len(legend) == 4  # the four shipped logs
    drawn = sum(len(line.get_xdata()) for line in ax.lines if line.get_marker() == "o")
    assert drawn == len(validation_rows)


def test_plan_figure_highlights_the_front(figures, planned):
    ax = figures["plan"].axes[0]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "Pareto front" in legend and f"{planned.feasible:,} feasible layouts" in legend


runner = CliRunner()


@pytest.mark.parametrize("args, said", [
    (["pipeline", "--pp", "4", "--microbatches", "8", "--schedule", "interleaved", "--chunks", "2"], "bubble 15.79%"),
    (["pipeline", "--schedule", "zb-h1"], "bubble 11.11%"),
    (["memory", "--model", "llama3-70b", "--pp", "8", "--tp", "8", "--sp", "--tokens", "8192", "--microbatches", "16"],
     "8 stage(s)"),
    (["batch", "--model", "xxl", "--hardware", "tpu-v5p", "--fsdp", "16", "--tp", "4", "--mx", "2", "--peak-flops",
      "4.6e14", "--ici-bandwidth", "1.8e11"], "B = 25,302 tokens (395.3 per device)"),
    (["roofline", "--model", "llama3-70b", "--hardware", "h100-sxm", "--tp", "8", "--pp", "4", "--sp", "--fsdp", "8",
      "--tokens", "8192", "--microbatches", "16"], "TFLOP/s per device of 989"),
    (["validate", SHIPPED, "--hardware", "h100-sxm"], "116 rows"),
    (["plan", "--model", "llama3-8b", "--hardware", "h100-sxm", "--gpus", "16", "--global-batch", "1048576", "--seq",
      "8192"], "feasible layouts"),
], ids=lambda v: v[0] if isinstance(v, list) else None)
@pytest.mark.slow
def test_cli_writes_each_kind(tmp_path, args, said):
    """Each kind through the CLI, PNG for some and SVG for others (the functions above write both)."""
    out = tmp_path / ("figure.svg" if len(args) % 2 else "figure.png")
    result = runner.invoke(app, ["plot", *args, "--out", str(out)])
    assert result.exit_code == 0, (result.output, result.exception)
    assert said in " ".join(result.stdout.split())
    assert out.stat().st_size > 10_000


def cost4d(capsys, monkeypatch, *args):
    """The console entry point (main: errors as one line, exit codes) in this interpreter."""
    from costmodel.cli import main

    monkeypatch.setattr(sys, "argv", ["cost4d", *args])
    with pytest.raises(SystemExit) as stop:
        main()
    captured = capsys.readouterr()
    return subprocess.CompletedProcess(args, stop.value.code, captured.out, captured.err)


def one_line_error(result, *fragments):
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert len(result.stderr.strip().splitlines()) == 1 and result.stderr.startswith("error: "), result.stderr
    assert "Traceback" not in result.stderr
    for fragment in fragments:
        assert fragment in result.stderr, result.stderr


MINIMAL = {"pipeline": [], "memory": ["--model", "xxl"], "fsdp": ["--model", "xxl", "--limit", "95GB"], "batch": ["--model", "xxl", "--hardware", "tpu-v5p"],
           "roofline": ["--model", "llama3-8b", "--hardware", "h100-sxm", "--tokens", "8192"],
           "validate": [SHIPPED, "--hardware", "h100-sxm"],
           "plan": ["--model", "llama3-8b", "--hardware", "h100-sxm", "--gpus", "8", "--global-batch", "65536"]}


@pytest.mark.parametrize("kind", KINDS)
def test_without_matplotlib_one_line(capsys, monkeypatch, tmp_path, kind):
    for name in ("matplotlib", "matplotlib.figure"):
        monkeypatch.setitem(sys.modules, name, None)  # import fails, as where it is not installed
    result = cost4d(capsys, monkeypatch, "plot", kind, *MINIMAL[kind], "--out", str(tmp_path / "f.png"))
    one_line_error(result, "figures need matplotlib: pip install matplotlib")
    assert not (tmp_path / "f.png").exists()


def test_without_matplotlib_as_a_real_process(tmp_path):
    code = ("import sys; sys.modules['matplotlib'] = None; sys.argv = ['cost4d', *sys.argv[1:]]; "
            "from costmodel.cli import main; main()")
    result = subprocess.run([sys.executable, "-c", code, "plot", "pipeline", "--out", str(tmp_path / "f.svg")],
                            capture_output=True, text=True)
    one_line_error(result, "pip install matplotlib")


@pytest.mark.parametrize("args, fragment", [
    (["pipeline", "--out", "f.pdf"], "give a .png or .svg file"),
    (["pipeline", "--schedule", "interleaved", "--chunks", "2", "--microbatches", "6"], "multiple of --pp"),
    (["pipeline", "--chunks", "2"], "--chunks needs --schedule interleaved"),
    (["pipeline", "--schedule", "dualpipe"], "the timeline plays"),
    (["pipeline", "--pp", "256", "--microbatches", "1024"], "a timeline draws at most"),
    (["batch", "--model", "xxl", "--hardware", "tpu-v5p", "--tp", "64"], "never compute-bound"),
    (["batch", "--model", "xxl", "--hardware", "tpu-v5p", "--overlap", "min"], "--overlap 'min'"),
    (["roofline", "--model", "llama3-8b", "--hardware", "h100-sxm"], "--tokens must be positive"),
    (["roofline", "--model", "llama3-8b", "--hardware", "h100-sxm", "--tokens", "8192", "--precision", "fp4"],
     "--precision 'fp4'"),
    (["validate", "no-such-log.out", "--hardware", "h100-sxm"], "no-such-log.out"),
    (["validate", SHIPPED], "give --hardware"),
    (["plan", "--model", "llama3-405b", "--hardware", "h100-sxm", "--gpus", "1", "--global-batch", "8192"],
     "no layout of 1 x h100-sxm fits"),
])
def test_bad_input_is_one_line(capsys, monkeypatch, tmp_path, args, fragment):
    out = [] if "--out" in args else ["--out", str(tmp_path / "f.png")]
    one_line_error(cost4d(capsys, monkeypatch, "plot", *args, *out), fragment)


def test_fp8_matmuls_sit_at_twice_the_bf16_intensity(h100):
    """An fp8 GEMM reads 1-byte operands: the same shape's intensity doubles against bf16's 2 bytes."""
    layout = Layout(**LLAMA70)
    spec, rec = load_model("llama3-70b"), load_recipe("cs336")
    marks = {p: roofline(evaluate_layout(spec, rec, layout, h100, precision=p), h100).marks[0] for p in ("bf16", "fp8")}
    assert marks["fp8"].intensity == pytest.approx(2 * marks["bf16"].intensity, rel=1e-12)


@pytest.mark.parametrize("framework", ["exact", "nanotron"])
def test_plot_fsdp_with_experts_draws_the_n_the_expert_axis_admits(tmp_path, framework):
    """plot fsdp --ep 8 plots N = 8, 16, 32, ... and the answer (it asked for N = 2 and failed before); the answer
    is solve fsdp's."""
    import json

    # nanotron shards with ZeRO-1 only: its unsharded bf16 weights and fp32 gradients need a larger limit
    zero, limit = ("1", "160GiB") if framework == "nanotron" else ("3", "80GiB")
    flags = ["--model", "mixtral-8x7b", "--ep", "8", "--tokens", "4096", "--limit", limit, "--framework", framework,
             "--zero", zero]
    result = runner.invoke(app, ["plot", "fsdp", *flags, "--out", str(tmp_path / "f.png"), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)["data"]
    solved = json.loads(runner.invoke(app, ["solve", "fsdp", *flags, "--json"]).stdout)["n_fsdp"]
    points = [p["n_fsdp"] for p in data["points"]]
    assert data["n_fsdp"] == solved and solved in points and all(n % 8 == 0 for n in points)
    assert {8, 16, 32} <= set(points)
