"""nanotron's fitted step time: the host floor by hand, the parts that sum to the step, the band, and
(slow) that benchmarks/fit_step_nanotron.py refits the constants the spec ships and the accuracy the
README states."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from costmodel.cost.evaluate import evaluate_layout
from costmodel.specs.framework_catalog import FRAMEWORKS
from costmodel.specs.layout import Layout
from costmodel.specs.load import load_hardware, load_model, load_recipe

H100 = load_hardware("h100-sxm")
NANOTRON = FRAMEWORKS["nanotron"]
T = NANOTRON.time
ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "training-runs" / "ultrascale_playbook_1b_3b.csv"


def _cost(layout, model="nanotron-1b", framework=NANOTRON):
    return evaluate_layout(load_model(model), load_recipe("megatron"), layout, H100, framework=framework)


def _most_layers(cost):
    return max(s.stage.layers for s in cost.stages)


@pytest.mark.parametrize("layout, per_layer", [
    # TP inside one node, no pipeline: the floor per layer is one layer_floor_s
    (Layout(tp=8, sp=True, dp=2, zero=3, tokens=4096, grad_accum=128), T.layer_floor_s),
    # TP over 16 GPUs spans 2 nodes of 8
    (Layout(tp=16, sp=True, zero=3, tokens=4096, grad_accum=64), 2 * T.layer_floor_s),
    # a pipeline of 2 stages with tp 4 x dp 2 inside each: the stages sit on different nodes
    (Layout(tp=4, sp=True, pp=2, dp=2, zero=3, tokens=4096, microbatches=64),
     T.layer_floor_s + 4 * T.pipeline_tp_rank_s),
    # the same pipeline on one node (tp 2 x dp 2 x pp 2 = 8 GPUs): no pipeline term
    (Layout(tp=2, sp=True, pp=2, dp=2, zero=3, tokens=4096, microbatches=64), T.layer_floor_s),
])
def test_host_floor_by_hand(layout, per_layer):
    cost = _cost(layout)
    micro = layout.microbatches or layout.grad_accum
    assert cost.step.host_floor_s == pytest.approx(micro * _most_layers(cost) * per_layer, rel=1e-12)


def test_step_is_the_larger_of_kernels_and_floor_pipelined_plus_unoverlapped_data():
    layout = Layout(tp=4, sp=True, pp=2, dp=2, zero=3, tokens=4096, microbatches=64)
    bare = _cost(layout, framework=NANOTRON.model_copy(update={"time": None})).step
    step = _cost(layout).step
    critical = bare.matmul_s + bare.elementwise_s + bare.tp_exposed_s + bare.p2p_exposed_s + bare.cp_exposed_s + bare.ep_s
    critical = critical + bare.attention_s
    expected = (max(T.kernel_factor * critical, step.host_floor_s) / (1 - bare.bubble) + T.data_factor * bare.data_comm_s
                + bare.optimizer_s)
    assert step.step_s == pytest.approx(expected, rel=1e-12)
    assert step.step_s > bare.step_s
    assert sum(step.critical_parts.values()) == pytest.approx(step.step_s, rel=1e-12)


def test_small_tp_micro_batches_hit_the_floor_and_large_ones_do_not():
    small = _cost(Layout(tp=8, sp=True, dp=2, zero=3, tokens=4096, grad_accum=128)).step
    large = _cost(Layout(tp=8, sp=True, dp=2, zero=3, tokens=16 * 4096, grad_accum=8)).step
    assert small.framework_s + small.matmul_s + small.attention_s + small.elementwise_s + small.tp_exposed_s == \
        pytest.approx(small.host_floor_s, rel=1e-12)
    assert large.host_floor_s < T.kernel_factor * (large.matmul_s + large.attention_s + large.elementwise_s
                                                   + large.tp_exposed_s)


def test_step_json_has_the_framework_part_and_its_band():
    out = subprocess.run([sys.executable, "-m", "costmodel", "step", "--model", "nanotron-3b", "--hardware", "h100-sxm",
                          "--framework", "nanotron", "--tp", "4", "--sp", "--dp", "2", "--tokens", "4096",
                          "--grad-accum", "128", "--json"], capture_output=True, text=True, check=True)
    data = json.loads(out.stdout)
    assert data["breakdown"]["framework_s"] > 0
    assert sum(data["breakdown"].values()) == pytest.approx(data["step_s"], rel=1e-9)
    assert data["step_s_low"] == pytest.approx(data["step_s"] / (1 + T.error_high), rel=1e-12)
    assert data["step_s_high"] == pytest.approx(data["step_s"] / (1 + T.error_low), rel=1e-12)
    assert data["overlaps"]["data"] == "none"  # the fitted time's data traffic is unoverlapped, whatever --data-overlap says
    # 8 GPUs: one node, no pipeline; the range of the runs that did not stall
    assert data["stall_rate"] == {"pipelined": False, "nodes": 1, "stalled": 0, "runs": 21}
    assert data["step_s_steady_high"] == pytest.approx(data["step_s"] / (1 + T.steady_low), rel=1e-12)


def test_other_frameworks_have_no_fitted_time():
    """megatron and torchtitan have no measured runs in the training data: their step is the hardware's."""
    assert FRAMEWORKS["megatron"].time is None and FRAMEWORKS["torchtitan"].time is None


