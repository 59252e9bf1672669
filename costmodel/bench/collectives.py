"""Launch the collective benchmark with torchrun and make sure a results file exists afterwards.

If a rank fails or the timeout hits, the file still ends up complete JSON: the collectives rank 0
finished (it rewrites the file atomically after each), marked with status 'failed' or 'timeout'.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from costmodel.errors import CostModelError
from costmodel.inputs.output import write_json
from costmodel.measure.results import FORMAT, canonical_collective


def launch(*, nproc: int, ops: list[str], min_bytes: int, max_bytes: int, factor: float, warmup: int, iters: int,
           dtype: str, backend: str, out: Path, timeout: float, torchrun_args: list[str] | None = None) -> dict:
    """Run the worker on ``nproc`` local processes (more nodes: pass torchrun_args); return the results."""
    ops = [canonical_collective(op) for op in ops]
    if nproc < 2:
        raise CostModelError("--nproc must be at least 2 for a collective")
    if min_bytes <= 0 or max_bytes < min_bytes or factor <= 1:
        raise CostModelError("sizes: need 0 < --min-bytes <= --max-bytes and --factor > 1")
    out = Path(out)
    if out.exists():
        out.unlink()
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={nproc}", *(torchrun_args or []),
           "-m", "costmodel.bench.collectives_worker", "--ops", ",".join(ops), "--min-bytes", str(min_bytes),
           "--max-bytes", str(max_bytes), "--factor", str(factor), "--warmup", str(warmup), "--iters", str(iters),
           "--dtype", dtype, "--backend", backend, "--out", str(out)]
    env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            start_new_session=True)
    status, log = "ok", ""
    try:
        log, _ = proc.communicate(timeout=timeout)
        if proc.returncode != 0:
            status = "failed"
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        log, _ = proc.communicate()
        status = "timeout"
    document = _finish(out, status, log, cmd)
    return document


def _finish(out: Path, status: str, log: str, cmd: list[str]) -> dict:
    """The results as written by rank 0, marked with how the run ended; a stub if nothing was written."""
    try:
        document = json.loads(out.read_text())
    except (OSError, ValueError):
        document = None
    if not isinstance(document, dict) or not isinstance(document.get("source"), dict):
        document = {"format": FORMAT, "source": {"tool": "cost4d bench collectives"}, "environment": {}, "runs": []}
    if status != "ok" or document.get("status") != "ok":
        document["status"] = status if status != "ok" else "incomplete"
        document["error"] = log[-4000:]
    document["source"]["command"] = cmd
    write_json(out, document)
    return document
