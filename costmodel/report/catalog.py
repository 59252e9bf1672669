"""`cost4d models` and `cost4d hardware`: the catalogs as tables or JSON."""

from __future__ import annotations

from costmodel.report.common import console, emit_json, table
from costmodel.report.tables import literal


def models(as_json: bool) -> None:
    from costmodel.specs.catalog import BUILTIN_MODELS
    from costmodel.specs.load import load_model
    from costmodel.cost.shape import Shape

    rows = []
    for name in BUILTIN_MODELS:
        spec = load_model(name)
        shape = Shape.of(spec)
        parts = shape.param_parts()
        rows.append({"name": name, "kind": spec.kind, "params": sum(parts.values()),
                     "active_params": shape.active_params(), "parts": parts, "spec": spec.model_dump()})
    if as_json:
        emit_json({"models": rows})
        return
    t = table("Built-in models (active: parameters one token uses)", "name", "kind", ">params", ">active", "shape",
              "source")
    for row in rows:
        s = row["spec"]
        shape = (f"D={s['d_model']} F={s['d_ff']} L={s['layers']}" if s["kind"] == "ffn" else
                 f"D={s['hidden']} F={s['ffn_hidden']} L={s['layers']} heads={s['heads']}/{s['kv_heads']} V={s['vocab']}")
        if s.get("moe"):
            moe = s["moe"]
            shape += f" MoE E={moe['experts']} k={moe['top_k']} F_e={moe['expert_ffn_hidden']}" + (
                f" F_s={moe['shared_ffn_hidden']}" if moe["shared_ffn_hidden"] else "") + (
                f" dense={moe['dense_layers']}" if moe["dense_layers"] else "")
        if s.get("mla"):
            shape += " MLA"
        t.add_row(row["name"], row["kind"], f"{row['params']:,}", f"{row['active_params']:,}", shape, literal(s["source"]))
    console().print(t)


def hardware(as_json: bool) -> None:
    from costmodel.specs.load import hardware_names, load_hardware

    specs = [load_hardware(name) for name in hardware_names()]
    if as_json:
        emit_json({"hardware": [s.model_dump() for s in specs]})
        return
    t = table("Shipped hardware (dense peak; network bandwidth per device; what `step` models on it)", "name",
              "kind", ">bf16 TFLOP/s", ">HBM GiB", ">HBM TB/s", "network", "step model")
    for s in specs:
        levels = "; ".join(
            f"{lvl.name} {lvl.bandwidth_bytes_per_s / 1e9:g} GB/s"
            + (f" x{lvl.domain_size}" if lvl.domain_size else "")
            + (" (per axis, bidir)" if lvl.kind == "ici" else "")
            for lvl in s.network)
        t.add_row(s.name, s.kind, f"{s.peak_flops.bf16 / 1e12:,.1f}", f"{s.hbm.capacity_bytes / 2**30:,.1f}",
                  f"{s.hbm.bandwidth_bytes_per_s / 1e12:.2f}", levels, ", ".join(features(s)))
    console().print(t)


def features(spec) -> list[str]:
    """What the device's step and collective models have: a measured GEMM table or one efficiency (along a
    shape curve where it has one), a
    flash-attention table, fp8, NCCL's tuner, a fitted error range."""
    sm = spec.step_model
    if sm is None:
        return ["none"]
    curve = " + shape curve" if sm.matmul_overhead_s is not None else ""
    out = ["GEMM table" if sm.matmul_table else f"GEMM {sm.matmul_efficiency:.0%}{curve}"]
    out += ["attention table"] if sm.attention_table else []
    out += ["fp8"] if sm.fp8_efficiency is not None and getattr(spec.peak_flops, "fp8", None) else []
    out += ["NCCL tuner"] if spec.nccl is not None else []
    out += (["borrowed range"] if sm.fraction_range is not None else
            ["fitted range"] if sm.error_low is not None else [])
    return out


def recipes(as_json: bool) -> None:
    from costmodel.specs.recipe import RECIPES

    if as_json:  # each spec as a recipe file holds it (save it, edit it, pass it back with --recipe FILE)
        emit_json({"recipes": [{"name": r.name, "state_bytes_per_param": r.state_bytes_per_param,
                                "spec": r.model_dump(mode="json")} for r in RECIPES.values()]})
        return
    rows = [{**r.model_dump(), "state_bytes_per_param": r.state_bytes_per_param} for r in RECIPES.values()]
    t = table("Precision recipes (--recipe)", "name", ">B/param", "description", "source")
    for r in rows:
        t.add_row(r["name"], str(r["state_bytes_per_param"]), literal(r["description"]), literal(r["source"]))
    console().print(t)


