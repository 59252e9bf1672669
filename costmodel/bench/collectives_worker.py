"""One rank of `cost4d bench collectives` (started by torchrun; rank 0 writes the results).

``python -m torch.distributed.run ... -m costmodel.bench.collectives_worker ARGS`` takes the same ARGS as
`cost4d bench collectives` and parses them with that command's parser (there is no second one): under
torchrun the command runs :func:`run_rank` instead of launching torchrun itself.

Per collective and message size: warm-up iterations, then timed iterations (CUDA events on GPU,
perf_counter after a barrier on CPU); the time is the slowest rank's mean, as nccl-tests reports a
collective as done when every rank is. algbw = S / t and busbw = algbw x factor (nccl-tests).
Results are written after every collective, atomically, so a crash or timeout leaves what finished.
"""

from __future__ import annotations

import os
import platform
import socket
import sys
import time
import warnings

import torch
import torch.distributed as dist

from costmodel.bench.collectives import PROGRESS, PROGRESS_ENV, sizes
from costmodel.inputs.output import write_json
from costmodel.formulas.comms import bus_factor
from costmodel.measure.results import FORMAT

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def _buffers(op: str, size: int, n: int, dtype, device):
    """(run, S): a closure doing one collective whose nccl-tests buffer is S bytes."""
    elem = torch.tensor([], dtype=dtype).element_size()
    count = max(size // elem // n * n, n)  # divisible by n, as nccl-tests rounds
    full = torch.ones(count, dtype=dtype, device=device)
    part = torch.ones(count // n, dtype=dtype, device=device)
    out = torch.empty_like(full)
    rank = dist.get_rank()
    if op == "all-reduce":
        return (lambda: dist.all_reduce(full)), full.nbytes
    if op == "all-gather":
        return (lambda: dist.all_gather_into_tensor(out, part)), full.nbytes
    if op == "reduce-scatter":
        return (lambda: dist.reduce_scatter_tensor(part, full)), full.nbytes
    if op == "all-to-all":
        return (lambda: dist.all_to_all_single(out, full)), full.nbytes
    if op == "broadcast":
        return (lambda: dist.broadcast(full, 0)), full.nbytes
    if op == "send/recv":  # pairs (0,1), (2,3), ...: each rank sends S and receives S
        peer = rank ^ 1
        if peer >= n:
            return (lambda: None), full.nbytes

        def exchange():
            ops = [dist.P2POp(dist.isend, full, peer), dist.P2POp(dist.irecv, out, peer)]
            for req in dist.batch_isend_irecv(ops):
                req.wait()
        return exchange, full.nbytes
    raise ValueError(f"unknown collective {op}")


def _time(run, iters: int, device) -> float:
    if device.type == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            run()
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end) / 1e3 / iters
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(iters):
        run()
    return (time.perf_counter() - t0) / iters


def environment(backend: str, device) -> dict:
    n = dist.get_world_size()
    hosts = [None] * n
    dist.all_gather_object(hosts, socket.gethostname())
    env = {"world_size": n, "nodes": len(set(hosts)), "gpus_per_node": int(os.environ.get("LOCAL_WORLD_SIZE", n)),
           "ranks_per_node": int(os.environ.get("LOCAL_WORLD_SIZE", n)), "hosts": sorted(set(hosts)),
           "backend": backend, "torch": torch.__version__, "python": platform.python_version()}
    if device.type == "cuda":
        env["devices"] = [torch.cuda.get_device_name(device)]
        env["cuda"] = torch.version.cuda
        env["nccl"] = ".".join(map(str, torch.cuda.nccl.version())) if backend == "nccl" else None
        env["driver"] = _driver()
    else:
        env["devices"] = [platform.processor() or platform.machine()]
    return env


def _driver():
    try:
        import subprocess

        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10)
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 else None
    except (OSError, IndexError, subprocess.SubprocessError):
        return None


def run_rank(*, ops: list[str], min_bytes: int, max_bytes: int, factor: float, warmup: int, iters: int, dtype: str,
             backend: str, out) -> dict:
    """This rank's part of the sweep (every rank runs every collective); rank 0 writes ``out``."""
    warnings.filterwarnings("ignore", category=FutureWarning, module=r"torch\.distributed")  # reduce_scatter_tensor
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0))) if backend == "nccl" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group(backend)
    rank, n = dist.get_rank(), dist.get_world_size()
    report = rank == 0 and os.environ.get(PROGRESS_ENV) == "1"
    document = {"format": FORMAT, "status": "running",
                "source": {"tool": "cost4d bench collectives", "argv": sys.argv[1:]},
                "environment": environment(backend, device), "runs": []}
    for op in ops:
        rows = []
        for size in sizes(min_bytes, max_bytes, factor):
            run, buffer = _buffers(op, size, n, DTYPES[dtype], device)
            for _ in range(warmup):
                run()
            elapsed = torch.tensor([_time(run, iters, device)], dtype=torch.float64)
            dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)  # done when the slowest rank is
            t = elapsed.item()
            algbw = buffer / t
            rows.append({"bytes": buffer, "dtype": dtype, "placement": "out-of-place", "time_s": t,
                         "algbw_bytes_per_s": algbw, "busbw_bytes_per_s": algbw * bus_factor(op=op, group=n)})
            if report:
                print(f"{PROGRESS} {op} {size}", flush=True)
        document["runs"].append({"collective": op, "algorithm": "auto", "rows": rows})
        if rank == 0:
            write_json(out, document)
    document["status"] = "ok"
    if rank == 0:
        write_json(out, document)
    dist.destroy_process_group()
    return document


def main(argv=None) -> None:
    """`cost4d bench collectives ARGS` on this rank: the command's own parser reads ARGS."""
    from costmodel.cli import main as cost4d

    cost4d(["bench", "collectives", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    main()
