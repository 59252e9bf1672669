"""Flash attention as its own kernel class: the measured table, the look-up, the time formula by hand, and
the step's wiring (the GEMMs lose exactly attention's FLOPs; --attention-kernel gemm is the old path)."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest

from costmodel.cost.attention import attention_kernel
from costmodel.cost.evaluate import evaluate_layout
from costmodel.errors import CostModelError
from costmodel.measure.attention import attention_rate, load_table
from costmodel.specs.layout import Layout
from costmodel.specs.load import load_hardware, load_model, load_recipe

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "hardware" / "measured" / "h100-flash-attention" / "flash_attention_h100.csv"

HEADER = "kernel,direction,causal,head_dim,seq,tflops\n"


def _table(tmp_path, body: str) -> str:
    path = tmp_path / "fa.csv"
    path.write_text(HEADER + body)
    load_table.cache_clear()
    return str(path)


def test_rate_is_linear_in_log2_seq_between_rows_and_held_at_the_ends(tmp_path):
    path = _table(tmp_path, "k,fwd,1,128,1024,100\nk,fwd,1,128,4096,300\nk,bwd,1,128,1024,50\n")
    assert attention_rate(path, "k", "fwd", True, 128, 1024) == 100e12
    assert attention_rate(path, "k", "fwd", True, 128, 2048) == pytest.approx(200e12)  # halfway in log2
    assert attention_rate(path, "k", "fwd", True, 128, 512) == 100e12
    assert attention_rate(path, "k", "fwd", True, 128, 65536) == 300e12
    assert attention_rate(path, "k", "bwd", True, 128, 8192) == 50e12


def test_head_dim_is_the_nearest_measured_in_log2(tmp_path):
    path = _table(tmp_path, "k,fwd,1,64,1024,10\nk,fwd,1,128,1024,20\nk,fwd,1,256,1024,40\n")
    assert attention_rate(path, "k", "fwd", True, 80, 1024) == 10e12  # log2 80 = 6.32: nearer 64
    assert attention_rate(path, "k", "fwd", True, 96, 1024) == 20e12  # log2 96 = 6.58: nearer 128
    assert attention_rate(path, "k", "fwd", True, 192, 1024) == 40e12  # MLA's 192: nearer 256 in log2


def test_arrays_look_up_each_length(tmp_path):
    import numpy as np

    path = _table(tmp_path, "k,fwd,1,128,1024,100\nk,fwd,1,128,4096,300\n")
    got = attention_rate(path, "k", "fwd", True, 128, np.array([1024.0, 2048.0, 1024.0]))
    assert got.tolist() == pytest.approx([100e12, 200e12, 100e12])


@pytest.mark.parametrize("body, says", [
    ("k,sideways,1,128,1024,100\n", "direction fwd or bwd"),
    ("k,fwd,2,128,1024,100\n", "causal 0 or 1"),
    ("k,fwd,1,128,1024,lots\n", "tflops a number"),
    ("k,fwd,1,128,1024,1e99\n", "tflops = '1e99': allowed"),
    ("k,fwd,1,128\n", "expected 6 columns"),
])
def test_a_bad_row_is_named_by_its_line(tmp_path, body, says):
    path = _table(tmp_path, body)
    with pytest.raises(CostModelError, match=f"fa.csv:2: .*{says}"):
        load_table(path)


def test_a_missing_pass_names_the_kernels_the_table_has(tmp_path):
    path = _table(tmp_path, "k,fwd,1,128,1024,100\n")
    with pytest.raises(CostModelError, match=r"no bwd causal rows for attention kernel .k. \(kernels it measures both "
                       r"ways: none\)"):
        attention_rate(path, "k", "bwd", True, 128, 1024)


def test_the_time_formula_by_hand():
    from costmodel.formulas.step import attention_kernel_seconds

    # 1e15 forward FLOPs over the full s x s, causal (half), a quarter rerun, 500 / 400 TFLOP/s, 0.8 sustained
    got = attention_kernel_seconds(forward_flops=1e15, rerun=0.25, masked=0.5, rate_fwd=500e12, rate_bwd=400e12,
                                   sustained=0.8)
    assert got == pytest.approx(0.5e15 * 1.25 / 400e12 + 2.5 * 0.5e15 / 320e12)


def _row(kernel: str, direction: str, causal: str, head_dim: int, seq: int) -> float | None:
    with SHIPPED.open() as f:
        for row in csv.DictReader(f):
            if (row["kernel"], row["direction"], row["causal"], row["head_dim"], row["seq"]) == \
                    (kernel, direction, causal, str(head_dim), str(seq)):
                return float(row["tflops"]) * 1e12
    return None


def _shipped_rate(kernel: str, direction: str, head_dim: int, seq: int) -> float:
    """The causal rate: the table's row, or (the paper measured backward unmasked only) the unmasked
    backward row times the forward's causal / unmasked ratio."""
    rate = _row(kernel, direction, "1", head_dim, seq)
    if rate is None:
        rate = _row(kernel, direction, "0", head_dim, seq) * _row(kernel, "fwd", "1", head_dim, seq) / \
            _row(kernel, "fwd", "0", head_dim, seq)
    return rate


