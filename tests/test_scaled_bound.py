"""One LP bounds every period block of a group of models (fleetopt/scaled_bound.py): its
optimum at multiplier 1, times a period's multiplier, is at most that period's optimum.

Checked on seeded analytic instances (queueing, both serving modes, two tp sizes, caps and whole
nodes, which the bound drops) against the program's own LP relaxation built in Pyomo and
reduced the same way, and against each period's proven optimum.
"""

from __future__ import annotations

import time

import numpy as np
import pyomo.core as pyo
import pytest
from helpers import seeded_instance

from fleetopt import presolve, scaled_bound
from fleetopt.catalog import resolve
from fleetopt.configs import enumerate_configs
from fleetopt.formulation import build_model
from fleetopt.formulation.blocks import block_parts, cut_block, split_by_period
from fleetopt.formulation.sizing import columns
from fleetopt.instance import parse_instance
from fleetopt.pipeline import block_result, program_data, solve_program
from fleetopt.scaled_bound import Level, ScaledLp, level_multipliers, scale_bound, scaled_lp
from fleetopt.solve import HeldRelaxation, MatrixLp, SolveOptions, run_highs

EXACT = SolveOptions(mip_gap=1e-9)
MULTIPLIERS = [0.35, 1.0, 0.6, 0.8]


def _program(seed: int, limits: str = ""):
    profile = {"demand_profile": {"period_hours": 1, "multipliers": MULTIPLIERS}}
    extra = {"cap": {"cap": 4}, "nodes": {"nodes": True}}.get(limits, {})
    data = seeded_instance(seed, profile | extra, classes=3)
    resolved = resolve(parse_instance(data))
    return program_data(resolved, enumerate_configs(resolved))


def _group(data):
    """The model's blocks over every period, as one block."""
    parts = block_parts(data)
    ((models, periods),) = split_by_period(parts, list(range(len(parts))))
    return cut_block(data, models, periods).data


def _period_relaxation(data, t: int, hull: bool) -> float:
    """`build_model(relaxed=True)` of period t without the replica bounds and the GPU caps, and
    without the pooling hull's rows unless `hull`."""
    lp = build_model(cut_block(data, frozenset({"llama-3.1-8b"}), [t]).data, relaxed=True)
    for var in lp.x.values():
        var.setub(None)
    for name in ("gpu_cap",) if hull else ("pool_hull", "gpu_cap"):
        if hasattr(lp, name):
            getattr(lp, name).deactivate()
    return HeldRelaxation(lp, EXACT).solve(primal=True).objective


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("limits", ["", "cap", "nodes"])
def test_each_level_is_the_programs_relaxation_less_what_demand_sets(monkeypatch, seed, limits):
    """At each level's period (here every period: each demand is below 0.85 of the last), the
    LP from the arrays, re-solved with that period's chords, is `build_model(relaxed=True)` of
    that period without the replica bounds, the hull rows and the GPU caps: the same optimum.
    With the hull rows it breaks (drawn at its level or a busier one's), it lies between that
    and the same LP with every hull row of its period, above the first on some levels."""
    data = _group(_program(seed, limits))
    hulled = scaled_lp(data, columns(data), EXACT).levels
    monkeypatch.setattr(scaled_bound, "HULL_ROUNDS", 0)
    levels = scaled_lp(data, columns(data), EXACT).levels
    assert [level.multiplier for level in levels] == sorted(MULTIPLIERS, reverse=True)
    per_multiplier = [level.per_multiplier for level in levels]
    assert per_multiplier == sorted(per_multiplier)  # quieter chords never carry more
    raised = 0
    for level, with_hull in zip(levels, hulled, strict=True):
        t = MULTIPLIERS.index(level.multiplier)
        plain = _period_relaxation(data, t, hull=False)
        assert level.per_multiplier * level.multiplier == pytest.approx(plain, rel=1e-7)
        assert with_hull.used == level.used
        scaled = with_hull.per_multiplier * level.multiplier
        assert plain * (1 - 1e-9) <= scaled <= _period_relaxation(data, t, hull=True) * (1 + 1e-7)
        raised += scaled > plain * (1 + 1e-6)
    assert raised > 0


def test_levels_start_at_the_busiest_period_and_each_bounds_the_periods_below_it():
    assert level_multipliers([0.5, 1.0, 0.9, 0.84, 0.7, 0.3, 0.84]) == [1.0, 0.84, 0.7, 0.5, 0.3]
    assert level_multipliers([0.6]) == [0.6]
    levels = ScaledLp(tuple(Level(m, 10.0 * m, frozenset({i})) for i, m in enumerate([1.0, 0.5])))
    assert [levels.at(m).multiplier for m in (1.0, 0.9, 0.5, 0.2)] == [1.0, 1.0, 0.5, 0.5]
    data = _group(_program(0))
    assert scaled_lp(data, columns(data), SolveOptions(time_limit=0.0)) is None  # no time left


