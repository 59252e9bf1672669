"""`cost4d bench gpu`: one device's matmul throughput, memory-copy bandwidth, and a small FFN
training step's MFU and peak memory against cost4d's own prediction of both."""

from __future__ import annotations

import time

import torch

SHAPES = [(m, m, m) for m in (1024, 2048, 4096, 8192)] + [(8192, 4096, 16384), (8192, 16384, 4096)]


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _timed(fn, device, iters: int) -> float:
    fn()
    _sync(device)
    start = time.perf_counter()
    for _ in range(iters):
        fn()
    _sync(device)
    return (time.perf_counter() - start) / iters


def matmuls(device, dtype, iters: int, shapes=SHAPES, on_progress=None) -> list[dict]:
    rows = []
    for m, n, k in shapes:
        a = torch.randn(m, k, device=device, dtype=dtype)
        b = torch.randn(k, n, device=device, dtype=dtype)
        t = _timed(lambda: a @ b, device, iters)
        rows.append({"m": m, "n": n, "k": k, "seconds": t, "flops_per_s": 2 * m * n * k / t})
        if on_progress is not None:
            on_progress(f"matmul {m}x{n}x{k}")
    return rows


def copy_bandwidth(device, nbytes: int, iters: int) -> dict:
    src = torch.empty(nbytes, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    t = _timed(lambda: dst.copy_(src), device, iters)
    return {"bytes": nbytes, "seconds": t, "bytes_per_s": 2 * nbytes / t}  # read + write


def ffn_step(device, *, d_model: int, d_ff: int, layers: int, tokens: int, iters: int, hardware=None) -> dict:
    """A training step of the FFN stack (bf16 autocast, fp32 AdamW) against cost4d's predictions."""
    from costmodel.specs.layout import Layout
    from costmodel.specs.model import FFNStack
    from costmodel.specs.recipe import RECIPES
    from costmodel.cost.evaluate import evaluate_layout

    spec = FFNStack(name="bench", d_model=d_model, d_ff=d_ff, layers=layers)
    blocks = []
    for _ in range(layers):
        blocks += [torch.nn.Linear(d_model, d_ff, bias=False), torch.nn.Linear(d_ff, d_model, bias=False)]
    model = torch.nn.Sequential(*blocks).to(device)
    opt = torch.optim.AdamW(model.parameters())
    x = torch.randn(tokens, d_model, device=device)

    def step():
        with torch.autocast(device.type, dtype=torch.bfloat16):
            loss = model(x).float().square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=False)

    step()  # creates the optimizer state and the grads
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    t = _timed(step, device, iters)
    predicted = evaluate_layout(spec, RECIPES["cs336"], Layout(tokens=tokens)).heaviest
    flops = evaluate_layout(spec, RECIPES["cs336"], Layout(tokens=tokens)).flops.total
    out = {"d_model": d_model, "d_ff": d_ff, "layers": layers, "tokens": tokens, "seconds": t,
           "flops": flops, "flops_per_s": flops / t,
           "peak_memory_bytes": torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None,
           "predicted_memory_bytes": predicted.total_bytes,
           "predicted_components": predicted.components}
    if hardware is not None:  # cost4d's own prediction of the step, to compare with the measurement
        from costmodel.formulas.step import utilisation

        b = evaluate_layout(spec, RECIPES["cs336"], Layout(tokens=tokens), hardware).step
        peak = hardware.flops("bf16")
        out.update(hardware=hardware.name, predicted_seconds=b.step_s, predicted_mfu=b.mfu,
                   measured_mfu=utilisation(flops=flops, seconds=t, devices=1, peak_flops=peak),
                   time_error_pct=100 * (b.step_s - t) / t)
    return out


SMALL_SHAPES = [(256, 256, 256), (512, 512, 512)]


def steps(small: bool) -> int:
    """How many times :func:`run` reports progress: each matmul shape, the copy, the FFN step."""
    return len(SMALL_SHAPES if small else SHAPES) + 2


def run(device_name: str, *, iters: int, small: bool, hardware=None, on_progress=None) -> dict:
    """The whole benchmark on one device; ``on_progress(label)`` after each of its :func:`steps`."""
    device = torch.device(device_name)
    dtype = torch.bfloat16
    shapes = SMALL_SHAPES if small else SHAPES
    report = on_progress or (lambda label: None)
    ffn = dict(d_model=256, d_ff=1024, layers=2, tokens=512) if small else dict(d_model=4096, d_ff=16384, layers=4,
                                                                                 tokens=8192)
    env = {"device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
           "torch": torch.__version__, "cuda": torch.version.cuda}
    matmul = matmuls(device, dtype, iters, shapes, report)
    copy = copy_bandwidth(device, (1 << 20) if small else (1 << 30), iters)
    report("copy")
    step = ffn_step(device, iters=iters, hardware=hardware, **ffn)
    report("FFN step")
    return {"format": "cost4d-gpu-bench/1", "environment": env, "matmul_bf16": matmul, "copy": copy, "ffn_step": step}
