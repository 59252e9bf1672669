"""Side by side with Calculon's layout search (issue 12): same model, system, GPUs and batch.

    python benchmarks/calculon_side_by_side.py                         # cost4d's side only
    python benchmarks/calculon_side_by_side.py --calculon /tmp/calculon [--calculon-space no-offload]
    CALCULON=/tmp/calculon CALCULON_PYTHON=/tmp/calcvenv/bin/python python benchmarks/calculon_side_by_side.py
    python benchmarks/calculon_side_by_side.py --case 530b --calculon /tmp/calculon   # Calculon's README example

Cases: 1t (default): Megatron-1T (benchmarks/megatron_1t.toml = Calculon's models/megatron-1T.json) on 3,072
A100 80GB, 3,072 sequences of 2,048 tokens (Calculon's examples/3072_t4_p64_d12_mbs4_full.json; Narayanan et
al. 2021 Table 1). 530b: its README's `llm-optimal-execution models/turing-530B.json 5128 2520` (Calculon
picks the batch per layout, the largest multiple of DP up to 2,520; cost4d's batch is fixed at the 1,923 of
Calculon's winner).

cost4d's side always runs: `cost4d plan` with the Megatron profile (ZeRO-1, Calculon's kind of space) and
with the exact accounting (adds ZeRO-3/FSDP), each timed as a command line. Calculon's side runs when a
checkout of github.com/calculon-ai/calculon is given (--calculon or $CALCULON; its Python, $CALCULON_PYTHON
or this interpreter, needs psutil): `llm-optimal-execution ... -m` (as its README runs it) on
systems/a100_80g.json as shipped (--calculon-space published: with its 512 GiB host-memory offload tier,
hours for 1t on 2 cores) or without that tier (no-offload, 1t's default: cost4d models no offload) or also
without TP/DP overlap (no-offload-no-overlap). Then each tool prices the other's best layout (for Calculon,
down cost4d's list to the first layout it accepts: no CP, no ZeRO-3, fits its memory), which separates search
space from prediction, and for 1t both price the measured Megatron-1T run of Korthikanti et al. 2022 Table 5.
Without a checkout it prints what Calculon's side would need.

Rates: Calculon reports samples (sequences) per second, cost4d tokens per second. MFU for both is cost4d's
model FLOPs per token (matmuls incl. the output layer and full s x s attention) x tokens/s / (GPUs x 312
TFLOP/s); Calculon's own `total_efficiency` (its blocks' FLOPs only) is shown beside it.
The measured results, machine and discussion: benchmarks/calculon_side_by_side.md.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SEQ = 2048
HARDWARE = "a100-80gb"
PEAK = 312e12  # A100 dense bf16/fp16 (both tools' figure)
CALCULON_SYSTEM = "systems/a100_80g.json"
CALCULON_COMMIT = "caa4b11f8fe1fee3ba57adaacb7590d7deabd053"  # the commit the .md's runs used
#: name: (cost4d model file, Calculon model file, GPUs, Calculon's maximum batch, cost4d's batch, default space)
CASES = {
    "1t": ("benchmarks/megatron_1t.toml", "models/megatron-1T.json", 3072, 3072, 3072, "no-offload"),
    "530b": ("benchmarks/turing_530b.toml", "models/turing-530B.json", 5128, 2520, 1923, "published"),
}
SPACES = {  # name: (drop the offload tier, extra llm-optimal-execution flags)
    "published": (False, []),
    "no-offload": (True, []),
    "no-offload-no-overlap": (True, ["--no-tp-overlap", "--no-dp-overlap"]),
}
RECOMPUTE_TO_CALCULON = {"none": "none", "selective": "attn_only", "full": "full"}
RECOMPUTE_FROM_CALCULON = {v: k for k, v in RECOMPUTE_TO_CALCULON.items()}


def cost4d_cmd() -> list[str]:
    exe = shutil.which("cost4d")
    return [exe] if exe else [sys.executable, "-m", "costmodel"]


def run_json(args: list[str]) -> dict:
    proc = subprocess.run(cost4d_cmd() + args + ["--json"], capture_output=True, text=True)
    if proc.returncode:
        raise RuntimeError("cost4d " + " ".join(args) + ": " + proc.stderr.strip()[-500:])
    return json.loads(proc.stdout)


# ---------------------------------------------------------------- cost4d


def cost4d_plan(model: str, gpus: int, batch: int, framework: str, recipe: str | None, top: int) -> dict:
    args = ["plan", "--model", model, "--hardware", HARDWARE, "--gpus", str(gpus), "--global-batch",
            str(batch * SEQ), "--seq", str(SEQ), "--framework", framework, "--top", str(top)]
    if recipe:
        args += ["--recipe", recipe]
    start = time.perf_counter()
    try:
        result = run_json(args)
    except RuntimeError as error:  # no layout fits: the message says how many were rejected and why
        result = {"layouts": [], "error": str(error).split(": error: ")[-1], "seconds": None,
                  "considered": int(sum(int(n.replace(",", "")) for n in re.findall(r"([\d,]+) rejected", str(error)))),
                  "feasible": 0}
    result["wall_s"] = time.perf_counter() - start
    result["command"] = "cost4d " + " ".join(args + ["--json"])
    return result


def cost4d_layout_str(lay: dict) -> str:
    parts = [f"tp{lay['tp']}{'+sp' if lay['sp'] else ''}", f"pp{lay['pp']}", f"dp{lay['dp'] * lay['fsdp']}"]
    if lay["cp"] > 1:
        parts.append(f"cp{lay['cp']} ({lay['cp_kind']})")
    parts.append(f"ZeRO-{lay['zero']}" + (f" over {lay['fsdp']}" if lay["fsdp"] > 1 else " (no shards)"))
    parts.append(f"mbs{lay['tokens'] // SEQ}")
    if lay["pp"] > 1:
        sched = f"interleaved x{lay['chunks']}" if lay["schedule"] == "interleaved" else lay["schedule"]
        parts.append(f"{sched}, {lay['microbatches']} micro-batches")
    else:
        parts.append(f"grad-accum {lay['grad_accum']}")
    parts.append(f"recompute {lay['recompute']}")
    return ", ".join(parts)


def cost4d_on_calculon(model: str, exe: dict) -> dict:
    """cost4d's step time and memory for Calculon's layout (flash attention, as plan assumes)."""
    tp, pp, dp, mbs = exe["tensor_par"], exe["pipeline_par"], exe["data_par"], exe["microbatch_size"]
    steps = exe["batch_size"] // (dp * mbs)
    layout = ["--model", model, "--hardware", HARDWARE, "--recipe", "megatron", "--framework", "megatron",
              "--tp", str(tp), "--pp", str(pp), "--tokens", str(mbs * SEQ),
              "--recompute", RECOMPUTE_FROM_CALCULON[exe["activation_recompute"]]]
    layout += ["--fsdp", str(dp), "--zero", "1"] if exe["optimizer_sharding"] and dp > 1 else ["--dp", str(dp)]
    if tp > 1 and exe["tensor_par_comm_type"] != "ar":
        layout.append("--sp")
    if pp > 1:
        layout += ["--microbatches", str(steps)]
        if exe["pipeline_interleaving"] > 1:
            layout += ["--schedule", "interleaved", "--chunks", str(exe["pipeline_interleaving"])]
    else:
        layout += ["--grad-accum", str(steps)]
    timing = (["--tp-overlap", "overlap"] if exe["tensor_par_overlap"] != "none" else []) + \
             (["--data-overlap", "none"] if not exe["data_par_overlap"] else [])
    out = {"command": "cost4d step " + " ".join(layout + timing)}
    try:
        step = run_json(["step"] + layout + timing)
        memory = run_json(["memory"] + [a for i, a in enumerate(layout)  # memory takes no --grad-accum
                                        if "--grad-accum" not in (a, layout[i - 1])])
    except RuntimeError as error:
        return dict(out, error=str(error))
    out.update(step_s=step["step_s"], tokens_per_s=step["tokens_per_s"], mfu=step["mfu"],
               needed_bytes=memory["fits"]["needed_bytes"], fits=memory["fits"]["fits"],
               components=memory["components"])
    if timing:  # and as cost4d's plan prices it (TP on the critical path, data-axis traffic overlapped)
        out["plan_rules_step_s"] = run_json(["step"] + layout)["step_s"]
    return out


# ---------------------------------------------------------------- Calculon


def calculon_python() -> str:
    return os.environ.get("CALCULON_PYTHON", sys.executable)


def calculon_missing(root: Path | None, model: str) -> str | None:
    """None when Calculon can run, else what it needs."""
    if root is None:
        return (f"no Calculon checkout given. It needs: git clone https://github.com/calculon-ai/calculon (the .md's "
                f"runs used {CALCULON_COMMIT[:8]}), a Python with psutil (pip install psutil; CALCULON_PYTHON=...), "
                "then --calculon DIR or CALCULON=DIR")
    if not (root / "bin" / "calculon").exists() or not (root / model).exists():
        return f"{root} is not a Calculon checkout (no bin/calculon or {model})"
    probe = subprocess.run([calculon_python(), "-c", "import psutil"], capture_output=True, text=True)
    if probe.returncode:
        return f"{calculon_python()} lacks psutil, which Calculon imports: pip install psutil or set CALCULON_PYTHON"
    return None


def calculon_commit(root: Path) -> str:
    proc = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True)
    return proc.stdout.strip() or "unknown"


def calculon_system(root: Path, space: str, workdir: Path) -> Path:
    if not SPACES[space][0]:
        return root / CALCULON_SYSTEM
    system = json.loads((root / CALCULON_SYSTEM).read_text())
    system["mem2"]["GiB"] = 0  # Calculon searches offload only where mem2 has capacity
    path = workdir / "a100_80g_nooffload.json"
    path.write_text(json.dumps(system, indent=2))
    return path


def calculon_search(root: Path, model: str, gpus: int, batch: int, system: Path, space: str, cpus: int,
                    top: int, workdir: Path) -> dict:
    out = workdir / "calculon_best.json"
    args = ["llm-optimal-execution", model, str(gpus), str(batch), "float16", str(system), str(out), "-m",
            "-c", str(cpus), "-t", str(top)] + SPACES[space][1]
    env = dict(os.environ, PYTHONPATH=str(root))
    start = time.perf_counter()
    proc = subprocess.run([calculon_python(), "bin/calculon"] + args, cwd=root, env=env, capture_output=True,
                          text=True)
    wall = time.perf_counter() - start
    log = proc.stdout + proc.stderr
    if proc.returncode:
        raise RuntimeError(f"Calculon failed:\n{log[-2000:]}")
    counts = {key: int(m.group(1)) for key in ("Total", "Good", "Bad")
              if (m := re.search(rf"{key} executions: (\d+)", log))}
    best = json.loads(out.read_text())
    shown = " ".join(args).replace(str(root) + "/", "").replace(str(workdir) + "/", "")
    return {"command": "PYTHONPATH=. ./bin/calculon " + shown, "wall_s": wall, "counts": counts,
            "best": [best[k] for k in sorted(best, key=int)]}


def calculon_layout_str(exe: dict) -> str:
    sp = {"ar": "", "p2p_rs_ag": "+sp(p2p)", "rs_ag": "+sp"}[exe["tensor_par_comm_type"]]
    parts = [f"tp{exe['tensor_par']}{sp}", f"pp{exe['pipeline_par']}", f"dp{exe['data_par']}",
             "optimizer sharded" if exe["optimizer_sharding"] else "optimizer replicated",
             f"mbs{exe['microbatch_size']}", f"batch {exe['batch_size']}"]
    if exe["pipeline_par"] > 1:
        parts.append(f"interleaved x{exe['pipeline_interleaving']}" if exe["pipeline_interleaving"] > 1 else "1f1b")
    parts.append(f"recompute {exe['activation_recompute']}")
    if exe["seq_par_ag_redo"]:
        parts.append("SP all-gather redone")
    if exe["tensor_par_overlap"] != "none":
        parts.append(f"TP overlap {exe['tensor_par_overlap']}")
    if exe["data_par_overlap"]:
        parts.append("DP overlap")
    offload = [k.split("_")[0] for k in ("weight_offload", "activations_offload", "optimizer_offload") if exe[k]]
    if offload:
        parts.append("offload " + "+".join(offload))
    parts.append(f"nets tp/pp/dp {exe['tensor_par_net']}/{exe['pipeline_par_net']}/{exe['data_par_net']}")
    return ", ".join(parts)


CALCULON_PRICE = r"""
import itertools, json, logging, sys
import calculon
from calculon.llm import Llm
from calculon.system import System
app = Llm.Application(calculon.io.read_json_file(sys.argv[1]))
syst = System(calculon.io.read_json_file(sys.argv[2]))
base = json.loads(sys.argv[3])
best, last = None, None
for tn, pn, dn in itertools.product(range(syst.num_networks), repeat=3):  # the networks, as its search varies them
    exe = dict(base, tensor_par_net=tn, pipeline_par_net=pn, data_par_net=dn)
    try:
        model = Llm(app, logging.Logger('x'))
        model.compile(syst, Llm.Execution.from_json(exe))
        model.run(syst)
    except Llm.Error as error:
        last = str(error)
        continue
    stats = model.get_stats_json(False)
    if best is None or stats['sample_rate'] > best['stats']['sample_rate']:
        best = {'execution': exe, 'stats': stats}