def test_the_shipped_table_has_no_causal_backward_and_it_is_derived(tmp_path):
    assert _row("cudnn", "bwd", "1", 128, 8192) is None
    path = _table(tmp_path, "k,fwd,0,128,1024,400\nk,fwd,1,128,1024,300\nk,bwd,0,128,1024,200\n")
    assert attention_rate(path, "k", "bwd", True, 128, 1024) == pytest.approx(200e12 * 300 / 400)


def _step(layout: Layout, kernel: str | None, model: str = "llama3-8b"):
    return evaluate_layout(load_model(model), load_recipe("cs336"), layout, load_hardware("h100-sxm"),
                           attention_kernel=kernel).step


@pytest.mark.parametrize("kernel", ["cudnn", "fa2", "fa3"])
@pytest.mark.parametrize("recompute, rerun", [("none", 0), ("selective", 1), ("full", 1)])
def test_step_attention_time_by_hand_from_the_shipped_table(kernel, recompute, rerun):
    """Llama 3 8B (32 layers, 32 heads of 128), 8,192 tokens of seq 8,192 on one H100: attention's forward is
    4 s a d per token and layer over the full s x s, half of it under the causal mask; the rates are the
    table's rows at seq 8,192 (read here with csv, not through cost4d)."""
    layout = Layout(tokens=8192, recompute=recompute)
    step = _step(layout, kernel)
    s, a, d, layers = 8192, 32, 128, 32
    work = 4 * s * a * d * layers * 8192 / 2
    sustained = load_hardware("h100-sxm").step_model.sustained_fraction
    fwd, bwd = _shipped_rate(kernel, "fwd", 128, 8192), _shipped_rate(kernel, "bwd", 128, 8192)
    assert step.attention_s == pytest.approx(work * (1 + rerun) / (fwd * sustained) + 2.5 * work / (bwd * sustained),
                                             rel=1e-12)
    assert step.attention_kernel == kernel


def test_the_gemms_lose_exactly_attentions_flops():
    """With a kernel, matmul_s times the hardware FLOPs less attention's (and its recomputation's), at the
    same GEMM efficiency as the gemm path, which times all of them."""
    layout = Layout(tokens=8192, recompute="selective")
    with_kernel, gemm = _step(layout, "cudnn"), _step(layout, "gemm")
    assert gemm.attention_s == 0 and gemm.attention_kernel is None
    s, a, d, layers = 8192, 32, 128, 32
    attention_hw = (3 + 1) * 4 * s * a * d * layers * 8192  # fwd + bwd (2x) + the selective rerun, full s x s
    ratio = (gemm.hardware_flops - attention_hw) / gemm.hardware_flops
    assert with_kernel.matmul_s == pytest.approx(gemm.matmul_s * ratio, rel=1e-12)


def test_context_parallel_ring_looks_up_the_block_length():
    """Ring attention runs blocks of s / c queries against s / c keys: cp 2 at seq 8,192 uses the 4,096 rows."""
    step = _step(Layout(tokens=8192, cp=2, fsdp=1), "fa2")
    assert step.attention_rates == (_shipped_rate("fa2", "fwd", 128, 4096), _shipped_rate("fa2", "bwd", 128, 4096))
    a2a = _step(Layout(tokens=8192, cp=2, cp_kind="a2a"), "fa2")
    assert a2a.attention_rates == (_shipped_rate("fa2", "fwd", 128, 8192), _shipped_rate("fa2", "bwd", 128, 8192))


def test_math_attention_stays_with_the_gemms():
    assert _step(Layout(tokens=8192, flash=False), None).attention_s == 0  # the device's default kernel is flash


