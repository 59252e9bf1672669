"""The parallel-layout options, declared once and added to any command by a decorator.

``@with_layout("tokens", "fsdp", ...)`` appends those options to the command's signature (typer
reads ``__signature__``) and hands the command a validated ``layout`` instead of loose values.
"""

from __future__ import annotations

import functools
import inspect
import typing

from costmodel.cli import options as o
from costmodel.errors import CostModelError
from costmodel.inputs.files import shown
from costmodel.inputs.placement import DEFAULT_PLACEMENT

#: option name -> (typer Annotated type, default)
OPTIONS = {
    "tokens": (o.TokensOpt, 0), "seq": (o.SeqOpt, None), "dp": (o.DpOpt, 1), "fsdp": (o.FsdpOpt, 1), "zero": (o.ZeroOpt, None),
    "tp": (o.TpOpt, 1), "sp": (o.SpOpt, False), "pp": (o.PpOpt, 1), "cp": (o.CpOpt, 1),
    "shard_activations": (o.ShardActOpt, 0.0), "reshard": (o.ReshardOpt, True), "mx": (o.MxOpt, 1),
    "my": (o.MyOpt, 1), "recompute": (o.RecomputeOpt, "none"), "flash": (o.FlashOpt, True),
    "schedule": (o.ScheduleOpt, "1f1b"), "microbatches": (o.MicroOpt, None), "chunks": (o.ChunksOpt, 1),
    "cp_kind": (o.CpKindOpt, None), "hsdp_group": (o.HsdpOpt, None), "grad_accum": (o.AccumOpt, 1),
    "tp_ends": (o.TpEndsOpt, "vocab-parallel"), "split": (o.SplitOpt, None),
    "tp_kv": (o.TpKvOpt, "split"), "attention": (o.AttentionOpt, None),
    "checkpoint": (o.CheckpointOpt, "reentrant"), "ep": (o.EpOpt, 1), "etp": (o.EtpOpt, None),
    "moe_imbalance": (o.ImbalanceOpt, 1.0), "placement": (o.PlacementOpt, DEFAULT_PLACEMENT),
    "document": (o.DocumentOpt, None),
}
MEMORY = ("tokens", "seq", "dp", "fsdp", "zero", "tp", "sp", "pp", "cp", "shard_activations", "reshard", "recompute",
          "flash", "schedule", "microbatches", "grad_accum", "chunks", "cp_kind", "hsdp_group", "tp_ends", "split", "tp_kv", "attention",
          "ep", "etp", "moe_imbalance")


def build_layout(fixed: dict | None = None, framework: str | None = None, **values):
    """A Layout from option values (``framework``: the command's --framework, whose own ZeRO stage --zero left open
    means); a validation error names the flag."""
    from pydantic import ValidationError

    from costmodel.specs.layout import Layout

    fields = dict(values, **(fixed or {}))
    if fields.get("zero", 0) is None:  # left open: the framework's own stage, else the layout's 3
        del fields["zero"]
        if framework:
            from costmodel.specs.load import framework_profile

            frame = framework_profile(framework)
            if frame is not None and frame.own_zero is not None:
                fields["zero"] = frame.own_zero
    if "reshard" in fields:
        fields["reshard_after_forward"] = fields.pop("reshard")
    if "hsdp_group" in fields:
        fields["dp"], fields["fsdp"] = _hsdp(fields.pop("hsdp_group"), fields.get("dp", 1), fields.get("fsdp", 1))
    attention = fields.pop("attention", None)
    if attention is not None:
        if attention not in ("flash", "math", "eager"):
            raise CostModelError(f"--attention {shown(attention)}: use flash, math or eager")
        fields.update(flash=attention == "flash", eager=attention == "eager")
    recompute = fields.get("recompute", "none")
    policies = typing.get_args(Layout.model_fields["recompute"].annotation)  # the layout's own field says which
    if recompute not in policies and not recompute.startswith("every:"):
        raise CostModelError(f"--recompute {shown(recompute)}: use "
                             f"{', '.join(p if p != 'every' else 'every:K (every K-th layer)' for p in policies)}")
    if recompute.startswith("every:"):
        from costmodel.inputs.bounds import LAYERS
        from costmodel.inputs.numbers import whole

        try:
            count = whole(1, LAYERS)(recompute.removeprefix("every:"))
        except ValueError as err:
            raise CostModelError(f"--recompute every:K: K {err}") from None
        fields.update(recompute="every", recompute_layers=count)
    try:
        return Layout(**fields)
    except ValidationError as err:
        first = err.errors()[0]
        if first["loc"]:
            name = str(first["loc"][0])
            flag = "--" + {"reshard_after_forward": "reshard"}.get(name, name).replace("_", "-")
            return _raise(f"{flag} {shown(fields.get(name))}: {first['msg']}")
        return _raise(first["msg"].removeprefix("Value error, "))


