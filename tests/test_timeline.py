"""The pipeline timeline, played op by op, leaves exactly the bubble the pipeline model says (GPipe, 1F1B,
interleaved 1F1B, ZB-H1), runs every pass once and after its input, and holds the micro-batches in flight
the memory model counts; `cost4d plot` writes its figures."""

import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costmodel.cost.point import Point
from costmodel.errors import CostModelError
from costmodel.formulas.pipeline import microbatches_in_flight
from costmodel.parallel.pipeline import StageRole, bubble, in_flight
from costmodel.solve.timeline import idle_fraction, timeline
from costmodel.specs.layout import Layout

#: (schedule, p, m, v): every schedule over stage and micro-batch counts, interleaving with 2-4 chunks
#: (m a multiple of p, as Megatron-LM and specs.layout require), ZB-H1 with m >= p
CASES = ([(s, p, m, 1) for s in ("gpipe", "1f1b") for p, m in [(1, 4), (2, 2), (4, 8), (4, 3), (8, 16), (5, 7)]]
         + [("interleaved", p, m, v) for p, m, v in [(2, 2, 2), (4, 4, 2), (4, 8, 2), (4, 8, 3), (4, 12, 4), (8, 16, 2),
                                                    (3, 9, 2), (1, 3, 2), (4, 8, 1)]]
         + [("zb-h1", p, m, 1) for p, m in [(1, 3), (2, 2), (4, 4), (4, 8), (5, 7), (8, 16), (3, 10)]])


def ids(case):
    return "{}-p{}-m{}-v{}".format(*case)


@pytest.mark.parametrize("case", CASES, ids=ids)
def test_idle_time_is_the_pipeline_models_bubble(case):
    """Idle time over stages x length equals what `step` charges: costmodel.parallel.pipeline.bubble,
    (p - 1)/(m + p - 1), (p - 1)/(v m + p - 1) interleaved, (p - 1)/(3 m + p - 1) for ZB-H1."""
    schedule, p, m, v = case
    ops = timeline(schedule, p, m, chunks=v)
    model = bubble(Layout(pp=p, microbatches=m, schedule=schedule, chunks=v))
    assert idle_fraction(ops, p) == pytest.approx(model, abs=1e-12)  # float sums of 1/v-long passes


@settings(max_examples=60, deadline=None)
@given(schedule=st.sampled_from(["gpipe", "1f1b", "interleaved", "zb-h1"]), p=st.integers(1, 8),
       rounds=st.integers(1, 4), extra=st.integers(0, 7), v=st.integers(1, 4))
def test_any_layout_leaves_the_models_bubble(schedule, p, rounds, extra, v):
    """Any stage count, micro-batch count the layout accepts (interleaved: a multiple of p; ZB-H1: m >= p) and
    chunk count: the played-out idle time is the model's bubble."""
    m = rounds * p if schedule == "interleaved" else p + extra if schedule == "zb-h1" else 1 + extra
    v = v if schedule == "interleaved" else 1
    ops = timeline(schedule, p, m, chunks=v)
    model = bubble(Layout(pp=p, microbatches=m, schedule=schedule, chunks=v))
    assert idle_fraction(ops, p) == pytest.approx(model, abs=1e-12)


def test_bubble_by_hand():
    """p = 4, m = 8: 3/11 for 1F1B, 3/19 interleaved with v = 2, 3/27 = 1/9 for ZB-H1 (Qi et al. 2023: a third
    of 1F1B's bubble time)."""
    for schedule, v, expected in (("1f1b", 1, 3 / 11), ("interleaved", 2, 3 / 19), ("zb-h1", 1, 1 / 9)):
        assert idle_fraction(timeline(schedule, 4, 8, chunks=v), 4) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("case", CASES, ids=ids)
def test_every_pass_once_and_after_its_input(case):
    """Micro-batch i's forward visits the model's v p chunk-stages in order (chunk c on stage s is position
    c p + s), its backward in reverse after the last forward; ZB-H1's W follows its own B; a stage runs one
    pass at a time."""
    schedule, p, m, v = case
    ops = timeline(schedule, p, m, chunks=v)
    kinds = ("F", "B", "W") if schedule == "zb-h1" else ("F", "B")
    end = {}
    for op in ops:
        key = (op.kind, op.chunk * p + op.stage, op.microbatch)
        assert key not in end, key  # once
        end[key] = op.end
    assert set(end) == {(k, q, i) for k in kinds for q in range(v * p) for i in range(m)}
    for op in ops:
        q, i, last = op.chunk * p + op.stage, op.microbatch, v * p - 1
        before = {"F": ("F", q - 1, i) if q > 0 else None,
                  "B": ("B", q + 1, i) if q < last else ("F", last, i),
                  "W": ("B", q, i)}[op.kind]
        if before is not None:
            assert op.start >= end[before] - 1e-12, (op, before)
        assert op.start >= end["F", q, i] - 1e-12 or op.kind == "F"  # a backward after its own forward
    for s in range(p):
        mine = sorted((op.start, op.end) for op in ops if op.stage == s)
        assert all(a[1] <= b[0] + 1e-12 for a, b in zip(mine, mine[1:]))


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b", "zb-h1"])
def test_peak_in_flight_is_the_formula(schedule):
    """The most micro-batches whose activations a stage holds: from its forward's start (saving begins) to its
    backward's end (frees, taken first at equal times; ZB-H1's B frees what its W does not need)."""
    stages, microbatches = 4, 8
    ops = timeline(schedule, stages, microbatches)
    until = "W" if schedule == "zb-h1" else "B"  # ZB-H1: held until the weight gradient (whole: an upper bound)
    for s in range(stages):
        assert peak(ops, s, until) == microbatches_in_flight(stage=s, stages=stages, microbatches=microbatches,
                                                             schedule=schedule)