def test_kernel_choice_order_and_errors():
    h100, a100 = load_hardware("h100-sxm"), load_hardware("a100-80gb")
    from costmodel.specs.framework_catalog import FRAMEWORKS

    assert attention_kernel(h100) == h100.step_model.attention_kernel == "cudnn"
    assert attention_kernel(h100, FRAMEWORKS["nanotron"]) == "fa2"  # flash-attn 2
    assert attention_kernel(h100, FRAMEWORKS["nanotron"], "fa3") == "fa3"
    assert attention_kernel(h100, None, "gemm") is None
    assert attention_kernel(a100, FRAMEWORKS["nanotron"]) is None  # no table: the GEMM path
    with pytest.raises(CostModelError, match="measures cudnn, fa2, fa3"):
        attention_kernel(h100, None, "fa9")
    with pytest.raises(CostModelError, match="a100-80gb has no attention table"):
        attention_kernel(a100, None, "fa2")


def test_cli_says_which_kernel_and_rates(capsys):
    from costmodel.cli import main

    with pytest.raises(SystemExit) as done:
        main(["step", "--model", "llama3-8b", "--hardware", "h100-sxm", "--tokens", "8192", "--attention-kernel",
              "fa2", "--plain"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    fwd, bwd = (_shipped_rate("fa2", p, 128, 8192) / 1e12 for p in ("fwd", "bwd"))
    assert f"flash attention (fa2, causal) at {fwd:,.0f} / {bwd:,.0f} TFLOP/s" in out
    assert math.isfinite(fwd)


def test_hardware_says_which_devices_have_an_attention_table():
    from costmodel.report.catalog import features

    assert "attention table" in features(load_hardware("h100-sxm"))
    assert "attention table" in features(load_hardware("aws-p5"))  # extends h100-sxm
    assert "attention table" not in features(load_hardware("b200"))
    assert features(load_hardware("b200"))[0] == "GEMM table"
    assert features(load_hardware("mi325x"))[0] == "GEMM 64% + shape curve"  # one kernel, no table
    assert features(load_hardware("trn2"))[0] == "GEMM 95%"  # an upper bound, no shape


def test_the_readme_ratio_of_fa2_to_cudnn_is_the_tables():
    """The README: FA2's rates are 61-63% of cuDNN's at 8K (forward causal and backward, the table's rows)."""
    ratios = [_row("fa2", d, c, 128, 8192) / _row("cudnn", d, c, 128, 8192) for d, c in (("fwd", "1"), ("bwd", "0"))]
    low, high = (round(100 * r) for r in sorted(ratios))
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert f"FA2's rates are {low}-{high}% of cuDNN's at 8K" in readme


def test_a_document_mask_shortens_the_calls_and_the_work():
    """Documents of 2,048 tokens packed in 8,192-token sequences (Llama 3's mask): each token attends within its
    document, so attention's FLOPs are 2,048 / 8,192 of the s x s count and the kernels run at the 2,048 rows'
    rates."""
    step = _step(Layout(tokens=8192, document=2048), "cudnn")
    s, a, d, layers = 8192, 32, 128, 32
    work = 4 * s * a * d * layers * 8192 / 2 * 2048 / s
    sustained = load_hardware("h100-sxm").step_model.sustained_fraction
    fwd, bwd = _shipped_rate("cudnn", "fwd", 128, 2048), _shipped_rate("cudnn", "bwd", 128, 2048)
    assert step.attention_rates == (fwd, bwd)
    assert step.attention_s == pytest.approx(work / (fwd * sustained) + 2.5 * work / (bwd * sustained), rel=1e-12)
    # the FLOP counts (MFU, HFU) count attention within documents: a quarter of it; the GEMM path times that
    whole, masked = _step(Layout(tokens=8192), "gemm"), _step(Layout(tokens=8192, document=2048), "gemm")
    attention = 3 * 4 * s * a * d * layers * 8192  # fwd + bwd over the full s x s
    assert masked.model_flops == whole.model_flops - 0.75 * attention
    assert masked.matmul_s == pytest.approx(whole.matmul_s * masked.hardware_flops / whole.hardware_flops, rel=1e-12)
    assert _step(Layout(tokens=8192, document=8192), "cudnn").attention_s == _step(Layout(tokens=8192), "cudnn").attention_s


def test_plan_with_a_document_mask_reproduces_with_step():
    from costmodel.solve.plan import plan

    found = plan(load_model("llama3-8b"), load_recipe("cs336"), load_hardware("h100-sxm"), devices=16,
                 global_tokens=262144, seq=131072, document=8192, top=3).best
    for row in found:
        assert row.layout["document"] == 8192 and 0 < row.mfu < 1
        step = evaluate_layout(load_model("llama3-8b"), load_recipe("cs336"), Layout(**row.layout),
                               load_hardware("h100-sxm")).step
        assert step.step_s == pytest.approx(row.step_s, rel=1e-9)


def test_document_and_kernel_refusals_and_math_attention():
    with pytest.raises(CostModelError, match="--document 100,000: give 1 to the sequence's 8,192 tokens"):
        _step(Layout(tokens=8192, document=100000), "cudnn")
    with pytest.raises(CostModelError, match="'fa3' is a flash kernel: math attention"):
        _step(Layout(tokens=8192, flash=False), "fa3")
    # math attention masks a full s x s (its FLOPs do not shrink with documents); flash's varlen kernels do
    math = _step(Layout(tokens=8192, flash=False), "gemm")
    assert _step(Layout(tokens=8192, flash=False, document=1024), "gemm").model_flops == math.model_flops
    from costmodel.solve.plan import plan

    with pytest.raises(CostModelError, match="--document 0"):
        plan(load_model("llama3-8b"), load_recipe("cs336"), load_hardware("h100-sxm"), devices=8, global_tokens=65536,
             seq=8192, document=0)


@pytest.mark.slow
def test_plot_roofline_takes_the_kernel_and_the_document(tmp_path):
    pytest.importorskip("matplotlib")
    import json
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "costmodel", "plot", "roofline", "--model", "llama3-8b", "--hardware",
                          "h100-sxm", "--tokens", "8192", "--attention-kernel", "fa2", "--document", "2048", "--out",
                          str(tmp_path / "r.png"), "--json"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    marks = {m["name"]: m["seconds"] for m in json.loads(out.stdout)["data"]["marks"]}
    step = _step(Layout(tokens=8192, document=2048), "fa2")
    assert marks["flash attention"] == pytest.approx(step.attention_s, rel=1e-12)


@pytest.mark.parametrize("body", [
    "a,b,c\n1,x,2\n\n3,y,4\n5,x,6\n",  # unquoted: rows without the wanted text skipped before parsing
    'a,b,c\n1,x,2\n"3",y,"4\n4"\n5,"x",6\n',  # quoted (a cell spans two lines): the csv module parses it all
])
def test_table_rows_filtered_unparsed_equal_the_csv_modules(tmp_path, body):
    from costmodel.measure.tables import csv_rows

    path = tmp_path / "t.csv"
    path.write_text(body)
    expected = [{"a": r["a"], "b": r["b"]} for r in csv.DictReader(body.splitlines(keepends=True)) if r["b"] == "x"]
    rows = list(csv_rows(str(path), "table", ("a", "b"), {"b": "x"}))
    assert [row for _, row in rows] == expected
    assert [line for line, _ in rows] == [2, 5]


def test_a_row_of_the_wrong_width_is_refused_though_it_lacks_the_wanted_text(tmp_path):
    from costmodel.measure.tables import csv_rows

    path = tmp_path / "t.csv"
    path.write_text("a,b,c\n1,x,2\n3,y\n")
    with pytest.raises(CostModelError, match=r"t.csv:3: expected 3 columns"):
        list(csv_rows(str(path), "table", ("a", "b"), {"b": "x"}))


@pytest.mark.parametrize("body, rows", [
    ("a,b,c\n1,x,2 (note\u2028more)\n3,y,4\n5,x,6\n", [(2, "1"), (4, "5")]),  # U+2028 ends no CSV line
    ("a,b,c\r1,x,2\r\"3\",y,4\r5,x,6\r", [(2, "1"), (4, "5")]),  # carriage returns alone, and a quote
    ("a,b,c\r\n1,x,2\r\n3,y,4\r\n5,x,6\r\n", [(2, "1"), (4, "5")]),
])
def test_line_ends_are_the_csv_modules(tmp_path, body, rows):
    from costmodel.measure.tables import csv_rows

    path = tmp_path / "t.csv"
    path.write_bytes(body.encode())
    assert [(line, row["a"]) for line, row in csv_rows(str(path), "table", ("a", "b"), {"b": "x"})] == rows


def test_what_the_csv_module_cannot_read_is_one_line(tmp_path):
    from costmodel.measure.tables import csv_rows

    path = tmp_path / "t.csv"
    path.write_text('a,b\n1,"' + "x" * 200_000 + '"\n')
    with pytest.raises(CostModelError, match=r"t.csv:2: not readable as CSV: field larger than field limit"):
        list(csv_rows(str(path), "table", ("a", "b")))
