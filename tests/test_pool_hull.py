"""The pooling hull rows (formulation/prefill.py::add_pool_hull, docs/formulation.md §2): they
cut no plan, they touch the hull's corners, and they raise the LP bound without moving the
optimum."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest

import fleetopt.formulation.prefill as prefill
from fleetopt.catalog import resolve
from fleetopt.configs import enumerate_configs
from fleetopt.formulation import build_model
from fleetopt.formulation.prefill import hull_rows
from fleetopt.instance import parse_instance
from fleetopt.perf.queueing import PoolCurve, pool_curve
from fleetopt.pipeline import program_data, solve_program
from fleetopt.presolve import presolve
from fleetopt.solve import HeldRelaxation, SolveOptions, run_highs

CONVEX = [
    pool_curve(((((1.0, w),), tail),), u)
    for w, tail, u in [(0.3, 0.01, 0.9), (1.0, 0.1, 0.95), (3.0, 0.01, 0.95)]
]
NOT_CONVEX = PoolCurve((0.3, 0.8, 0.5, 0.9, 0.85), 0.7)
"""A pooled f is the least of the classes' own: its increments need not rise."""
CURVES = [c for c in CONVEX if not c.linear] + [NOT_CONVEX]


def _line(curve: PoolCurve, n: int) -> float:
    """What n replicas carry in the program's rows (the expansion, before the chord's cap)."""
    head = sum(curve.increments[:n])
    return head + max(0, n - len(curve.increments)) * curve.tail_rate


def test_every_convex_curve_pools():
    assert len(CURVES) == len(CONVEX) + 1  # none of them linear: the rows have work to do


@pytest.mark.parametrize("curve", CURVES)
def test_replicas_at_least_is_concave_and_never_above_what_a_pool_needs(curve):
    assert curve.replicas_at_least(0.0) == 0.0
    grid = np.linspace(0.0, _line(curve, 40), 801)
    h = np.array([curve.replicas_at_least(v) for v in grid])
    assert np.all(np.diff(h, 2) <= 1e-9)  # concave
    for n in range(41):
        assert curve.replicas_at_least(_line(curve, n)) <= n + 1e-9


@pytest.mark.parametrize("curve", [c for c in CURVES if c is not NOT_CONVEX])
def test_replicas_at_least_inverts_a_convex_curve(curve):
    for n in range(41):
        assert curve.replicas_at_least(_line(curve, n)) == pytest.approx(n, abs=1e-9)


@pytest.mark.parametrize("curve", CURVES)
def test_no_row_cuts_a_plan(curve):
    """Every integer pool size x and routed shares y whose load x replicas carry satisfies every
    order's row: a brute force over a grid of shares of three classes."""
    loads = {"a": 0.7, "b": 2.3, "c": 5.1}
    rows = list(hull_rows(curve, loads, itertools.permutations(loads)))
    assert len(rows) == 6
    grid = [0.0, 0.2, 0.5, 0.8, 1.0]
    checked = 0
    for x in range(12):
        for y in itertools.product(grid, repeat=3):
            if sum(s * d for s, d in zip(y, loads.values(), strict=True)) > _line(curve, x):
                continue
            share = dict(zip(loads, y, strict=True))
            for order, coefs in rows:
                assert sum(a * share[c] for c, a in zip(order, coefs, strict=True)) <= x + 1e-9
            checked += 1
    assert checked > 250  # not vacuous: hundreds of plans checked


@pytest.mark.parametrize("curve", CURVES)
def test_the_rows_touch_the_hulls_corners(curve):
    """At y = 1_S (the pool carries exactly the classes of S, whole) the rows' maximum is
    h(D_S): the rows are the hull, not merely valid."""
    loads = {"a": 0.7, "b": 2.3, "c": 5.1}
    rows = list(hull_rows(curve, loads, itertools.permutations(loads)))
    for size in range(4):
        for subset in itertools.combinations(loads, size):
            best = max(sum(a for c, a in zip(o, s, strict=True) if c in subset) for o, s in rows)
            expected = curve.replicas_at_least(sum(loads[c] for c in subset))
            assert best == pytest.approx(expected, abs=1e-12)


