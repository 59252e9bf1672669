"""The library in a few calls, for notebooks and scripts (the CLI uses the same pieces).

    from costmodel import api
    api.memory("xxl", fsdp=38, tokens=4096, shard_activations=0.5).total_bytes   # .state_bytes, .components
    api.memory("nanotron-1b", framework="nanotron", fsdp=8, zero=1, tokens=4096).reserved_bytes
    api.solve_fsdp("xxl", limit="95GB").n_fsdp                      # 38
    api.solve_batch("xxl", "tpu-v5p", fsdp=16, tp=4, mx=2, peak_flops=4.6e14, bandwidth=1.8e11)
    api.explain_batch(...)                                           # renders itself in Jupyter

Bad arguments are one CostModelError naming the parameter, under the CLI's rules for the same option (an
argument a function does not take, too: with the closest it does).
"""

from __future__ import annotations


from costmodel.errors import CostModelError
from costmodel.inputs import arguments as arg
from costmodel.inputs.files import shown
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


def _device(hardware, required: bool = False):
    """A device: a shipped name, a spec file, a Hardware spec, or None where not ``required``."""
    from costmodel.specs.hardware import Hardware

    if hardware is None and required:
        raise CostModelError("hardware = None: this question needs a device: give a device name (see `cost4d "
                             "hardware`), a spec file or a Hardware spec")
    if hardware is None or isinstance(hardware, Hardware):
        return hardware
    if isinstance(hardware, str):
        return load_hardware(hardware)
    raise CostModelError(f"hardware: give a device name, a spec file or a Hardware spec (got {type(hardware).__name__})")


def _framework(framework):
    """A framework profile: a name, a profile file, a Framework spec; None (or 'exact') for the exact accounting."""
    from costmodel.specs.framework import Framework

    if framework is not None and not isinstance(framework, (str, Framework)):
        raise CostModelError(f"framework = {shown(framework)}: give a framework name (see `cost4d frameworks`), a "
                             "profile file or a Framework spec")
    return framework_profile(framework)


def _recipe(recipe, frame=None):
    """A recipe: a name, a spec file or a Recipe spec; None for the framework's, else cs336."""
    from costmodel.specs.recipe import Recipe

    if isinstance(recipe, Recipe):
        return recipe
    if recipe is None:
        return load_recipe((frame.recipe if frame is not None else None) or "cs336")
    if not isinstance(recipe, str):
        raise CostModelError(f"recipe = {shown(recipe)}: give a recipe name (cs336, fsdp2, zero, megatron, "
                             "scaling-book), a spec file or a Recipe spec")
    return load_recipe(recipe)


def _layout(**fields) -> Layout:
    """A validated Layout; a bad field is one CostModelError naming it, as the CLI names its flag."""
    from costmodel.specs.load import validate

    return validate(Layout, fields, "layout")


#: the keyword arguments a layout function takes beside its own: the Layout fields (fsdp=, tokens=, ...)
LAYOUT_FIELDS = tuple(Layout.model_fields)
#: the compute-bound question's keyword arguments (:func:`batch_problem`'s)
QUESTION = ("fsdp", "tp", "mx", "my", "overlap", "pass_", "peak_flops", "bandwidth")


@arg.checked_names(*LAYOUT_FIELDS)
def memory(model, recipe: str | None = None, framework=None, **layout):
    """Per-device memory of the heaviest stage (``layout``: the Layout fields, e.g. fsdp=38, tokens=4096):
    ``.total_bytes`` (exact accounting), ``.components``, ``.state_bytes``, ``.stage``; with a
    ``framework`` ('nanotron'), ``.overheads``, ``.peak_bytes``, ``.reserved_bytes``, ``.peak_phase``."""
    from costmodel.cost.evaluate import evaluate_layout

    frame = _framework(framework)
    return evaluate_layout(_spec(model), _recipe(recipe, frame), _layout(**layout), framework=frame).heaviest


@arg.checked_names(*LAYOUT_FIELDS)
def cost(model, recipe: str | None = None, hardware=None, framework=None, precision: str = "bf16", **layout):
    """Everything for one layout: ``.memory_bytes``, ``.flops``, ``.collectives``, ``.step`` and ``.step_range``
    (seconds, low and high, as `cost4d step` prints them; with a hardware), under a ``framework`` profile's
    overheads and time ('megatron'; recipe None: its recipe, else cs336) and a ``precision`` ('bf16', 'fp8')."""
    from costmodel.cost.evaluate import evaluate_layout
    from costmodel.cost.step import PRECISIONS

    precision = arg.choice("precision", precision, PRECISIONS)
    device, frame = _device(hardware), _framework(framework)
    if precision != "bf16" and device is None:
        raise CostModelError(f"precision = {precision!r} prices the step's matmuls: give hardware= (without one there "
                             "is no step, and memory does not depend on it)")
    return evaluate_layout(_spec(model), _recipe(recipe, frame), _layout(**layout), device, framework=frame,
                           precision=precision)


