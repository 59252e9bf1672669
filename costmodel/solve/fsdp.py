"""The smallest FSDP shard count whose per-device memory is under a limit.

Per-device memory is a + b / N in the number of shards N (every component is either replicated
or divided by N), so a and b are read off the memory formulas at two values of N and the
inequality a + b / N < limit gives N > b / (limit - a): no second copy of any formula.
"""

from __future__ import annotations

import math
from dataclasses import replace

from costmodel.errors import CostModelError
from costmodel.specs.layout import Layout
from costmodel.specs.recipe import Recipe
from costmodel.cost.evaluate import evaluate_layout
from costmodel.record import record


@record
class FsdpAnswer:
    """The smallest FSDP shard count that fits, with the replicated and sharded bytes it splits."""

    n_fsdp: int | None  # None when no N fits
    threshold: float  # N must exceed this (b / (limit - a)); inf when impossible
    replicated_bytes: float  # a: what no N shards
    sharded_bytes: float  # b: what N divides
    limit_bytes: float
    max_tokens: int | None  # with no N fitting: the most tokens for which some N does
    searched: bool = False  # True: a framework's peak (a max over phases), found by search, not a + b/N
    most: int | None = None  # searched: the largest N tried (as many as the device bound leaves)
    # searched: threshold is the largest admissible N that does not fit (1 when the smallest fits)


def regime_layout(layout: Layout) -> Layout:
    """The layout at the smallest N where memory is a + b / N: N = 2, or 2e with expert parallelism e (the
    experts' N / e shards; below e they are not sharded at all). The solvers and their derivations read it."""
    return layout.model_copy(update={"fsdp": 2 * layout.ep})


def linear_in_inverse_n(model, recipe: Recipe, layout: Layout) -> tuple[float, float]:
    """(a, b) with memory(N) = a + b / N, read off the formulas at N = 2 and N = 4 (with expert
    parallelism e: at 2e and 4e, where the experts' N / e shards make them a + b / N too)."""
    low = regime_layout(layout).fsdp
    m2 = evaluate_layout(model, recipe, layout.model_copy(update={"fsdp": low})).memory_bytes
    m4 = evaluate_layout(model, recipe, layout.model_copy(update={"fsdp": 2 * low})).memory_bytes
    b = 2 * low * (m2 - m4)  # m2 - m4 = b/low - b/(2 low)
    return m2 - b / low, b


def solve_fsdp(model, recipe: Recipe, layout: Layout, limit_bytes: float, framework=None) -> FsdpAnswer:
    """Smallest N with memory(N) < limit, or the largest token count for which one exists.

    With a framework profile the memory is the heaviest stage's reserved peak plus what lives outside
    the allocator: a maximum over phases, still non-increasing in N, so N is found by bisection."""
    if limit_bytes <= 0:
        raise CostModelError("the memory limit must be positive")
    if framework is not None:
        return _search(model, recipe, layout, limit_bytes, framework)
    a, b = linear_in_inverse_n(model, recipe, layout)
    if a < limit_bytes:
        threshold = b / (limit_bytes - a)
        return FsdpAnswer(_admissible_above(threshold, layout.ep), threshold, a, b, limit_bytes, None)
    return FsdpAnswer(None, math.inf, a, b, limit_bytes, _max_tokens(model, recipe, layout, limit_bytes))


def _admissible_above(threshold: float, ep: int) -> int:
    """The smallest N > threshold the expert axis admits: any N without experts; with EP e a multiple
    of e (a + b/N holds from N = e on; below it the experts are not sharded at all)."""
    n = math.floor(threshold) + 1
    return n if ep == 1 else max(ep, math.ceil(n / ep) * ep)


def _max_tokens(model, recipe: Recipe, layout: Layout, limit_bytes: float) -> int | None:
    """Largest token count T with a(T) < limit: a(T) = a(0) + slope T is linear in T too."""
    a0, _ = linear_in_inverse_n(model, recipe, layout.model_copy(update={"tokens": 0}))
    a1, _ = linear_in_inverse_n(model, recipe, layout.model_copy(update={"tokens": layout.cp}))
    slope = (a1 - a0) / layout.cp
    if a0 >= limit_bytes or slope <= 0:
        return None  # even the state that no N shards does not fit
    tokens = math.ceil((limit_bytes - a0) / slope) - 1
    return tokens - tokens % layout.cp


