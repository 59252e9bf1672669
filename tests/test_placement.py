"""--placement: the order a GPU layout's axes fill the network (innermost, NVLink, first), by hand; arrays of
orders equal each order alone; the planner searches the orders that place axes differently, once each."""

from __future__ import annotations

import numpy as np
import pytest

from costmodel.cost.evaluate import evaluate, evaluate_layout
from costmodel.cost.placement import placement
from costmodel.cost.point import Point
from costmodel.cost.shape import Shape
from costmodel.errors import CostModelError
from costmodel.inputs.placement import PLACEMENTS
from costmodel.specs.layout import Layout
from costmodel.specs.load import load_hardware, load_model, load_recipe

H100 = load_hardware("h100-sxm")  # 8 GPUs per NVLink domain


def _where(order: str, axis: str, **degrees):
    p = placement(H100, Point.of(Layout(tokens=8192, placement=order, **degrees)), axis)
    return int(p.per_domain), int(p.domains)


def test_by_hand_on_eight_gpu_nodes():
    """tp 2, cp 8, fsdp 2 (32 GPUs). Megatron's order: tp's 2 in the node, then 4 of cp (2 nodes), fsdp across.
    cp first: all 8 of cp in the node, tp then across 2 nodes. data first: fsdp's 2, tp's 2, 2 of cp."""
    degrees = dict(tp=2, cp=8, fsdp=2)
    assert [_where("tp,cp,data,pp", a, **degrees) for a in ("tp", "cp", "fsdp")] == [(2, 1), (4, 2), (1, 2)]
    assert [_where("cp,tp,data,pp", a, **degrees) for a in ("tp", "cp", "fsdp")] == [(1, 2), (8, 1), (1, 2)]
    assert [_where("data,tp,cp,pp", a, **degrees) for a in ("tp", "cp", "fsdp")] == [(2, 1), (2, 4), (2, 1)]


def test_hsdp_shards_stay_inside_replicas():
    """data is fsdp inside dp: with pp first (2 of 8), fsdp's 4 fill the node and dp's replicas go across."""
    degrees = dict(pp=2, fsdp=4, dp=2)
    assert _where("pp,data,tp,cp", "fsdp", **degrees) == (4, 1)
    assert _where("pp,data,tp,cp", "dp", **degrees) == (1, 2)


def test_an_array_of_orders_equals_each_order_alone():
    shape, recipe = Shape.of(load_model("llama3-8b")), load_recipe("cs336")
    layouts = [dict(tp=2, cp=4, fsdp=4, pp=2), dict(tp=4, cp=2, dp=2, fsdp=2, pp=2)]
    for degrees in layouts:
        alone = [evaluate(shape, recipe, Point.of(Layout(tokens=8192, placement=o, microbatches=4, **degrees)),
                          H100).step.step_s for o in PLACEMENTS]
        n = len(PLACEMENTS)
        arrays = Point(**{k: np.full(n, v) for k, v in degrees.items()}, tokens=np.full(n, 8192),
                       microbatches=np.full(n, 4), placement=np.arange(n))
        together = evaluate(shape, recipe, arrays, H100).step.step_s
        assert together == pytest.approx(alone, rel=1e-12)
        assert len({round(t, 12) for t in alone}) > 1  # the orders do differ here


def test_placement_is_refused_where_it_means_nothing():
    with pytest.raises(ValueError, match="give tp, cp, data and pp once each"):
        Layout(placement="tp,cp,pp")
    with pytest.raises(ValueError, match="--ep > 1"):
        Layout(placement="cp,tp,data,pp", ep=2)
    with pytest.raises(CostModelError, match="tpu-v5p is a TPU"):
        evaluate_layout(load_model("llama3-8b"), load_recipe("cs336"), Layout(tokens=8192, placement="cp,tp,data,pp"),
                        load_hardware("tpu-v5p"))


def test_the_planner_searches_orders_once_each():
    """Long sequences on 16 GPUs: tp 8 with cp 2 is best with TP in the node; the search also prices CP in the
    node (slower), and lists no two orders that place every axis alike."""
    from costmodel.solve.plan import plan

    found = plan(load_model("llama3-8b"), load_recipe("cs336"), H100, devices=16, global_tokens=262144, seq=131072,
                 top=20).best
    orders = {row.layout["placement"] for row in found}
    assert found[0].layout["placement"] == "tp,cp,data,pp" and len(orders) > 1
    seen = {}
    for row in found:
        key = tuple(sorted((k, v) for k, v in row.layout.items() if k != "placement"))
        assert round(row.step_s, 12) not in seen.get(key, set()), row.layout  # one order per distinct placement
        seen.setdefault(key, set()).add(round(row.step_s, 12))
    for row in found[:5]:  # each row's step is what `cost4d step --placement ...` gives
        layout = Layout(**row.layout)
        step = evaluate_layout(load_model("llama3-8b"), load_recipe("cs336"), layout, H100).step
        assert step.step_s == pytest.approx(row.step_s, rel=1e-9)


def test_the_planner_lists_each_layout_once():
    """No layout twice (an interleaved schedule's rows once kept the no-SP pass of tp = 1 too), and no two
    placements the model prices alike."""
    from costmodel.solve.plan import plan

    found = plan(load_model("llama3-8b"), load_recipe("cs336"), H100, devices=8, global_tokens=65536, seq=8192,
                 top=50).best
    keys = [(row.step_s, tuple(sorted((k, v) for k, v in row.layout.items() if k != "placement"))) for row in found]
    assert len(keys) == len(set(keys)) == 50
