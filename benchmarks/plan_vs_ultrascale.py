"""How well cost4d ranks the Ultra-Scale Playbook's measured layouts (issue 12's check).

    python benchmarks/plan_vs_ultrascale.py [CSV]

For each (model, nodes) cell of shared/data/training-runs/ultrascale_playbook_1b_3b.csv, every
layout that ran (status ok) is predicted with the nanotron profile on h100-sxm; the layout cost4d
ranks first among them is compared with the measured top 3 of the cell (by tokens/s). The planner
itself searches a larger space (context parallelism, recompute, interleaving) than the sweep ran,
so its own first choice is usually a layout that was never measured; ranking the measured ones is
the part of the question the data can answer.
"""

from __future__ import annotations

import csv
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from fit_memory_nanotron import DATA, layout_of  # noqa: E402

from costmodel.cost.evaluate import evaluate_layout  # noqa: E402
from costmodel.specs.framework_catalog import FRAMEWORKS  # noqa: E402
from costmodel.specs.load import load_hardware, load_model, load_recipe  # noqa: E402


def ranking(path=DATA) -> list[tuple]:
    """Per (model, nodes) cell: (model, nodes, measured rank of cost4d's first, layouts, its row, predicted)."""
    hardware, recipe, frame = load_hardware("h100-sxm"), load_recipe("megatron"), FRAMEWORKS["nanotron"]
    models = {"1B": load_model("nanotron-1b"), "3B": load_model("nanotron-3b")}
    cells = defaultdict(list)
    with open(path, newline="") as handle:
        for row in csv.DictReader(handle):
            if row["status"] != "ok":
                continue
            try:
                cost = evaluate_layout(models[row["model"]], recipe, layout_of(row), hardware, framework=frame)
            except Exception:  # noqa: BLE001  (layouts cost4d refuses are left out of the ranking)
                continue
            cells[(row["model"], int(row["nodes"]))].append((float(row["tok_s"]), cost.step.tokens_per_s, row))
    out = []
    for (model, nodes), rows in sorted(cells.items()):
        measured = sorted(rows, key=lambda r: -r[0])
        mine = max(rows, key=lambda r: r[1])
        out.append((model, nodes, measured.index(mine) + 1, len(rows), mine[2], mine[1], mine[0]))
    return out


def main(argv: list[str]) -> None:
    cells = ranking(Path(argv[0]) if argv else DATA)
    for model, nodes, rank, count, r, predicted, measured in cells:
        print(f"{model} {nodes:>2} nodes: cost4d's first (dp {r['dp']} tp {r['tp']} pp {r['pp']} zero {r['zero']} "
              f"mbs {r['mbs']}) is measured #{rank} of {count}; predicted {predicted:,.0f} vs measured "
              f"{measured:,.0f} tokens/s")
    print(f"in the measured top 3: {sum(c[2] <= 3 for c in cells)} of {len(cells)} cells")


if __name__ == "__main__":
    main(sys.argv[1:])
