"""The pipeline timeline, played op by op, leaves exactly the bubble the formula says, and 1F1B holds at most
p - s micro-batches on stage s (its in-flight count); `cost4d plot` writes its figures."""

import subprocess
import sys

import pytest

from costmodel.formulas.pipeline import bubble_fraction, microbatches_in_flight
from costmodel.solve.timeline import idle_fraction, timeline


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
@pytest.mark.parametrize("stages, microbatches", [(1, 4), (2, 2), (4, 8), (4, 3), (8, 16), (5, 7)])
def test_idle_time_is_the_bubble_formula(schedule, stages, microbatches):
    ops = timeline(schedule, stages, microbatches)
    assert len(ops) == 2 * stages * microbatches
    assert idle_fraction(ops, stages) == pytest.approx(bubble_fraction(stages=stages, microbatches=microbatches,
                                                                       schedule=schedule), abs=1e-12)


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
def test_peak_in_flight_is_the_formula(schedule):
    """The most micro-batches whose activations a stage holds: from its forward's start (saving begins) to its
    backward's end (frees, taken first at equal times)."""
    stages, microbatches = 4, 8
    ops = timeline(schedule, stages, microbatches)
    for s in range(stages):
        events = sorted((op.start if op.kind == "F" else op.end, 1 if op.kind == "F" else -1)
                        for op in ops if op.stage == s)
        held = peak = 0
        for _, step in events:
            held += step
            peak = max(peak, held)
        assert peak == microbatches_in_flight(stage=s, stages=stages, microbatches=microbatches, schedule=schedule)


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
