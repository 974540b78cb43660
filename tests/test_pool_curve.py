"""The pooling curve's expansion: never above g(n), within 1% below it up to the expansion limit,
and as short as that allows (perf/queueing.py, docs/formulation.md §2)."""

from __future__ import annotations

import math

import pytest

from fleetopt.perf.queueing import (
    LINEAR_WITHIN,
    MAX_EXPANSION,
    NO_QUEUEING,
    PoolCurve,
    Waits,
    carried,
    max_load,
    pool_curve,
    pool_load,
    pooled_load,
    wait_tail,
)

SINGLE = [((1.0, w),) for w in (0.1, 1.0, 3.0, 10.0)]
MIXED = [((0.5, 8.0), (0.4, 3.0), (0.095, 0.6), (0.005, -0.2))]
"""Prompt-length bins: half the requests may wait 8 services, the longest 0.5% miss anyway."""
CASES = [(w, tail, u) for w in SINGLE + MIXED for tail in (0.01, 0.1) for u in (0.9, 0.95)]


def _exact(n: int, w: Waits, tail: float, u: float) -> float:
    """g(n) = min(n, f(n)/u) straight from Erlang C."""
    return min(n, max_load(n, w, tail) / u)


@pytest.mark.parametrize(("w", "tail", "u"), CASES)
def test_curve_is_conservative_and_within_one_percent(w, tail, u):
    curve = pool_curve(((w, tail),), u)
    for n in range(1, 3 * MAX_EXPANSION):
        exact = _exact(n, w, tail, u)
        assert curve.load(n) <= exact * (1 + 1e-9), n
        if n <= MAX_EXPANSION:
            assert curve.load(n) >= exact * (1 - LINEAR_WITHIN) - 1e-9, n


@pytest.mark.parametrize(("w", "tail", "u"), CASES)
def test_expansion_is_the_shortest_within_one_percent(w, tail, u):
    """One replica less in the expansion, continuing at that size's marginal rate, misses g by
    more than 1% somewhere up to the limit (or overstates it)."""
    curve = pool_curve(((w, tail),), u)
    size = len(curve.increments)
    if size == 1:
        return
    head = curve.increments[: size - 1]
    shorter = PoolCurve(head, head[-1])
    exact = [_exact(n, w, tail, u) for n in range(1, MAX_EXPANSION + 1)]
    assert any(
        shorter.load(n) < g * (1 - LINEAR_WITHIN) or shorter.load(n) > g * (1 + 1e-9)
        for n, g in enumerate(exact, start=1)
    )


@pytest.mark.parametrize(
    ("w", "tail"), [(w, tail) for w, tail, _ in CASES[::2]] + [(((1.0, 0.02),), 0.001)]
)
def test_pool_loads_from_warm_guesses_are_erlang_c_roots(w, tail):
    """f(n) grown from the guess the last two values give is the same root as from n/2:
    feasible (the wait tail within `tail`) and within 1e-9 of the cold search, for every n."""
    queue = (w, tail, 1.0)
    for n in range(1, 2 * MAX_EXPANSION):
        warm, cold = pool_load(n, queue), max_load(n, *queue)
        assert warm == pytest.approx(cold, rel=1e-9, abs=1e-12), n
        assert wait_tail(n, warm, w) <= tail * (1 + 1e-9), n


@pytest.mark.parametrize(("w", "tail"), [(w, tail) for w, tail, _ in CASES[::2]])
def test_max_load_is_the_largest_within_the_tail(w, tail):
    """Newton's answer is the root itself: the tail holds at it (to rounding) and breaks 1e-8
    above it."""
    for n in (1, 2, 5, 17, 64, 200):
        load = max_load(n, w, tail)
        assert 0 < load < n, n
        assert wait_tail(n, load, w) <= tail * (1 + 1e-12), n  # judged in logs
        assert wait_tail(n, load * (1 + 1e-8), w) > tail, n


def test_a_replica_at_the_ceiling_needs_no_expansion():
    assert pool_curve(((((1.0, 1000.0),), 0.01),), 0.9) == NO_QUEUEING


@pytest.mark.parametrize("rate", [0.5, 0.995])
def test_program_holds_a_linear_curve_below_the_ceiling(rate):
    """A curve that stops at N = 1 (g(n) = Δ_1·n, Δ_1 < 1) is held by the chord row alone: the
    solved fleet's prompt compute stays within Δ_1 of the ceiling's capacity per replica."""
    from fleetopt.catalog import resolve
    from fleetopt.configs import enumerate_configs
    from fleetopt.formulation import build_model
    from fleetopt.instance import parse_instance
    from fleetopt.perf.operating_point import PREFILL
    from fleetopt.pipeline import program_data
    from fleetopt.solve import SolveOptions, run_highs
    from tests.helpers import analytic_instance

    instance = analytic_instance(["h100-sxm"], 40.0, 1000, 200, 1000, 40)
    resolved = resolve(parse_instance(instance))
    data = program_data(resolved, enumerate_configs(resolved))
    for config in data.configs:
        config.queue = PoolCurve((rate,), rate)
    m = build_model(data)
    assert run_highs(m, SolveOptions()).status == "optimal"
    assert not hasattr(m, "fill")  # no binaries for a linear curve
    for k, config in enumerate(data.configs):
        users = {c: use[PREFILL] for c, use in config.usage.items() if use.get(PREFILL)}
        load = sum(m.r[c, k, 0].value * use for c, use in users.items())
        replicas = round(m.x[k, 0].value)
        assert load <= config.capacity[PREFILL] * rate * replicas * (1 + 1e-6) + 1e-9