@pytest.mark.parametrize("seed", range(2))  # seed 2's periods take a minute to prove
@pytest.mark.parametrize("limits", ["", "cap", "nodes"])
def test_the_scaled_bound_is_at_most_every_periods_optimum_and_lp(seed, limits):
    program = _program(seed, limits)
    data = _group(program)
    lp = scaled_lp(data, columns(data), EXACT)
    for t, period in enumerate(program.periods):
        unit = lp.at(period.multiplier).per_multiplier
        assert unit > 0
        block = cut_block(program, frozenset({"llama-3.1-8b"}), [t]).data
        optimum = run_highs(build_model(block), EXACT)
        relaxation = HeldRelaxation(build_model(block, relaxed=True), EXACT).solve(primal=True)
        assert optimum.status == "optimal"
        assert period.multiplier * unit <= relaxation.objective * (1 + 1e-9)
        assert period.multiplier * unit <= optimum.objective * (1 + 1e-9)


def test_a_time_limit_over_many_blocks_bounds_each_period_by_the_scaled_lp():
    """With more blocks than jobs and a time limit, the merged bound counts each period's
    scaled bound where it is the higher: at least their hour-weighted sum, at most the plan."""
    program = _program(0)
    data = _group(program)
    lp = scaled_lp(data, columns(data), EXACT)
    solved = solve_program(program, SolveOptions(mip_gap=1e-9, time_limit=600))
    hours = program.total_hours
    periods = program.periods
    scaled = sum(
        p.hours / hours * p.multiplier * lp.at(p.multiplier).per_multiplier for p in periods
    )
    assert solved.outcome.status == "optimal"
    assert scaled * (1 - 1e-9) <= solved.outcome.bound <= solved.outcome.objective * (1 + 1e-9)
    assert solved.stats.presolve_seconds > 0


def test_only_a_group_split_into_periods_shares_a_bound():
    """One LP per group of models split into several period blocks, none where a group is one
    block (price tiers link its periods)."""
    parts = [
        (frozenset({"a"}), [0]),
        (frozenset({"b"}), [0, 1]),
        (frozenset({"a"}), [2]),
        (frozenset({"a"}), [1]),
    ]
    assert split_by_period(parts, [3, 1, 0, 2]) == [(frozenset({"a"}), [0, 1, 2])]


@pytest.mark.parametrize("late", [True, False])
def test_a_block_consolidates_on_the_configs_its_groups_lp_uses(monkeypatch, late):
    """A block started once its group's scaled LP is known offers its restricted program the
    configs that LP uses, beside the cheapest alone: with no time for its own LP, still a plan
    no dearer than the arithmetic one, within the bounds; with time, the block's optimum."""
    program = _program(0)
    data = _group(program)
    used = scaled_lp(data, columns(data), EXACT).at(program.periods[0].multiplier).used
    offered, restricted = [], presolve._restricted

    def recorded(data, lp, options, consolidating, spent, start=None):
        offered.append({data.configs[k].key for k in consolidating})
        return restricted(data, lp, options, consolidating, spent, start)

    monkeypatch.setattr(presolve, "_restricted", recorded)
    block = cut_block(program, frozenset({"llama-3.1-8b"}), [0])
    optimum = run_highs(build_model(block.data), EXACT).objective
    deadline = time.monotonic() + (-1.0 if late else 600.0)
    result = block_result(block, EXACT, deadline=deadline, scaled=used)
    assert {block.data.configs[k].key for k in used} <= offered[0]  # none dearer than U₀ here
    if late:
        assert result.outcome.status == "feasible"
        assert result.outcome.bound <= optimum * (1 + 1e-9) <= result.outcome.objective * (1 + 2e-9)
        assert result.outcome.objective <= presolve._alone_plan(block.data).objective * (1 + 1e-9)
    else:
        assert result.outcome.status == "optimal"
        assert result.outcome.objective == pytest.approx(optimum, rel=1e-7)


def test_workers_handed_blocks_as_they_free_up_reach_the_same_optimum():
    """Under a time limit the blocks go to the workers as they free up (after the scaled LPs):
    the same optimum and bound as solved one by one here. (A block handed out before its
    group's LP is in consolidates on fewer configs, so among plans of equal cost it may find
    another.)"""
    program = _program(1)
    here, workers = (
        solve_program(program, SolveOptions(mip_gap=1e-9, time_limit=600, jobs=jobs))
        for jobs in (1, 2)
    )
    assert here.outcome.status == workers.outcome.status == "optimal"
    assert workers.outcome.objective == pytest.approx(here.outcome.objective, rel=2e-9)
    assert workers.outcome.bound == pytest.approx(here.outcome.bound, rel=2e-9)