def frameworks(as_json: bool) -> None:
    from costmodel.cost.runs import recompute_flags
    from costmodel.specs.framework_catalog import FRAMEWORKS

    if as_json:  # each spec as a profile file holds it (save it, edit it, pass it back with --framework FILE)
        emit_json({"frameworks": [{"name": f.name, "outside_allocator_bytes": f.outside_allocator_bytes,
                                   "spec": f.model_dump(mode="json")} for f in FRAMEWORKS.values()]})
        return
    rows = [f.model_dump() for f in FRAMEWORKS.values()]
    t = table("Framework profiles (--framework)", "name", "recipe", "split", "terms", "fitted", "source")
    terms = ("ddp_buckets", "zero1_gather", "zero_buffers", "sp_gather_buffer", "pending_reduce_scatters", "wgrad_cache",
             "fsdp_buffers", "p2p_buffers")
    for f in rows:
        named = [k for k in terms if f[k]]
        named += [f"loss_upcast ({f['loss_upcast']})"] if f["loss_upcast"] != "none" else []
        named += ["foreach optimizer"] if f["optimizer_step"] == "foreach" else []
        named += ["eager kernels"] if f["kernels"] == "eager" else []
        named += [f"gradients reduced in {f['reduce_dtype']}"] if f["reduce_dtype"] else []
        named += [f"ZeRO-1 {f['zero1_reduce']}"] if f["zero1_reduce"] != "reduce-scatter" else []
        named += [f"ZeRO stages {'/'.join(map(str, f['zero_stages']))}"] if f["zero_stages"] else []
        named += [f"pipelines {'/'.join(f['schedules'])}"] if f["schedules"] else []
        named += [f"recompute {recompute_flags(f['recompute_modes']).replace('|', '/')}"] if f["recompute_modes"] else []
        named += [f"--checkpoint {'/'.join(f['checkpoints'])}"] if f["checkpoints"] else []
        named += ["shards over data x CP"] if f["cp_in_data"] else []
        named += [f"CP {'/'.join(f['cp_kinds'])}"] if f["cp_kinds"] else []
        fitted = (f"memory: a = {f['activation_factor']:g}, r = {f['reserve_bytes'] / 2**30:.2f} GiB"
                  if f["fitted_on"] else "-")
        if f["time"]:
            ft = f["time"]
            fitted += (f"; time: kernels x{ft['kernel_factor']:g}, floor {ft['layer_floor_s'] * 1e3:.2f} ms/layer "
                       f"(+{ft['pipeline_tp_rank_s'] * 1e3:.2f} ms per TP rank, pipeline across nodes), data "
                       f"x{ft['data_factor']:g} unoverlapped")
        t.add_row(f["name"], f["recipe"] or "-", f["split"], ", ".join(named) or "-", fitted,
                  literal((f["source"] + ("; fitted on " + f["fitted_on"] if f["fitted_on"] else "")) or f["description"]))
    console().print(t)


def _toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'


def template(spec, header: str, first: str = "", prefix: str = "") -> str:
    """A commented TOML file of ``spec``'s fields (a flat pydantic spec): each field's description as a
    comment, the example's value as the value; unset optional fields commented out; a nested spec as its table
    and a list of them as an array of tables (``prefix``: the dotted name of the table being written)."""
    lines = [f"# {line}" for line in header.splitlines()] + [""] + ([first] if first else [])
    tables = []
    for name, info in type(spec).model_fields.items():
        value = getattr(spec, name)
        note = f"  # {info.description}" if info.description else ""
        if value is None:
            lines.append(f"# {name} = ...{note}")
        elif isinstance(value, (bool, int, float, str)):
            lines.append(f"{name} = {_toml_value(value)}{note}")
        elif isinstance(value, list) and all(isinstance(v, (bool, int, float, str)) for v in value):
            lines.append(f"{name} = [{', '.join(_toml_value(v) for v in value)}]{note}")
        elif hasattr(value, "model_fields"):  # a nested spec: its own table after the flat fields
            tables.append(f"\n[{prefix}{name}]{note}\n"
                          + template(value, "", prefix=f"{prefix}{name}.").lstrip("\n").removeprefix("# \n"))
        elif isinstance(value, list) and all(hasattr(v, "model_fields") for v in value):  # an array of tables
            tables.extend(f"\n[[{prefix}{name}]]{note if i == 0 else ''}\n"
                          + template(v, "", prefix=f"{prefix}{name}.").lstrip("\n").removeprefix("# \n")
                          for i, v in enumerate(value))
    return "\n".join(lines) + "\n" + "".join(tables)


def print_template(kind: str) -> None:
    """`--template`: a file to copy, edit and pass where a name goes (--model FILE, --recipe FILE, ...)."""
    import sys

    if kind == "hardware":
        from costmodel.specs.load import _hardware_path

        sys.stdout.write("# A hardware spec: the shipped h100-sxm.toml. Copy it, edit it, pass --hardware FILE;\n"
                         '# or keep only what differs: extends = "h100-sxm" and the sections you change.\n\n'
                         + _hardware_path("h100-sxm").read_text())
        return
    first = ""
    if kind == "model":
        from costmodel.specs.load import load_model

        spec = load_model("llama3-8b")
        what = ('A model spec (here Llama 3 8B); pass --model FILE. kind = "ffn" is the CS336 stack instead:\n'
                "name, d_model, d_ff, layers (see `cost4d models --json` for every built-in spec).")
    elif kind == "recipe":
        from costmodel.specs.recipe import RECIPES

        spec, what = RECIPES["megatron"], "A precision recipe (here megatron's); pass --recipe FILE."
    else:
        from costmodel.specs.framework_catalog import FRAMEWORKS

        spec, what = FRAMEWORKS["nanotron"], "A framework profile (here nanotron's); pass --framework FILE."
    sys.stdout.write(template(spec, what, first))