def test_a_mixture_of_budgets_by_hand():
    """Half the prompts may wait 4 services, half 1: at the largest load the share waiting past
    its budget, C(n, a)·(½e^{−(n−a)·4} + ½e^{−(n−a)}) (cv² = 1), is the tail, and the load lies
    between what the shorter and the longer budget alone allow."""
    waits = ((0.5, 4.0), (0.5, 1.0))
    load = max_load(4, waits, 0.01)
    queued = load**4 / math.factorial(4) * 4 / (4 - load)  # Erlang C from its Poisson terms
    erlang_c = queued / (sum(load**k / math.factorial(k) for k in range(4)) + queued)
    by_hand = erlang_c * (0.5 * math.exp(-(4 - load) * 4) + 0.5 * math.exp(-(4 - load)))
    assert by_hand == pytest.approx(0.01, rel=1e-6)
    assert max_load(4, ((1.0, 1.0),), 0.01) < load < max_load(4, ((1.0, 4.0),), 0.01)


def test_sure_misses_spend_the_tail_first():
    """Prompts with no time to wait miss in an empty pool: 2% of them leave nothing of a 1%
    tail, and of a 5% tail only 3% for the queue, which then carries less than with none."""
    sure = ((0.98, 5.0), (0.02, -0.1))
    assert max_load(8, sure, 0.01) == 0.0
    assert 0 < max_load(8, sure, 0.05) < max_load(8, ((1.0, 5.0),), 0.05)


def test_a_pool_curve_is_the_least_of_its_classes_own():
    """Two classes whose budgets cross (one with a sure-miss tail, one with none but less time
    for most prompts): the pool carries the smaller of what each alone allows at every n, and
    a third class no stricter than the first anywhere changes nothing."""
    late = (((0.5, 6.0), (0.495, 2.0), (0.005, -1.0)), 0.01)
    tight = (((1.0, 1.5),), 0.01)
    looser = (((0.5, 8.0), (0.495, 2.0), (0.005, -1.0)), 0.02)
    pooled = pool_curve((late, tight), 0.95)
    alone = [pool_curve((t,), 0.95) for t in (late, tight)]
    for n in range(1, 40):
        least = min(curve.load(n) for curve in alone)
        assert pooled.load(n) == pytest.approx(least, rel=1e-9, abs=1e-12), n
    assert pool_curve((late, tight, looser), 0.95) == pooled
    assert pool_curve((late, late), 0.95) == alone[0]


COLOCATED = [
    ((late_, tight_), share, longest)
    for late_, tight_ in [
        ((((0.5, 6.0), (0.495, 2.0), (0.005, -1.0)), 0.01), (((1.0, 1.5),), 0.01)),
        ((((1.0, 0.4),), 0.05), (((0.9, 12.0), (0.1, 3.0)), 0.001)),
    ]
    for share, longest in [(0.0, math.inf), (0.3, 2.5), (1.2, 1.6)]
]


@pytest.mark.parametrize(("targets", "share", "longest"), COLOCATED)
def test_a_mixed_colocated_curve_is_conservative_and_within_one_percent(targets, share, longest):
    """Two classes on colocated replicas (chunked prompts, `carried`): the curve never overstates
    g(n) = min(n, the least of the classes' carried f(n)/u) and is within 1% of it up to the
    expansion limit. The expansion computes g(n) past its end only where a chord bound cannot
    decide (`_Pooled.above`); this checks the rule on every n."""
    u = 0.9

    def exact(n: int) -> float:
        return min(n, *(carried(n, max_load(n, w, t), share, longest) / u for w, t in targets))

    curve = pool_curve(targets, u, chunk_share=share, longest=longest)
    assert len(curve.increments) > 1  # queueing bites: the curve is not a line
    for n in range(1, 3 * MAX_EXPANSION):
        value = exact(n)
        assert curve.load(n) <= value * (1 + 1e-9), n
        if n <= MAX_EXPANSION:
            assert curve.load(n) >= value * (1 - LINEAR_WITHIN) - 1e-9, n


@pytest.mark.parametrize(("w", "tail", "u"), CASES)
def test_pooled_load_is_g_itself_at_or_above_the_expansion(w, tail, u):
    """What verify holds a pool to: g(n) from Erlang C, never below the program's line."""
    curve = pool_curve(((w, tail),), u)
    for n in (1, 2, 3, 7, MAX_EXPANSION, 3 * MAX_EXPANSION):
        exact = _exact(n, w, tail, u)
        assert pooled_load(((w, tail),), n, u) == pytest.approx(exact, rel=1e-9, abs=1e-12)
        assert curve.load(n) <= pooled_load(((w, tail),), n, u) * (1 + 1e-9)