def peak(ops, stage, until):
    """Most passes on ``stage`` between a forward's start and the ``until`` pass's end of the same micro-batch."""
    events = sorted((op.start if op.kind == "F" else op.end, 1 if op.kind == "F" else -1)
                    for op in ops if op.stage == stage and op.kind in ("F", until))
    held = most = 0
    for _, step in events:
        held += step
        most = max(most, held)
    return most


@pytest.mark.parametrize("p, m", [(4, 4), (4, 8), (5, 7), (8, 16)])
def test_zb_h1_keeps_p_microbatches_until_their_weight_gradient(p, m):
    """Qi et al. 2023, Sec. 2.1: ZB-H1 delays W so that every stage has the same number in flight, p (1F1B's
    first stage), counted to the W (what the memory model counts); to B, 1F1B's p - s."""
    ops = timeline("zb-h1", p, m)
    assert [peak(ops, s, "W") for s in range(p)] == [p] * p
    assert [peak(ops, s, "B") for s in range(p)] == [p - s for s in range(p)]


@pytest.mark.parametrize("p, m, v", [(4, 8, 2), (4, 12, 3), (8, 16, 2), (2, 4, 4), (4, 4, 2), (8, 8, 4), (3, 6, 2)])
def test_every_interleaved_stage_holds_what_the_memory_model_counts(p, m, v):
    """Each stage i peaks at min(2 (p - i - 1) + (v - 1) p + 1, m v) chunk-passes (Megatron's warm-up plus
    one), the memory model's count in micro-batches' worth x v, also when m < 2p."""
    ops = timeline("interleaved", p, m, chunks=v)
    for i in range(p):
        point = Point.of(Layout(pp=p, microbatches=m, schedule="interleaved", chunks=v))
        assert peak(ops, i, "B") == min(2 * (p - i - 1) + (v - 1) * p + 1, m * v)
        assert peak(ops, i, "B") / v == pytest.approx(in_flight(point, StageRole(i, int(i == 0), int(i == p - 1))),
                                                      abs=1e-12)


@pytest.mark.parametrize("p, m, v", [(4, 8, 2), (4, 12, 3), (8, 16, 2), (2, 4, 4)])
def test_interleaved_first_stage_holds_the_interleave_factor(p, m, v):
    """Stage 0 of interleaved 1F1B peaks at 2 (p - 1) + (v - 1) p + 1 chunk-passes, p (1 + (p - 1)/(p v))
    micro-batches' worth (Korthikanti et al. 2022, Sec. 4.2.3: the memory model's count) when m >= 2p."""
    ops = timeline("interleaved", p, m, chunks=v)
    assert peak(ops, 0, "B") == 2 * (p - 1) + (v - 1) * p + 1
    point = Point.of(Layout(pp=p, microbatches=m, schedule="interleaved", chunks=v))
    assert peak(ops, 0, "B") / v == pytest.approx(in_flight(point, StageRole(0, 1, 0)), abs=1e-12)


@pytest.mark.parametrize("schedule, p, m, v, message", [
    ("interleaved", 4, 6, 2, "multiple of --pp"),
    ("zb-h1", 4, 3, 1, "--microbatches >= --pp"),
    ("1f1b", 4, 8, 2, "--chunks needs --schedule interleaved"),
    ("dualpipe", 4, 8, 1, "the timeline plays gpipe, 1f1b, interleaved, zb-h1"),
])
def test_what_the_layout_refuses_the_timeline_refuses(schedule, p, m, v, message):
    with pytest.raises(CostModelError, match=message):
        timeline(schedule, p, m, chunks=v)


@pytest.mark.slow
@pytest.mark.parametrize("args", [["pipeline", "--pp", "4", "--microbatches", "8", "--schedule", "1f1b"],
                                  ["memory", "--model", "llama3-70b", "--pp", "8", "--tp", "8", "--sp",
                                   "--tokens", "8192", "--microbatches", "16"]])
def test_plot_writes_a_figure(tmp_path, args):
    out = tmp_path / "figure.png"
    result = subprocess.run([sys.executable, "-m", "costmodel", "plot", *args, "--out", str(out)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