def memory_at(model, recipe: Recipe, layout: Layout, n: int, framework=None) -> float:
    """What `solve fsdp` compares with the limit at N shards: the exact accounting's peak, or with a
    framework its heaviest stage's reserved peak plus what it holds outside the allocator."""
    cost = evaluate_layout(model, recipe, layout.model_copy(update={"fsdp": n}), framework=framework)
    return cost.memory_bytes + (framework.outside_allocator_bytes if framework is not None else 0)


def admissible(model, layout: Layout, most: int) -> tuple[int, object]:
    """(how many, the i-th from 0) of the shard counts N from 2 to ``most`` that the layout's expert axis admits,
    ascending: those for which parallel.expert's rules hold, read from the rules themselves for N up to 2 e. They
    test divisibility of N by divisors of e (e must divide f dp N, one of e and f N the other), so above e they
    repeat with period e: N > 2 e is admitted as N - e is."""
    from costmodel.cost.point import Point
    from costmodel.cost.shape import Shape
    from costmodel.parallel import expert

    e = layout.ep
    if e == 1:
        return max(0, most - 1), lambda i: i + 2
    shape, point = Shape.of(model), Point.of(layout)

    def ok(n: int) -> bool:
        return all(rule.ok for rule in expert.checks(shape, replace(point, fsdp=n)))

    small = [n for n in range(2, min(e, most) + 1) if ok(n)]
    offsets = [n - e for n in range(e + 1, 2 * e + 1) if ok(n)]  # admitted above e: k e + o, k >= 1
    large = sum(max(0, (most - o) // e) for o in offsets)
    return len(small) + large, lambda i: small[i] if i < len(small) else (
        e * (1 + (i - len(small)) // len(offsets)) + offsets[(i - len(small)) % len(offsets)])


def _search(model, recipe: Recipe, layout: Layout, limit_bytes: float, framework) -> FsdpAnswer:
    """Bisection over the admissible N (:func:`admissible`) from 2 to as many as the device bound leaves (the
    framework's peak is non-increasing in N); N = 1 first (without experts): no shards, or where the framework
    shards over the CP ranks too (``cp_in_data``), 1/c of the sharded state already."""
    from costmodel.inputs.bounds import DEVICES

    count, shards = admissible(model, layout, DEVICES // (layout.dp * layout.tp * layout.pp * layout.cp))
    if count == 0:
        memory_at(model, recipe, layout, max(2, layout.ep), framework)  # names the rule no N satisfies
        raise CostModelError("no shard count N >= 2 fits the device bound with this layout's other axes")

    def need(i: int) -> float:
        return memory_at(model, recipe, layout, shards(i), framework)

    floor = need(count - 1)
    most = shards(count - 1)
    if floor >= limit_bytes:
        return FsdpAnswer(None, math.inf, floor, 0.0, limit_bytes, None, searched=True, most=most)
    if layout.ep == 1:  # N = 1: no shards, or where the framework folds CP in, the c CP ranks' own
        try:
            one = memory_at(model, recipe, layout, 1, framework)
        except CostModelError:  # a layout the framework does not run unsharded: the search below answers
            one = math.inf
        if one < limit_bytes:
            return FsdpAnswer(1, 0.0, floor, one - floor, limit_bytes, None, searched=True, most=most)
    low, high = -1, count - 1  # need(high) < limit; nothing at or below low fits
    while high - low > 1:
        mid = (low + high) // 2
        if need(mid) < limit_bytes:
            high = mid
        else:
            low = mid
    return FsdpAnswer(shards(high), float(shards(low)) if low >= 0 else 1.0, floor, need(high) - floor, limit_bytes,
                      None, searched=True, most=most)