@arg.checked_names(*LAYOUT_FIELDS)
def formula(model, recipe: str = "cs336", hardware=None, **layout):
    """The same, in letters: ``.cost`` holds expressions, ``.at(expr)`` evaluates one at the layout."""
    from costmodel.cost.symbolic import formula as build

    device = _device(hardware)
    return build(_spec(model), _recipe(recipe), _layout(**layout), device)


@arg.checked_names()
def plan(model, hardware, *, gpus: int, global_batch: int, seq: int | None = None, recipe: str | None = None,
         framework=None, precision: str = "bf16", top: int = 5, headroom: float = 0.0, document: int | None = None,
         split: str | None = None):
    """The ``top`` layouts by predicted tokens/s: a list of dict rows (a pandas DataFrame if pandas is
    installed), each with the layout's fields, step_s, tokens_per_s, mfu, memory_bytes, bubble_fraction,
    exposed_comm_s; empty where no layout fits. The numbers as `cost4d plan` takes them: ``gpus`` from 1,
    ``global_batch`` tokens a whole number of ``seq`` (default the model's) sequences, ``top`` 1 or more (every
    feasible layout if asked; the CLI prints at most 1,000), ``headroom`` 0 to 0.9, ``document`` 1 to ``seq``,
    ``split`` how stages take the layers ('even', 'ends', 'compute'; None: the framework's)."""
    from costmodel.cost.step import PRECISIONS
    from costmodel.solve.plan import plan as search
    from costmodel.specs import SPLITS

    gpus = arg.whole_number("gpus", gpus, *arg.GPUS)
    global_batch = arg.whole_number("global_batch", global_batch, *arg.GLOBAL_BATCH)
    seq = None if seq is None else arg.whole_number("seq", seq, *arg.SEQ)
    top = arg.whole_number("top", top, *arg.TOP_RETURNED)
    headroom = arg.real_number("headroom", headroom, *arg.HEADROOM)
    precision = arg.choice("precision", precision, PRECISIONS)
    split = None if split is None else arg.choice("split", split, SPLITS)
    spec, frame = _spec(model), _framework(framework)
    device = _device(hardware, required=True)
    rec = _recipe(recipe, frame)
    seq = seq or getattr(spec, "seq_len", None)
    if seq is None:
        raise CostModelError(f"{spec.name} has no sequence length: give seq=")
    if global_batch % seq:
        raise CostModelError(f"global_batch = {global_batch:,} is not a whole number of seq = {seq:,} sequences")
    document = None if document is None else arg.whole_number("document", document, 1, seq)  # at most a sequence
    result = search(spec, rec, device, devices=gpus, global_tokens=global_batch, seq=seq,
                    framework=frame, precision=precision, top=top, headroom=headroom, document=document, split=split)
    rows = [{**p.layout, "step_s": p.step_s, "tokens_per_s": p.tokens_per_s, "mfu": p.mfu,
             "memory_bytes": p.memory_bytes, "bubble_fraction": p.bubble, "exposed_comm_s": p.exposed_comm_s}
            for p in result.best]
    try:
        import pandas
    except ImportError:
        return rows
    return pandas.DataFrame(rows)


@arg.checked_names(*LAYOUT_FIELDS)
def solve_fsdp(model, limit, recipe: str | None = None, framework=None, **layout):
    """Smallest N_FSDP under ``limit`` (bytes, or a string such as '95GB'); with a ``framework`` profile its
    reserved peak and what it holds outside the allocator must fit (bisection), as `solve fsdp --framework` says."""
    from costmodel.cost.runs import framework_zero
    from costmodel.solve.fsdp import solve_fsdp as solve
    from costmodel.inputs.numbers import memory_limit

    limit_bytes = memory_limit(limit, "limit")
    frame = _framework(framework)
    return solve(_spec(model), _recipe(recipe, frame), framework_zero(_layout(**{"fsdp": 2, **layout}), frame),
                 limit_bytes, frame)