def _raise(message: str):
    raise CostModelError(message) from None


def _hsdp(group, dp, fsdp):
    """--hsdp-group G: shard within groups of G devices (fsdp = G); --dp keeps meaning replicas."""
    if group is None:
        return dp, fsdp
    if fsdp not in (1, group):
        raise CostModelError(f"--hsdp-group {group} sets the shard group; --fsdp {fsdp} says otherwise: give one")
    return dp, group


def extend(command, added: dict, into: str | None, build):
    """Append the options ``added`` (name -> (type, default)) to ``command``'s signature; call it with
    ``into=build(own, **their values)`` instead, ``own`` being the command's other arguments (with
    ``into`` None, only for what ``build`` does). Typer reads the new ``__signature__``."""
    signature = inspect.signature(command)
    hints = typing.get_type_hints(command, include_extras=True)  # resolve string annotations here
    own = [p.replace(annotation=hints.get(p.name, p.annotation))
           for p in signature.parameters.values() if p.name != into]
    extra = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=kind, default=default)
             for name, (kind, default) in added.items()]
    head = [p for p in own if p.kind != inspect.Parameter.KEYWORD_ONLY]
    tail = [p for p in own if p.kind == inspect.Parameter.KEYWORD_ONLY]

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        values = {name: kwargs.pop(name) for name in added}
        built = build(kwargs, **values)
        return command(*args, **kwargs) if into is None else command(*args, **kwargs, **{into: built})

    wrapper.__signature__ = signature.replace(parameters=head + extra + tail, return_annotation=hints.get("return"))
    wrapper.__annotations__ = {p.name: p.annotation for p in head + extra + tail}
    return wrapper


def no_tables(command):
    """Mark a command that prints no table (JSON, or one line): :func:`with_plain` gives it no --plain, which would
    change nothing."""
    command.prints_no_table = True
    return command


def with_plain(command):
    """Add --plain to a command (every command that prints tables; costmodel.cli adds it when it builds them)."""
    if "plain" in inspect.signature(command).parameters or getattr(command, "prints_no_table", False):
        return command

    def build(own, plain: bool) -> None:
        from costmodel.report.common import ask_plain

        ask_plain(plain)

    return extend(command, {"plain": (o.PlainOpt, False)}, None, build)


def with_layout(*names: str, fixed: dict | None = None, **defaults):
    """Add the layout options ``names`` to a command, which then receives ``layout=``."""
    added = {name: (OPTIONS[name][0], defaults.get(name, OPTIONS[name][1])) for name in names}
    return lambda command: extend(command, added, "layout", lambda own, **values: build_layout(
        fixed, own.get("framework"), **values))


#: the compute-bound question's options (solve batch, explain batch)
BATCH = {
    "hardware": (o.HardwareOpt, None), "fsdp": (o.FsdpXOpt, 1), "tp": (o.TpYOpt, 1), "mx": (o.MxOpt, 1),
    "my": (o.MyOpt, 1), "overlap": (o.OverlapOpt, "sum"), "pass_": (o.PassOpt, "forward"),
    "peak_flops": (o.PeakOpt, None), "ici_bandwidth": (o.IciOpt, None),
}


def build_question(own: dict, hardware, ici_bandwidth, **question):
    """(spec, device, BatchProblem) for solve/explain batch; every constant overridable."""
    from costmodel.solve.problem import batch_problem
    from costmodel.specs.load import load_hardware, load_model

    if hardware is None:
        raise CostModelError("give --hardware (its constants can be overridden with --peak-flops, --ici-bandwidth)")
    spec, device = load_model(own["model"]), load_hardware(hardware)
    return spec, device, batch_problem(spec, device, bandwidth=ici_bandwidth, **question)


def with_batch_question(command):
    """Add the compute-bound question's options; the command receives ``question=(spec, device, problem)``."""
    return extend(command, BATCH, "question", build_question)
