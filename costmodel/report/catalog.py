"""`cost4d models` and `cost4d hardware`: the catalogs as tables or JSON."""

from __future__ import annotations

from costmodel.report.common import console, emit_json, table


def models(as_json: bool) -> None:
    from costmodel.specs.catalog import BUILTIN_MODELS
    from costmodel.specs.load import load_model
    from costmodel.cost.shape import Shape

    rows = []
    for name in BUILTIN_MODELS:
        spec = load_model(name)
        parts = Shape.of(spec).param_parts()
        rows.append({"name": name, "kind": spec.kind, "params": sum(parts.values()), "parts": parts,
                     "spec": spec.model_dump()})
    if as_json:
        emit_json({"models": rows})
        return
    t = table("Built-in models", "name", "kind", ">params", "shape", "source")
    for row in rows:
        s = row["spec"]
        shape = (f"D={s['d_model']} F={s['d_ff']} L={s['layers']}" if s["kind"] == "ffn" else
                 f"D={s['hidden']} F={s['ffn_hidden']} L={s['layers']} heads={s['heads']}/{s['kv_heads']} V={s['vocab']}")
        t.add_row(row["name"], row["kind"], f"{row['params']:,}", shape, s["source"])
    console().print(t)


def hardware(as_json: bool) -> None:
    from costmodel.specs.load import hardware_names, load_hardware

    specs = [load_hardware(name) for name in hardware_names()]
    if as_json:
        emit_json({"hardware": [s.model_dump() for s in specs]})
        return
    t = table("Shipped hardware (dense peak; network bandwidth per device)", "name", "kind",
              ">bf16 TFLOP/s", ">HBM GiB", ">HBM TB/s", "network")
    for s in specs:
        levels = "; ".join(
            f"{lvl.name} {lvl.bandwidth_bytes_per_s / 1e9:g} GB/s"
            + (f" x{lvl.domain_size}" if lvl.domain_size else "")
            + (" (per axis, bidir)" if lvl.kind == "ici" else "")
            for lvl in s.network)
        t.add_row(s.name, s.kind, f"{s.peak_flops.bf16 / 1e12:,.1f}", f"{s.hbm.capacity_bytes / 2**30:,.1f}",
                  f"{s.hbm.bandwidth_bytes_per_s / 1e12:.2f}", levels)
    console().print(t)


def recipes(as_json: bool) -> None:
    from costmodel.specs.recipe import RECIPES

    rows = [{**r.model_dump(), "state_bytes_per_param": r.state_bytes_per_param} for r in RECIPES.values()]
    if as_json:
        emit_json({"recipes": rows})
        return
    t = table("Precision recipes (--recipe)", "name", ">B/param", "description", "source")
    for r in rows:
        t.add_row(r["name"], str(r["state_bytes_per_param"]), r["description"], r["source"])
    console().print(t)


def frameworks(as_json: bool) -> None:
    from costmodel.specs.framework import FRAMEWORKS

    rows = [{**f.model_dump(), "outside_allocator_bytes": f.outside_allocator_bytes} for f in FRAMEWORKS.values()]
    if as_json:
        emit_json({"frameworks": rows})
        return
    t = table("Framework profiles (--framework)", "name", "recipe", "split", "terms", "fitted", "source")
    terms = ("ddp_buckets", "zero1_gather", "sp_gather_buffer", "wgrad_cache", "fsdp_buffers", "p2p_buffers")
    for f in rows:
        named = [k for k in terms if f[k]] + ([f"loss_upcast ({f['loss_upcast']})"] if f["loss_upcast"] != "none" else []) + (["foreach optimizer"] if f["optimizer_step"] == "foreach" else [])
        fitted = (f"a = {f['activation_factor']:g}, r = {f['reserve_bytes'] / 2**30:.2f} GiB"
                  if f["fitted_on"] else "-")
        t.add_row(f["name"], f["recipe"] or "-", f["split"], ", ".join(named) or "-", fitted,
                  (f["source"] + ("; fitted on " + f["fitted_on"] if f["fitted_on"] else "")) or f["description"])
    console().print(t)