@pytest.mark.slow
@pytest.mark.skipif(not DATA.exists(), reason="needs ../shared/data/training-runs")
def test_the_fit_reproduces_the_shipped_constants_and_the_readme_figures():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import fit_step_nanotron as f

    every = f.runs()
    sample = [r for r in every if r.nodes < f.LEFT_OUT_NODES]
    x = f.fit(sample)
    shipped = (T.kernel_factor, T.layer_floor_s, T.pipeline_tp_rank_s, T.data_factor)
    assert x == pytest.approx(shipped, rel=2e-3)
    assert f.error_band(sample, shipped) == pytest.approx((T.error_low, T.error_high), abs=1.5e-3)
    # the closed form the fit minimises is what cost4d computes with the shipped profile, row by row
    models = {"1B": "nanotron-1b", "3B": "nanotron-3b"}
    for run in sample[::50]:
        step = _cost(run.layout, models[run.model]).step
        assert step.step_s == pytest.approx(f.predict(run, shipped), rel=1e-9)
    readme = (ROOT / "README.md").read_text()
    bare = f.statistics.median(f.errors(sample, (1.0, 0.0, 0.0, 0.0)))
    assert f"median error {bare:+.1%}" in readme
    in_sample = f.median_abs(f.errors(sample, shipped))
    assert f"median |error| of the step time {in_sample:.1%} in-sample over {len(sample)} runs" in readme
    for held in ("1B", "3B"):
        other = f.fit([r for r in sample if r.model != held])
        held_out = f.median_abs(f.errors([r for r in sample if r.model == held], other))
        assert f"{held_out:.1%} on {held}" in readme
    errs = f.errors(sample, shipped)
    assert f"({f.within(errs, .1):.0%} within 10%, {f.within(errs, .25):.0%} within 25%)" in readme
    flat = " ".join(readme.split())
    assert f"median error {bare:+.1%}, a median {1 / (1 + bare):.1f}x" in flat
    assert f"the larger of {T.kernel_factor:g} x the GPU work" in flat
    assert (f"host floor ({1e3 * T.layer_floor_s:.2f} ms per node the TP group spans, + {1e3 * T.pipeline_tp_rank_s:.2f} "
            f"ms per TP rank") in flat
    assert f"adds {T.data_factor:.2f} x its modelled time" in flat
    assert f"percentiles, {T.error_low:.0%} to {T.error_high:+.0%})" in flat
    assert T.stall_ratio == f.stall_ratio()
    assert [(s.pipelined, s.nodes, s.stalled, s.runs) for s in T.stalls] == f.stall_table(every, shipped)
    assert f.steady_band(sample, shipped) == pytest.approx((T.steady_low, T.steady_high), abs=1.5e-3)
    steady = [r for r in sample if not f.stalled(r, shipped)]
    assert (f"{len(sample) - len(steady)} of the {len(sample)} ran more than {T.stall_ratio:g}x the prediction" in flat
            and f"lie within {T.steady_low:+.1%} to {T.steady_high:+.1%} (prediction / measured - 1; median |error| "
            f"{f.median_abs(f.errors(steady, shipped)):.1%})" in flat)
    table = {(s.pipelined, s.nodes): s for s in T.stalls}
    assert (f"pipelined: {table[True, 1].stalled} of {table[True, 1].runs} runs on one node, {table[True, 32].stalled} "
            f"of {table[True, 32].runs} on 32; without a pipeline "
            f"{sum(s.stalled for s in T.stalls if not s.pipelined and s.nodes < 64)} of "
            f"{sum(s.runs for s in T.stalls if not s.pipelined and s.nodes < 64)} up to 32 nodes") in flat
    far = [r for r in every if r.nodes >= f.LEFT_OUT_NODES]
    assert f"The {len(far)} runs on 64 nodes are left out: they ran {f.slowdown_text(far, shipped)}" in \
        " ".join(readme.split())


