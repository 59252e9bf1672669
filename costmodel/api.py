"""The library in a few calls, for notebooks and scripts (the CLI uses the same pieces).

    from costmodel import api
    api.memory("xxl", fsdp=38, tokens=4096, shard_activations=0.5).total_bytes   # .state_bytes, .components
    api.memory("nanotron-1b", framework="nanotron", fsdp=8, zero=1, tokens=4096).reserved_bytes
    api.solve_fsdp("xxl", limit="95GB").n_fsdp                      # 38
    api.solve_batch("xxl", "tpu-v5p", fsdp=16, tp=4, mx=2, peak_flops=4.6e14, bandwidth=1.8e11)
    api.explain_batch(...)                                           # renders itself in Jupyter
"""

from __future__ import annotations

from costmodel.errors import CostModelError
from costmodel.specs.layout import Layout
from costmodel.specs.load import framework_profile, load_hardware, load_model, load_recipe


def _spec(model):
    """A model: a built-in name, a spec file, or a spec object."""
    from costmodel.specs.model import FFNStack, Transformer

    if isinstance(model, str):
        return load_model(model)
    if not isinstance(model, (FFNStack, Transformer)):
        raise CostModelError(f"model: give a built-in name, a spec file or a spec (got {type(model).__name__})")
    return model


def _device(hardware):
    """A device: a shipped name, a spec file, a Hardware spec, or None."""
    from costmodel.specs.hardware import Hardware

    if hardware is None or isinstance(hardware, Hardware):
        return hardware
    if isinstance(hardware, str):
        return load_hardware(hardware)
    raise CostModelError(f"hardware: give a device name, a spec file or a Hardware spec (got {type(hardware).__name__})")


def _layout(**fields) -> Layout:
    """A validated Layout; a bad field is one CostModelError naming it, as the CLI names its flag."""
    from costmodel.specs.load import validate

    return validate(Layout, fields, "layout")


def memory(model, recipe: str | None = None, framework=None, **layout):
    """Per-device memory of the heaviest stage (``layout``: the Layout fields, e.g. fsdp=38, tokens=4096):
    ``.total_bytes`` (exact accounting), ``.components``, ``.state_bytes``, ``.stage``; with a
    ``framework`` ('nanotron'), ``.overheads``, ``.peak_bytes``, ``.reserved_bytes``, ``.peak_phase``."""
    from costmodel.cost.evaluate import evaluate_layout

    frame = framework_profile(framework)
    name = recipe or (frame.recipe if frame is not None else None) or "cs336"
    return evaluate_layout(_spec(model), load_recipe(name), _layout(**layout), framework=frame).heaviest


def cost(model, recipe: str = "cs336", hardware=None, **layout):
    """Everything for one layout: ``.memory_bytes``, ``.flops``, ``.collectives``, ``.step`` (with a hardware)."""
    from costmodel.cost.evaluate import evaluate_layout

    device = _device(hardware)
    return evaluate_layout(_spec(model), load_recipe(recipe), _layout(**layout), device)


def formula(model, recipe: str = "cs336", hardware=None, **layout):
    """The same, in letters: ``.cost`` holds expressions, ``.at(expr)`` evaluates one at the layout."""
    from costmodel.cost.symbolic import formula as build

    device = _device(hardware)
    return build(_spec(model), load_recipe(recipe), _layout(**layout), device)


def plan(model, hardware, *, gpus: int, global_batch: int, seq: int | None = None, recipe: str | None = None,
         framework=None, precision: str = "bf16", top: int = 5, headroom: float = 0.0, document: int | None = None):
    """The ``top`` layouts by predicted tokens/s: a list of dict rows (a pandas DataFrame if pandas is
    installed), each with the layout's fields, step_s, tokens_per_s, mfu, memory_bytes, bubble."""
    from costmodel.solve.plan import plan as search

    spec, frame = _spec(model), framework_profile(framework)
    device = _device(hardware)
    rec = load_recipe(recipe or (frame.recipe if frame is not None else None) or "cs336")
    if (seq or getattr(spec, "seq_len", None)) is None:
        raise CostModelError(f"{spec.name} has no sequence length: give seq=")
    if not 0 <= headroom <= 0.9:
        raise CostModelError(f"headroom = {headroom!r}: give a fraction of HBM from 0 to 0.9")
    result = search(spec, rec, device, devices=gpus, global_tokens=global_batch, seq=seq or spec.seq_len,
                    framework=frame, precision=precision, top=top, headroom=headroom, document=document)
    rows = [{**p.layout, "step_s": p.step_s, "tokens_per_s": p.tokens_per_s, "mfu": p.mfu,
             "memory_bytes": p.memory_bytes, "bubble_fraction": p.bubble, "exposed_comm_s": p.exposed_comm_s}
            for p in result.best]
    try:
        import pandas
    except ImportError:
        return rows
    return pandas.DataFrame(rows)