print(json.dumps(best if best is not None else {'error': last}))
"""


def calculon_on_cost4d(root: Path, model: str, system: Path, lay: dict, gpus: int, batch: int) -> dict:
    """Calculon's prediction for a cost4d layout, on the best of its network assignments."""
    data = lay["dp"] * lay["fsdp"]
    exe = {"num_procs": gpus, "tensor_par": lay["tp"], "pipeline_par": lay["pp"], "data_par": data,
           "tensor_par_net": 0, "pipeline_par_net": 0, "data_par_net": 0, "batch_size": batch,
           "microbatch_size": lay["tokens"] // SEQ, "datatype": "float16", "fused_activation": True,
           "attention_type": "multihead", "activation_recompute": RECOMPUTE_TO_CALCULON[lay["recompute"]],
           "pipeline_interleaving": lay["chunks"] if lay["pp"] > 1 else 1,
           "optimizer_sharding": lay["zero"] >= 1 and lay["fsdp"] > 1,
           "tensor_par_comm_type": "rs_ag" if lay["sp"] else "ar", "tensor_par_overlap": "none",
           "seq_par_ag_redo": False, "data_par_overlap": data > 1, "weight_offload": False,
           "activations_offload": False, "optimizer_offload": False, "training": True}
    proc = subprocess.run([calculon_python(), "-c", CALCULON_PRICE, str(root / model), str(system), json.dumps(exe)],
                          cwd=root, env=dict(os.environ, PYTHONPATH=str(root)), capture_output=True, text=True)
    if proc.returncode:
        return {"error": proc.stderr.strip()[-500:]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


#: Korthikanti et al. 2022 (arXiv:2205.05198) Table 5, Megatron-1T: measured seconds per iteration, and the
#: cost4d flags of the same run (no flash attention then; 'full' is without SP, as Calculon's file has it)
ANCHOR = {"seqsel": (71.49, ["--sp", "--recompute", "selective"]), "full": (94.42, ["--recompute", "full"])}


def anchor(root: Path) -> dict:
    """Both tools on the measured 1T run (Calculon's own validation inputs)."""
    out = {}
    for mode, (measured, flags) in ANCHOR.items():
        with tempfile.TemporaryDirectory() as tmp:
            stats = Path(tmp) / "stats.json"
            subprocess.run([calculon_python(), "bin/calculon", "llm", "models/megatron-1T.json",
                            f"validation/seqsel/tab5/megatron-1T_{mode}.json", CALCULON_SYSTEM, str(stats)], cwd=root,
                           env=dict(os.environ, PYTHONPATH=str(root)), check=True, capture_output=True)
            calc = json.loads(stats.read_text())["total_time"]
        args = ["step", "--model", CASES["1t"][0], "--hardware", HARDWARE, "--recipe", "megatron", "--tp", "8",
                "--pp", "64", "--tokens", "2048", "--microbatches", "512", "--no-flash"] + flags
        out[mode] = {"measured_s": measured, "calculon_s": calc, "cost4d_s": run_json(args)["step_s"],
                     "cost4d_command": "cost4d " + " ".join(args)}
    return out


# ---------------------------------------------------------------- report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--case", choices=sorted(CASES), default="1t")
    parser.add_argument("--top", type=int, default=10)
    parser.add_argument("--calculon", type=Path, default=os.environ.get("CALCULON"),
                        help="Calculon checkout (default $CALCULON); without it cost4d's side only")
    parser.add_argument("--calculon-space", choices=sorted(SPACES), help="default: the case's (see above)")
    parser.add_argument("--cpus", type=int, default=os.cpu_count(), help="Calculon's worker processes (-c)")
    parser.add_argument("--json-out", type=Path, help="also write every number to this file")
    args = parser.parse_args()
    os.chdir(HERE.parent)
    model, calc_model, gpus, calc_batch, batch, default_space = CASES[args.case]
    space = args.calculon_space or default_space

    rows, record = [], {"case": args.case, "gpus": gpus, "batch": batch, "seq": SEQ}
    plans = {}
    for label, framework, recipe in (("cost4d plan, megatron profile", "megatron", None),
                                     ("cost4d plan, exact (+ZeRO-3)", "exact", "megatron")):
        result = cost4d_plan(model, gpus, batch, framework, recipe, args.top)
        plans[label] = result
        best = result["layouts"][0] if result["layouts"] else None
        rows.append((label, result["wall_s"], result["seconds"], result["considered"], result["feasible"],
                     cost4d_layout_str(best["layout"]) if best else "none fits", best and best["step_s"],
                     best and best["tokens_per_s"], best and best["mfu"], None, best and best["memory_bytes"]))
        print(f"$ {result['command']}\n  {result['considered']:,} layouts, {result['feasible']:,} fit; search "
              f"{result['seconds'] or 0:.2f} s, command {result['wall_s']:.2f} s" +
              (f"\n  {result['error']}" if "error" in result else ""), flush=True)
    record["cost4d"] = plans
    ref = next((p["layouts"][0] for p in plans.values() if p["layouts"]), None)
    step = run_json(["step", "--model", model, "--hardware", HARDWARE, "--tokens", str(SEQ)])  # any layout will do
    flops_per_token = step["mfu"] * step["devices"] * PEAK / step["tokens_per_s"]  # cost4d's model FLOPs per token

    root = Path(args.calculon).resolve() if args.calculon else None
    missing = calculon_missing(root, calc_model)
    calc = None
    if missing:
        print(f"\nCalculon's side skipped: {missing}")
    else:
        commit = calculon_commit(root)
        print(f"\nCalculon {commit[:12]}: llm-optimal-execution, space '{space}', {args.cpus} processes (1t on 2 "
              "shared cores: no-offload-no-overlap 3-4 min, no-offload 13-22 min, published est. 1.5-2.5 h)", flush=True)
        with tempfile.TemporaryDirectory() as tmp:
            system = calculon_system(root, space, Path(tmp))
            calc = calculon_search(root, calc_model, gpus, calc_batch, system, space, args.cpus, args.top, Path(tmp))
            record["calculon"] = dict(calc, commit=commit, space=space)
            top1 = calc["best"][0]
            stats, exe = top1["stats"], top1["execution"]
            tokens = stats["sample_rate"] * SEQ
            rows.append((f"Calculon, {space}", calc["wall_s"], None, calc["counts"].get("Total"),
                         calc["counts"].get("Good"), calculon_layout_str(exe), stats["total_time"], tokens,
                         tokens * flops_per_token / (gpus * PEAK), stats["total_efficiency"],
                         stats["proc_mem_tier1_cap_req"]))
            print(f"$ {calc['command']}\n  {calc['counts']}; {calc['wall_s']:.1f} s", flush=True)
            # each tool prices the other's winner (cost4d's best that Calculon can express)
            expressible = [p for p in plans["cost4d plan, megatron profile"]["layouts"]
                           if p["layout"]["cp"] == 1 and p["layout"]["zero"] <= 1]
            if ref is None:
                print("  (no cost4d layout fits, so Calculon has none of cost4d's to price)")
            cross = {"cost4d_on_calculon_best": cost4d_on_calculon(model, exe)}
            tried = []
            for pick in expressible:  # down cost4d's list to the first layout Calculon accepts
                tried.append(dict(calculon_on_cost4d(root, calc_model, system, pick["layout"], gpus, batch),
                                  rank=pick["rank"], cost4d_step_s=pick["step_s"], layout=pick["layout"]))
                if "stats" in tried[-1]:
                    break
            cross["calculon_on_cost4d_best"] = tried
            record["cross"] = cross
            if args.case == "1t":
                record["anchor"] = anchor(root)

    print(f"\n{args.case}: {gpus:,} A100 80GB, {batch:,} x {SEQ} tokens per step (MFU: {flops_per_token:.4g} model "
          "FLOPs/token over 312 TFLOP/s)\n")
    head = ("search", "wall s", "search s", "evaluated", "feasible", "layouts/s", "step s", "tokens/s", "samples/s",
            "MFU", "own eff.", "GiB")
    print(" | ".join(head))
    for name, wall, search, evaluated, fit, layout, step, tok, mfu, own, mem in rows:
        rate = evaluated / (search or wall) if evaluated else None
        cells = (name, f"{wall:.2f}", f"{search:.2f}" if search else "-", f"{evaluated:,}", f"{fit:,}",
                 f"{rate:,.0f}" if rate else "-", f"{step:.2f}" if step else "-", f"{tok:,.0f}" if tok else "-",
                 f"{tok / SEQ:.2f}" if tok else "-", f"{mfu:.1%}" if mfu else "-", f"{own:.1%}" if own else "-",
                 f"{mem / 2**30:.1f}" if mem else "-")
        print(" | ".join(cells))
        print(f"    best: {layout}")
    if calc is not None:
        print("\nEach tool on the other's best layout:")
        for cc in record["cross"]["calculon_on_cost4d_best"]:
            head = f"  Calculon on cost4d's #{cc['rank']} ({cost4d_layout_str(cc['layout'])}; cost4d " \
                   f"{cc['cost4d_step_s']:.2f} s)"
            if "stats" in cc:
                s = cc["stats"]
                print(f"{head}: {s['total_time']:.2f} s/step, {s['sample_rate'] * SEQ:,.0f} tokens/s, "
                      f"{s['proc_mem_tier1_cap_req'] / 2**30:.1f} GiB; nets {cc['execution']['tensor_par_net']}/"
                      f"{cc['execution']['pipeline_par_net']}/{cc['execution']['data_par_net']}")
            else:
                print(f"{head}: rejected: {cc.get('error')}")
        ck = record["cross"]["cost4d_on_calculon_best"]
        if "step_s" in ck:
            extra = (f"; {ck['plan_rules_step_s']:.2f} s with TP on the critical path as plan prices it"
                     if "plan_rules_step_s" in ck else "")
            print(f"  cost4d on Calculon's best: {ck['step_s']:.2f} s/step, {ck['tokens_per_s']:,.0f} tokens/s, "
                  f"MFU {ck['mfu']:.1%}{extra}; needs {ck['needed_bytes'] / 2**30:.1f} GiB "
                  f"({'fits' if ck['fits'] else 'does not fit'} 80 GiB)\n    $ {ck['command']}")
        else:
            print(f"  cost4d on Calculon's best: {ck.get('error')}\n    $ {ck['command']}")
    if "anchor" in record:
        print("\nMeasured anchor, Korthikanti et al. 2022 Table 5: Megatron-1T on 512 A100s, tp8 pp64, batch 512, mbs1 "
              "(Calculon's validation/seqsel/tab5 files; nothing in cost4d's A100 step model is fitted to this table)")
        for mode, row in record["anchor"].items():
            print(f"  {mode}: measured {row['measured_s']:.2f} s; Calculon {row['calculon_s']:.2f} s "
                  f"({row['calculon_s'] / row['measured_s'] - 1:+.1%}); cost4d {row['cost4d_s']:.2f} s "
                  f"({row['cost4d_s'] / row['measured_s'] - 1:+.1%})\n    $ {row['cost4d_command']}")
    if args.json_out:
        args.json_out.write_text(json.dumps(record, indent=1, default=str))


if __name__ == "__main__":
    main()