@arg.checked_names()
def batch_problem(model, hardware, *, fsdp=1, tp=1, mx=1, my=1, overlap="sum", pass_="forward",
                  peak_flops=None, bandwidth=None):
    """The compute-bound question with every constant explicit (overrides as given): ``fsdp`` (X) and ``tp``
    (Y) devices, ``mx`` and ``my`` torus axes (1 to 8), ``overlap`` 'sum' or 'max', ``pass_`` 'forward' or
    'step', ``peak_flops`` (C, FLOP/s) and ``bandwidth`` (W, B/s) the device's unless given."""
    from costmodel.inputs import bounds
    from costmodel.solve.problem import OVERLAPS, PASSES, batch_problem as build

    question = dict(fsdp=arg.whole_number("fsdp", fsdp, *arg.DEGREE), tp=arg.whole_number("tp", tp, *arg.DEGREE),
                    mx=arg.whole_number("mx", mx, *arg.TORUS_AXES), my=arg.whole_number("my", my, *arg.TORUS_AXES),
                    overlap=arg.choice("overlap", overlap, OVERLAPS), pass_=arg.choice("pass_", pass_, PASSES),
                    peak_flops=None if peak_flops is None else arg.real_number("peak_flops", peak_flops, *bounds.FLOPS),
                    bandwidth=None if bandwidth is None else arg.real_number("bandwidth", bandwidth, *bounds.BANDWIDTH))
    return build(_spec(model), _device(hardware, required=True), **question)


@arg.checked_names(*QUESTION)
def solve_batch(model, hardware, **question):
    """Smallest per-device and global batch with T_math >= T_comms (``per_device_batch`` infinite where the
    layout is never compute-bound; ``explain_batch`` refuses those)."""
    from costmodel.solve.batch import solve_batch as solve

    return solve(batch_problem(model, hardware, **question))


def _torus(device, torus, problem):
    """``torus`` (a TPU slice, (4, 4, 4) or '4x4x4') checked against the device, or None (solve.split.check_slice
    checks it against the question)."""
    if torus is None:
        return None
    ici = device.level("ici") if device.kind == "tpu" else None
    if ici is None:
        raise CostModelError(f"torus maps the split onto a TPU torus; {device.name} is a {device.kind_name}")
    from costmodel.solve.split import MAX_AXES

    return arg.torus_shape("torus", torus, ici.torus_axes or MAX_AXES)


@arg.checked_names(*QUESTION)
def optimize_split(model, hardware, torus=None, **question):
    """Continuous X_opt and, with ``torus`` (a TPU slice of fsdp x tp chips: (4, 4, 4), or the CLI's '4x4x4'),
    the best whole-axis split."""
    from costmodel.solve.split import API_NAMES, check_slice, optimize_split as optimize

    problem = batch_problem(model, hardware, **question)
    shape = _torus(_device(hardware), torus, problem)  # a torus on a GPU is refused first, as the CLI's --slice is
    if shape is not None:
        check_slice(problem, shape, API_NAMES)
    return optimize(problem, shape, API_NAMES)


@arg.checked_names(*QUESTION)
def explain_batch(model, hardware, **question):
    """The derivation of solve_batch as a Derivation (prints as text, renders in Jupyter)."""
    from costmodel.solve.explain import batch_derivation

    from costmodel.solve.batch import require_compute_bound

    return batch_derivation(require_compute_bound(batch_problem(model, hardware, **question)), _device(hardware).name)


@arg.checked_names(*LAYOUT_FIELDS)
def explain_memory(model, recipe: str = "cs336", **layout):
    """The derivation of :func:`memory` (a Derivation)."""
    from costmodel.solve.explain import memory_derivation

    return memory_derivation(_spec(model), _recipe(recipe), _layout(**layout))


@arg.checked_names(*LAYOUT_FIELDS)
def explain_fsdp(model, limit, recipe: str = "cs336", **layout):
    """The derivation of :func:`solve_fsdp` (a Derivation)."""
    from costmodel.solve.explain import fsdp_derivation

    answer = solve_fsdp(model, limit, recipe, **layout)
    lay = _layout(**{"fsdp": 2, **layout})
    return fsdp_derivation(_spec(model), _recipe(recipe), lay, answer, f"the limit given ({limit})")


@arg.checked_names(*QUESTION)
def what_if(model, hardware, torus=None, **question):
    """Question (d): ways to stay compute-bound at a smaller batch (rows with a stable ``key``); ``torus`` as
    in :func:`optimize_split`."""
    from costmodel.solve.split import API_NAMES, check_slice
    from costmodel.solve.whatif import what_if as rows

    problem = batch_problem(model, hardware, **question)
    device = _device(hardware)
    ici = device.level("ici") if device.kind == "tpu" else None
    dcn = next((lvl.bandwidth_bytes_per_s for lvl in device.network if lvl.kind == "dcn"), None)
    shape = _torus(device, torus, problem)
    if shape is not None:
        check_slice(problem, shape, API_NAMES)
    return rows(problem, torus=shape, torus_axes=ici.torus_axes if ici else None, dcn_bandwidth=dcn)
