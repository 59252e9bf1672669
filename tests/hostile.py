"""Run the CLI in-process on hostile input and classify what happened.

``run(args)`` calls ``costmodel.cli.main`` as the ``cost4d`` script would, with stdout and stderr
captured, ``COST4D_DEBUG=1`` (so a bug escapes as a traceback rather than the one-line internal
error) and an alarm: a case that runs past ``timeout`` seconds is a hang. ``assert_refused`` and
``assert_clean`` state the contract every case must keep.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import signal
import sys
import time
import traceback
from dataclasses import dataclass

from costmodel.cli import main

#: the longest a case may take (the issue's bound)
TIMEOUT = 5.0


class Hang(BaseException):
    """Raised by the alarm: the case ran past TIMEOUT."""


@dataclass
class Outcome:
    args: list
    code: object
    stdout: str
    stderr: str
    error: str | None  # a traceback, or 'hang'
    seconds: float

    def __str__(self) -> str:
        return (f"cost4d {' '.join(map(str, self.args))[:300]}\n-> exit {self.code} in {self.seconds:.2f} s\n"
                f"stderr: {self.stderr[-2000:]}\nstdout: {self.stdout[-500:]}\n{self.error or ''}")


def _alarm(signum, frame):
    raise Hang()


def run(args, timeout: float = TIMEOUT) -> Outcome:
    out, err = io.StringIO(), io.StringIO()
    old_argv, old_env = sys.argv, os.environ.get("COST4D_DEBUG")
    old_alarm, old_term = signal.signal(signal.SIGALRM, _alarm), signal.getsignal(signal.SIGTERM)
    sys.argv, os.environ["COST4D_DEBUG"] = ["cost4d", *map(str, args)], "1"
    code, error, start = None, None, time.perf_counter()
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            main()
    except SystemExit as exit_:
        code = exit_.code
    except Hang:
        error = "hang"
    except BaseException:  # noqa: BLE001 - exactly what this harness looks for
        error = traceback.format_exc()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old_alarm)
        signal.signal(signal.SIGTERM, old_term)
        sys.argv = old_argv
        if old_env is None:
            os.environ.pop("COST4D_DEBUG", None)
        else:
            os.environ["COST4D_DEBUG"] = old_env
    return Outcome(list(args), code, out.getvalue(), err.getvalue(), error, time.perf_counter() - start)


def assert_kept_contract(outcome: Outcome) -> None:
    """No traceback, no hang; exit 0 with finite output, or exit 2 with one line saying why."""
    assert outcome.error is None, str(outcome)
    assert outcome.code in (0, 2), str(outcome)
    if outcome.code == 2:
        assert_one_line(outcome)
    else:
        assert_finite(outcome)


def assert_one_line(outcome: Outcome) -> None:
    lines = [line for line in outcome.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and len(lines[0]) > len("error: ") + 10, str(outcome)
    assert len(lines[0]) < 1200, str(outcome)


def assert_refused(outcome: Outcome, *needles: str) -> None:
    """Exit 2, one line on stderr, nothing on stdout, the line containing every needle."""
    assert outcome.error is None, str(outcome)
    assert outcome.code == 2, str(outcome)
    assert_one_line(outcome)
    assert outcome.stdout == "", str(outcome)
    for needle in needles:
        assert needle in outcome.stderr, f"{needle!r} not in the message\n{outcome}"


def assert_finite(outcome: Outcome) -> None:
    """What a successful command prints holds no inf or NaN (JSON output is parsed strictly)."""
    text = outcome.stdout
    if "--json" in outcome.args:
        json.loads(text, parse_constant=lambda name: (_ for _ in ()).throw(AssertionError(f"{name} in JSON")))
    assert not re.search(r"(?<![\w.])-?(nan|inf)(?![\w.])", text), f"nan or inf printed\n{outcome}"