def _instance(seed: int) -> dict:
    """Three classes of one model with tight TTFTs: prefill pools that several classes share."""
    rng = random.Random(seed)
    return {
        "name": f"hull-{seed}",
        "gpus": [{"type": "l40s"}, {"type": "h100-sxm"}],
        "models": [{"name": "llama-3.1-8b"}],
        "workloads": [
            {
                "name": f"class-{i}",
                "model": "llama-3.1-8b",
                "requests_per_s": round(rng.uniform(3, 20), 1),
                "input_tokens": rng.choice([300, 1000, 3000]),
                "output_tokens": rng.choice([100, 300]),
                "slo": {"ttft_ms": rng.choice([300, 500, 1000]), "tpot_ms": 50},
            }
            for i in range(3)
        ],
        "serving": {"modes": ["colocated", "disaggregated"], "tensor_parallel": [1, 2]},
    }


def _bound_and_optimum(data) -> tuple[float, float]:
    relaxation = HeldRelaxation(build_model(data, relaxed=True), SolveOptions()).solve()
    outcome = run_highs(build_model(data), SolveOptions(mip_gap=1e-9))
    assert outcome.status == "optimal"
    return relaxation.objective, outcome.objective


@pytest.mark.parametrize("seed", range(2))
def test_the_rows_raise_the_lp_bound_and_keep_the_optimum(seed, monkeypatch):
    resolved = resolve(parse_instance(_instance(seed)))
    data = program_data(resolved, enumerate_configs(resolved))
    bound, optimum = _bound_and_optimum(data)
    monkeypatch.setattr(prefill, "HULL_MAX_CLASSES", 0)  # the chord alone
    chord_bound, chord_optimum = _bound_and_optimum(data)
    assert optimum == pytest.approx(chord_optimum, rel=1e-7)
    assert chord_bound < bound * (1 - 1e-3)
    assert bound <= optimum * (1 + 1e-9)


@pytest.mark.parametrize("seed", range(2))
def test_broken_orders_are_added_and_then_hold(seed, monkeypatch):
    """With every config over the all-orders limit, the LP's solution breaks some config's
    hull; the order found, added, holds at the next LP's solution, which is no cheaper."""
    monkeypatch.setattr(prefill, "HULL_MAX_CLASSES", 1)
    resolved = resolve(parse_instance(_instance(seed)))
    data = program_data(resolved, enumerate_configs(resolved))
    lp = build_model(data, relaxed=True)
    before = HeldRelaxation(lp, SolveOptions()).solve().objective
    broken = prefill.broken_hull_orders(lp, data)
    assert broken
    hulled = data.with_hull_orders(broken)
    assert prefill.broken_hull_orders(lp, hulled).keys().isdisjoint(broken)  # not found twice
    lp = build_model(hulled, relaxed=True)
    after = HeldRelaxation(lp, SolveOptions()).solve().objective
    assert after >= before * (1 - 1e-9)
    for (k, t), order in broken.items():
        row = lp.pool_hull[k, t, hulled.hull_orders[k, t].index(order)]
        assert row.body() <= 1e-6


@pytest.mark.parametrize("seed", range(2))
def test_the_presolve_with_found_orders_keeps_the_optimum(seed, monkeypatch):
    """The presolve adds the orders its LPs break, and at the end drops the configs its rounds
    bounded at 0 (the orders' config indices change); the program it leaves still has the
    whole program's optimum."""
    monkeypatch.setattr(prefill, "HULL_MAX_CLASSES", 1)
    resolved = resolve(parse_instance(_instance(seed)))
    data = program_data(resolved, enumerate_configs(resolved))
    whole = run_highs(build_model(data), SolveOptions(mip_gap=1e-9))
    reduced = presolve(data, SolveOptions(mip_gap=1e-9))
    assert reduced.data.hull_orders
    presolved = solve_program(data, SolveOptions(mip_gap=1e-9))
    assert presolved.outcome.objective == pytest.approx(whole.objective, rel=1e-7)


def test_a_class_without_demand_gets_a_zero_coefficient():
    """A period of multiplier 0, or a curve whose first replica carries nothing at its wait
    budget: no division by zero, and the class adds nothing to the rows."""
    curve = PoolCurve((0.0, 0.5, 0.9), 0.9)
    assert curve.replicas_at_least(0.0) == 0.0
    rows = list(hull_rows(curve, {"idle": 0.0, "busy": 1.0}, [("idle", "busy"), ("busy", "idle")]))
    assert [coefs[order.index("idle")] for order, coefs in rows] == [0.0, 0.0]
