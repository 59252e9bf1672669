"""cost/nccl.py: the tuner's time is the same whether a layout comes as numbers or as one element of
an array (both dedupe paths), and letters evaluate to it."""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp

from costmodel.cost.nccl import PRESETS, TunedCost

GROUPS = [(1, 2), (1, 4), (1, 8), (2, 8), (4, 8), (16, 8), (2, 1), (8, 2), (1, 1)]


@pytest.mark.parametrize("preset", sorted(PRESETS))
@pytest.mark.parametrize("op", ["all-reduce", "all-gather", "reduce-scatter", "broadcast", "reduce"])
@pytest.mark.parametrize("huge", [False, True])
def test_arrays_equal_numbers(preset, op, huge):
    rng = np.random.default_rng(7)
    pick = rng.integers(0, len(GROUPS), 400)
    nodes = np.array([GROUPS[i][0] for i in pick], dtype=float)
    per_node = np.array([GROUPS[i][1] for i in pick], dtype=float)
    sizes = np.floor(2.0 ** rng.uniform(3, 52 if huge else 36, 400))  # past 2^51: the two-sort path
    arrays = TunedCost(preset, op, nodes, per_node, "auto", 4.4e-6).seconds(sizes)
    for i in range(0, 400, 7):
        number = TunedCost(preset, op, int(nodes[i]), int(per_node[i]), "auto", 4.4e-6).seconds(float(sizes[i]))
        assert arrays[i] == pytest.approx(number, rel=1e-12, abs=0)


def test_letters_evaluate_to_the_number():
    S, N, g = sp.symbols("S N g", positive=True)
    expr = TunedCost("hgx-h100", "all-reduce", N, g, "auto", 4.4e-6).seconds(S)
    number = TunedCost("hgx-h100", "all-reduce", 2, 8, "auto", 4.4e-6).seconds(2.0**27)
    assert float(expr.subs({S: 2**27, N: 2, g: 8})) == pytest.approx(number, rel=1e-12)
    assert "t_NCCL_all_reduce" in str(expr)
