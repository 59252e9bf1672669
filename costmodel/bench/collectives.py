"""Launch the collective benchmark with torchrun and make sure a results file exists afterwards.

torchrun starts ``costmodel.bench.collectives_worker`` with `cost4d bench collectives`'s own arguments;
each rank parses them with that command's parser and runs :func:`~costmodel.bench.collectives_worker.run_rank`.
If a rank fails or the timeout hits, the file still ends up complete JSON: the collectives rank 0
finished (it rewrites the file atomically after each), marked with status 'failed' or 'timeout' and
the one-line ``reason``.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

from costmodel.errors import CostModelError
from costmodel.inputs.output import write_json
from costmodel.measure.results import FORMAT, canonical_collective

#: the collectives the worker times (torch.distributed calls in collectives_worker._buffers)
SUPPORTED = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "broadcast", "send/recv")
#: set by the launcher: rank 0 then prints a PROGRESS line per size timed
PROGRESS_ENV = "COST4D_BENCH_PROGRESS"
PROGRESS = "cost4d-progress"
_PROGRESS_LINE = re.compile(rf"{PROGRESS} (\S+) (\d+)")
_ERROR_LINE = re.compile(r"(?:^|\]:? ?)error: (.+)$")  # a rank's one line (torchrun may prefix '[rank0]:')


def sizes(min_bytes: int, max_bytes: int, factor: float) -> list[int]:
    """S from min_bytes up to max_bytes, each ``factor`` times the last (nccl-tests' -b -e -f)."""
    out, size = [], min_bytes
    while size <= max_bytes:
        out.append(int(size))
        size *= factor
    return out


def worker_args(*, ops: list[str], min_bytes: int, max_bytes: int, factor: float, warmup: int, iters: int,
                dtype: str, backend: str, out: Path) -> list[str]:
    """The `cost4d bench collectives` arguments that reproduce this sweep on every rank."""
    return ["--ops", ",".join(ops), "--min-bytes", str(min_bytes), "--max-bytes", str(max_bytes), "--factor",
            str(factor), "--warmup", str(warmup), "--iters", str(iters), "--dtype", dtype, "--backend", backend,
            "--out", str(out)]


def launch(*, nproc: int, ops: list[str], min_bytes: int, max_bytes: int, factor: float, warmup: int, iters: int,
           dtype: str, backend: str, out: Path, timeout: float, torchrun_args: list[str] | None = None,
           on_progress=None) -> dict:
    """Run the worker on ``nproc`` local processes (more nodes: pass torchrun_args); return the results.
    ``on_progress(op, size)`` is called as rank 0 finishes each size."""
    ops = [canonical_collective(op) for op in ops]
    if nproc < 2:
        raise CostModelError("--nproc must be at least 2 for a collective")
    if min_bytes <= 0 or max_bytes < min_bytes or factor <= 1:
        raise CostModelError("sizes: need 0 < --min-bytes <= --max-bytes and --factor > 1")
    out = Path(out)
    if out.exists():
        out.unlink()
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={nproc}", *(torchrun_args or []),
           "-m", "costmodel.bench.collectives_worker",
           *worker_args(ops=ops, min_bytes=min_bytes, max_bytes=max_bytes, factor=factor, warmup=warmup, iters=iters,
                        dtype=dtype, backend=backend, out=out)]
    env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"), **{PROGRESS_ENV: "1"})
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            start_new_session=True)
    lines: list[str] = []
    reader = threading.Thread(target=_read, args=(proc.stdout, lines, on_progress), daemon=True)
    reader.start()
    status = "ok"
    try:
        if proc.wait(timeout=timeout) != 0:
            status = "failed"
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        status = "timeout"
    except BaseException:  # Ctrl-C, SIGTERM: the ranks, in their own session, go too
        os.killpg(proc.pid, signal.SIGKILL)
        raise
    reader.join(timeout=10)
    return _finish(out, status, "".join(lines), cmd, timeout)


def _read(stream, lines: list[str], on_progress) -> None:
    """Keep the log; report each size rank 0 finishes (the marker lines stay out of the log)."""
    for line in stream:
        marker = _PROGRESS_LINE.search(line)
        if marker is None:
            lines.append(line)
        elif on_progress is not None:
            on_progress(marker.group(1), int(marker.group(2)))


def reason(log: str) -> str:
    """Why a run failed, in one line: the first rank's 'error: ...' line, else the log's last exception
    line, else its last line."""
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    for line in lines:
        found = _ERROR_LINE.search(line)
        if found:
            return found.group(1)
    raised = [line for line in lines if re.match(r"^[\w.]*(Error|Exception)\b.*:", line)]
    return (raised or lines or ["no output"])[-1][:300]


def _finish(out: Path, status: str, log: str, cmd: list[str], timeout: float) -> dict:
    """The results as written by rank 0, marked with how the run ended; a stub if nothing was written."""
    try:
        document = json.loads(out.read_text())
    except (OSError, ValueError):
        document = None
    if not isinstance(document, dict) or not isinstance(document.get("source"), dict):
        document = {"format": FORMAT, "source": {"tool": "cost4d bench collectives"}, "environment": {}, "runs": []}
    if status != "ok" or document.get("status") != "ok":
        document["status"] = status if status != "ok" else "incomplete"
        document["reason"] = (f"stopped by --timeout {timeout:g} s" if status == "timeout" else
                              reason(log) if status == "failed" else "the ranks ended without finishing")
        document["error"] = log[-4000:]
    document["source"]["command"] = cmd
    write_json(out, document)
    return document