RESERVED_BELOW_SPOT = {"reserved_price_factor": 0.3, "spot_price_factor": 0.9}


@pytest.mark.parametrize("pricing", [None, RESERVED_BELOW_SPOT])
@pytest.mark.parametrize("seed", range(2))
def test_the_scale_bound_is_never_below_the_optimum(seed, pricing):
    """Throughput mode's bound by each model's scaled LP (`scale_bound`), against the whole
    program's optimum: two models over periods of other demand, on demand or with reserved GPUs
    cheaper than spot (a reserved GPU serves every period for one price). The optimum to a gap
    of 1e-4: the bound passes the plan, and so does the LP's again at each scale found, which
    is tighter."""
    limits = {
        "second_model": "mistral-7b",
        "demand_profile": {"period_hours": 1, "multipliers": [0.6, 1.0]},
        "objective": {"maximize": "throughput", "budget_per_hour": 8.0},
    }
    if pricing:
        limits["pricing"] = pricing
    resolved = resolve(parse_instance(seeded_instance(seed, limits)))
    data = program_data(resolved, enumerate_configs(resolved))
    whole = build_model(data)
    assert run_highs(whole, SolveOptions(mip_gap=1e-4)).status == "optimal"
    optimum = pyo.value(whole.alpha)
    bound = scale_bound(data, 2 * optimum, SolveOptions())
    assert bound is not None  # it proves a scale below twice the optimum out
    once = scaled_bound._bound_at(data, 2 * optimum, SolveOptions(), None)
    assert optimum * (1 - 1e-9) <= bound < once < 2 * optimum  # 1-3% tighter here


@pytest.mark.parametrize("seed", range(3))
def test_what_a_replica_earns_is_at_most_its_one_resource_bound(seed):
    """`_earns` prices a config's columns for the generated LP: it may say a config pays where
    it does not, never the reverse, so it must never fall below what one replica earns at the
    coverage duals — max Σ_c w_c·r_c over Σ_c u_cρ·r_c ≤ cap_ρ, each config's own small LP
    (here solved by HiGHS) — and it equals it where a config carries one class."""
    data = _group(_program(seed))
    cols = columns(data)
    rng = np.random.default_rng(seed)
    worth = rng.uniform(0.0, 3.0, cols.carries.shape) * (rng.random(cols.carries.shape) < 0.8)
    earns = scaled_bound._earns(cols, cols.capacity, worth)
    for k in rng.choice(len(data.configs), 60, replace=False).tolist():
        carried = np.flatnonzero(cols.carries[k])
        held = np.flatnonzero(np.isfinite(cols.capacity[k]))
        usage = cols.usage[k][np.ix_(carried, held)]  # [c, ρ]
        rows, columns_ = np.nonzero(usage.T)
        small = MatrixLp(
            -worth[k, carried],
            np.full(len(held), -np.inf),
            cols.capacity[k, held],
            (rows, columns_, usage.T[rows, columns_]),
        ).solve(EXACT)
        assert small is not None
        assert earns[k] >= -small[0] * (1 - 1e-9) - 1e-9
        if len(carried) == 1:
            assert earns[k] == pytest.approx(-small[0], rel=1e-9)


@pytest.mark.parametrize("seed", range(3))
def test_the_lp_generated_from_a_few_configs_is_the_lp_of_all(monkeypatch, seed):
    """Solved from the cheapest config of each class and side (at most two a class), adding
    those that pay at each round's duals, every level reaches the optimum of the LP solved on
    every config at once. Without the hull rows' rounds: the rows a level gets are those its
    solution breaks, and two solutions of equal cost may break different rows (seed 1's peak
    level ended at 9.00861 and 9.00851 $/h with them, after a change of 6e-9 in its pooling
    curves' increments)."""
    monkeypatch.setattr(scaled_bound, "HULL_ROUNDS", 0)
    data = _group(_program(seed))
    cheapest_alone, started = scaled_bound._cheapest_alone, []

    def recorded(*args):
        started.append(int(cheapest_alone(*args).sum()))
        return cheapest_alone(*args)

    monkeypatch.setattr(scaled_bound, "_cheapest_alone", recorded)
    generated = scaled_lp(data, columns(data), EXACT).levels
    assert 0 < started[0] <= 2 * len(data.classes) < len(data.configs)
    everything = np.ones(len(data.configs), dtype=bool)
    monkeypatch.setattr(scaled_bound, "_cheapest_alone", lambda *args: everything)
    whole = scaled_lp(data, columns(data), EXACT).levels
    assert [level.multiplier for level in generated] == [level.multiplier for level in whole]
    for ours, all_of_them in zip(generated, whole, strict=True):
        assert ours.per_multiplier == pytest.approx(all_of_them.per_multiplier, rel=1e-7)