def solve_fsdp(model, limit, recipe: str = "cs336", **layout):
    """Smallest N_FSDP under ``limit`` (bytes, or a string such as '95GB')."""
    from costmodel.solve.fsdp import solve_fsdp as solve
    from costmodel.inputs.numbers import memory_limit

    limit_bytes = memory_limit(limit, "limit")
    return solve(_spec(model), load_recipe(recipe), _layout(**{"fsdp": 2, **layout}), limit_bytes)


def batch_problem(model, hardware, *, fsdp=1, tp=1, mx=1, my=1, overlap="sum", pass_="forward",
                  peak_flops=None, bandwidth=None):
    """The compute-bound question with every constant explicit (overrides as given)."""
    from costmodel.solve.problem import batch_problem as build

    return build(_spec(model), _device(hardware), fsdp=fsdp, tp=tp, mx=mx, my=my, overlap=overlap,
                 pass_=pass_, peak_flops=peak_flops, bandwidth=bandwidth)


def solve_batch(model, hardware, **question):
    """Smallest per-device and global batch with T_math >= T_comms (``per_device_batch`` infinite where the
    layout is never compute-bound; ``explain_batch`` refuses those)."""
    from costmodel.solve.batch import solve_batch as solve

    return solve(batch_problem(model, hardware, **question))


def optimize_split(model, hardware, torus=None, **question):
    """Continuous X_opt and, with ``torus`` (e.g. (4, 4, 4)), the best whole-axis split."""
    from costmodel.solve.split import check_slice, optimize_split as optimize

    problem = batch_problem(model, hardware, **question)
    if torus is not None:
        check_slice(problem, tuple(torus))
    return optimize(problem, torus)


def explain_batch(model, hardware, **question):
    """The derivation of solve_batch as a Derivation (prints as text, renders in Jupyter)."""
    from costmodel.solve.explain import batch_derivation

    from costmodel.solve.batch import require_compute_bound

    return batch_derivation(require_compute_bound(batch_problem(model, hardware, **question)), _device(hardware).name)


def explain_memory(model, recipe: str = "cs336", **layout):
    """The derivation of :func:`memory` (a Derivation)."""
    from costmodel.solve.explain import memory_derivation

    return memory_derivation(_spec(model), load_recipe(recipe), _layout(**layout))


def explain_fsdp(model, limit, recipe: str = "cs336", **layout):
    """The derivation of :func:`solve_fsdp` (a Derivation)."""
    from costmodel.solve.explain import fsdp_derivation

    answer = solve_fsdp(model, limit, recipe, **layout)
    lay = _layout(**{"fsdp": 2, **layout})
    return fsdp_derivation(_spec(model), load_recipe(recipe), lay, answer, f"the limit given ({limit})")


def what_if(model, hardware, torus=None, **question):
    """Question (d): ways to stay compute-bound at a smaller batch (rows with a stable ``key``)."""
    from costmodel.solve.whatif import what_if as rows

    device = _device(hardware)
    ici = device.level("ici") if device.kind == "tpu" else None
    dcn = next((lvl.bandwidth_bytes_per_s for lvl in device.network if lvl.kind == "dcn"), None)
    from costmodel.solve.split import check_slice

    problem = batch_problem(model, hardware, **question)
    if torus is not None:
        check_slice(problem, tuple(torus))
    return rows(problem, torus=torus, torus_axes=ici.torus_axes if ici else None, dcn_bandwidth=dcn)