def test_the_fitted_time_applies_only_on_the_device_of_its_runs():
    """On another device the step is the hardware model's alone, without nanotron's band."""
    layout = Layout(tp=4, sp=True, fsdp=16, zero=1, tokens=4096, grad_accum=4)
    spec, rec = load_model("nanotron-1b"), load_recipe("megatron")
    v5p = load_hardware("tpu-v5p")
    timed = evaluate_layout(spec, rec, layout, v5p, framework=NANOTRON).step
    bare = evaluate_layout(spec, rec, layout, v5p, framework=NANOTRON.model_copy(update={"time": None})).step
    assert timed.step_s == bare.step_s and timed.framework_s == 0
    assert NANOTRON.time_on(H100) is T and NANOTRON.time_on(v5p) is None


@pytest.mark.slow
def test_stall_lookup_takes_the_nearest_count_at_or_below_and_drops_the_band_beyond_the_fit():
    """60 nodes: the 32-node runs' stalls, the steady band still applies (32 is the fit's most); 256 nodes: the
    64-node runs', and no steady band (no fitted run spanned more than 32 nodes)."""
    def run(nodes):
        out = subprocess.run([sys.executable, "-m", "costmodel", "step", "--model", "nanotron-3b", "--hardware",
                              "h100-sxm", "--framework", "nanotron", "--tp", "4", "--sp", "--pp", "2", "--dp",
                              str(nodes), "--tokens", "4096", "--microbatches", "8", "--json"],
                             capture_output=True, text=True, check=True)
        return json.loads(out.stdout)

    below, beyond = run(30), run(256)  # 30 x 4 x 2 = 240 GPUs: 30 nodes; 2,048 GPUs: 256 nodes
    assert below["layout_nodes"] == 30 and below["stall_rate"] == {"pipelined": True, "nodes": 16, "stalled": 38,
                                                                   "runs": 185}
    assert below["step_s_steady_low"] is not None
    assert beyond["layout_nodes"] == 256 and beyond["stall_rate"]["nodes"] == 64
    assert beyond["step_s_steady_low"] is None and beyond["step_s_steady_high"] is None
    assert T.max_nodes == max(s.nodes for s in T.stalls if s.nodes < 64)


def test_stall_fields_go_together():
    from costmodel.specs.framework import FrameworkTime

    fields = T.model_dump()
    for dropped in ("steady_low", "steady_high", "stall_ratio"):
        with pytest.raises(ValueError, match="go together"):
            FrameworkTime.model_validate({**fields, dropped: None})
