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


def test_the_experts_axes_follow_the_same_order():
    """tp 2, fsdp 8, ep 4, pp 2 (32 GPUs): the routed experts see the data block as ep (innermost), then 8 / 4 = 2
    expert shards. Megatron's order: etp's 2 in the node, then ep's 4 (the node is full), the shards across 2
    nodes. data first: ep's 4 and both shards in the node, expert TP across 2 nodes. pp first: ep's 4 share a
    node with the 2 stages, the shards go across."""
    degrees = dict(tp=2, fsdp=8, ep=4, pp=2)
    axes = ("etp", "ep", "expert-fsdp")
    assert [_where("tp,cp,data,pp", a, **degrees) for a in axes] == [(2, 1), (4, 1), (1, 2)]
    assert [_where("data,tp,cp,pp", a, **degrees) for a in axes] == [(1, 2), (4, 1), (2, 1)]
    assert [_where("pp,data,tp,cp", a, **degrees) for a in axes] == [(1, 2), (4, 1), (1, 2)]


@pytest.mark.parametrize("model, layouts", [
    ("llama3-8b", [dict(tp=2, cp=4, fsdp=4, pp=2), dict(tp=4, cp=2, dp=2, fsdp=2, pp=2)]),
    ("mixtral-8x7b", [dict(tp=2, sp=True, fsdp=8, ep=4, pp=2), dict(tp=2, sp=True, cp=2, dp=2, fsdp=4, ep=8)]),
])
def test_an_array_of_orders_equals_each_order_alone(model, layouts):
    shape, recipe = Shape.of(load_model(model)), load_recipe("cs336")
    for degrees in layouts:
        alone = [evaluate(shape, recipe, Point.of(Layout(tokens=8192, placement=o, microbatches=4, **degrees)),
                          H100).step.step_s for o in PLACEMENTS]
        n = len(PLACEMENTS)
        arrays = Point(**{k: v if isinstance(v, bool) else np.full(n, v) for k, v in degrees.items()},
                       tokens=np.full(n, 8192),
                       microbatches=np.full(n, 4), placement=np.arange(n))
        together = evaluate(shape, recipe, arrays, H100).step.step_s
        assert together == pytest.approx(alone, rel=1e-12)
        assert len({round(t, 12) for t in alone}) > 1  # the orders do differ here


def test_placement_is_refused_where_it_means_nothing():
    with pytest.raises(ValueError, match="give tp, cp, data and pp once each"):
        Layout(placement="tp,cp,pp")
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


@pytest.mark.slow
def test_the_planner_places_a_moe_s_axes_too():
    """Mixtral on 32 GPUs: the search prices orders for layouts with expert parallelism too, and each row's step
    is what `cost4d step --placement ...` gives."""
    from costmodel.solve.plan import plan

    model = load_model("mixtral-8x7b")
    found = plan(model, load_recipe("cs336"), H100, devices=32, global_tokens=262144, seq=4096, top=200).best
    moved = [row for row in found if row.layout["ep"] > 1 and row.layout["placement"] != "tp,cp,data,pp"]
    assert moved
    for row in moved[:5]:
        step = evaluate_layout(model, load_recipe("cs336"), Layout(**row.layout), H100).step
        assert step.step_s == pytest.approx(row.step_s, rel=1e-9)


def test_the_planner_lists_each_layout_once():
    """No layout twice (an interleaved schedule's rows once kept the no-SP pass of tp = 1 too), and no two
    placements the model prices alike."""
    from costmodel.solve.plan import plan

    found = plan(load_model("llama3-8b"), load_recipe("cs336"), H100, devices=8, global_tokens=65536, seq=8192,
                 top=50).best
    keys = [(row.step_s, tuple(sorted((k, v) for k, v in row.layout.items() if k != "placement"))) for row in found]
    assert len(keys) == len(set(keys)) == 50
