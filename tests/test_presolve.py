"""The presolve (fleetopt/presolve.py) is exact: the program it leaves has the whole program's
optimum, and every plan no dearer than its incumbent — the whole program's optimum among
them — lies within the bounds it proves.

The reference is the whole program built as one model and solved by HiGHS without any presolve,
on seeded analytic instances (queueing, both serving modes, several tp sizes) with the limits
that change what a plan costs: whole nodes, an availability cap, a budget, price tiers.
"""

from __future__ import annotations

import dataclasses
import math
import time
from pathlib import Path

import pyomo.core as pyo
import pytest
import yaml
from helpers import seeded_instance

from fleetopt import pipeline, solve
from fleetopt import presolve as presolve_module
from fleetopt.catalog import resolve
from fleetopt.configs import enumerate_configs
from fleetopt.formulation import build_model
from fleetopt.formulation.blocks import independent_blocks
from fleetopt.formulation.data import GpuMarket, Period, ProgramData, Tiers
from fleetopt.formulation.model import replica_bounds
from fleetopt.formulation.sizing import columns
from fleetopt.formulation.tiers import cheapest_tiers
from fleetopt.instance import parse_instance
from fleetopt.pipeline import block_result, plan_fleet, program_data, solve_program
from fleetopt.presolve import (
    _affordable,
    _alone_plan,
    _arithmetic_bound,
    _bound_replicas,
    _cheapest_by_period,
    _cheapest_option,
    _edge,
    _merged_partition,
    _with_broken_orders,
    presolve,
)
from fleetopt.scaled_bound import scale_bound
from fleetopt.solve import HeldRelaxation, SolveOptions, run_highs
from fleetopt.verify import verify

EXACT = SolveOptions(mip_gap=1e-9)

LIMITS = {
    "plain": {},
    "whole nodes": {"nodes": True},
    "cap": {"cap": 3},
    "budget": {"objective": {"minimize": "cost", "budget_per_hour": 500.0}},
    "tiers": {
        "pricing": {"reserved_price_factor": 0.6, "spot_price_factor": 0.35},
        "demand_profile": {"period_hours": 1, "multipliers": [0.5, 1.0]},
    },
}


def _program(data: dict):
    resolved = resolve(parse_instance(data))
    return program_data(resolved, enumerate_configs(resolved))


@pytest.mark.parametrize("limits", list(LIMITS))
@pytest.mark.parametrize("seed", range(2))
def test_presolved_program_has_the_whole_programs_optimum(seed, limits):
    data = _program(seeded_instance(seed, LIMITS[limits]))
    whole = run_highs(build_model(data), EXACT)
    presolved = solve_program(data, EXACT)
    assert whole.status == presolved.outcome.status == "optimal"
    assert presolved.outcome.objective == pytest.approx(whole.objective, rel=1e-7)


@pytest.mark.parametrize("limits", list(LIMITS))
@pytest.mark.parametrize("seed", range(2))
def test_the_optimum_lies_within_the_proven_bounds(seed, limits):
    data = _program(seeded_instance(seed, LIMITS[limits]))
    model = build_model(data)
    assert run_highs(model, EXACT).status == "optimal"
    optimum = {key: round(pyo.value(var)) for key, var in model.x.items()}
    reduced = presolve(data, EXACT)
    assert reduced.incumbent is not None
    assert reduced.incumbent.outcome.objective >= pyo.value(model.objective) * (1 - 1e-9)
    kept = {k: i for i, k in enumerate(reduced.kept)}
    reduced_model = build_model(reduced.data)  # its bounds: what the presolve proved
    for (k, t), replicas in optimum.items():
        if replicas:
            assert k in kept, data.configs[k].key
            assert replicas <= reduced_model.replica_bound[kept[k], t], data.configs[k].key


@pytest.mark.parametrize("limits", list(LIMITS))
@pytest.mark.parametrize("seed", range(2))
def test_proven_bounds_are_never_above_the_demands(seed, limits):
    """`replica_bounds` takes a bound the presolve proved as it is, without the demand's."""
    reduced = presolve(_program(seeded_instance(seed, LIMITS[limits])), EXACT)
    demand = replica_bounds(dataclasses.replace(reduced.data, replica_bounds={}))
    assert reduced.data.replica_bounds
    assert replica_bounds(reduced.data) == reduced.data.replica_bounds
    for (k, t), bound in reduced.data.replica_bounds.items():
        assert bound <= demand[k, t], reduced.data.configs[k].key


def test_presolve_drops_configs_and_keeps_the_incumbent():
    """On a multi-class instance the incumbent proves most configs out; its own stay."""
    data = _program(seeded_instance(0, {}))
    reduced = presolve(data, EXACT)
    assert len(reduced.kept) < len(data.configs)
    used = {
        reduced.incumbent.configs[i] for (i, _), v in reduced.incumbent.model.x.items() if v.value
    }
    assert used <= set(reduced.kept)
    assert reduced.bound <= reduced.incumbent.outcome.objective


def test_throughput_program_is_kept_whole_and_starts_from_the_affordable_arithmetic_plan():
    """No bound on the scale prunes configs, but the program gets an incumbent — a plan of the
    program within the budget, at no smaller a scale than the largest one whose arithmetic
    plan the budget affords, which the whole program's optimum reaches at least — and a bound
    by arithmetic, which it does not pass."""
    budget = 50.0
    data = _program(
        {
            **seeded_instance(0, {}),
            "objective": {"maximize": "throughput", "budget_per_hour": budget},
        }
    )
    reduced = presolve(data, EXACT)
    assert reduced.kept == list(range(len(data.configs)))
    affordable, _, _ = _affordable(data, columns(data), lambda: False)
    assert _alone_plan(data.at_scale(affordable)) is not None
    assert _alone_plan(data.at_scale(affordable * (1 + 2**-10))) is None
    incumbent = reduced.incumbent.model
    assert pyo.value(incumbent.alpha) >= affordable * (1 - 1e-9)
    assert pyo.value(incumbent.cost_per_hour) <= budget * (1 + 1e-9)
    whole = build_model(data)
    outcome = run_highs(whole, EXACT)
    assert outcome.status == "optimal"
    assert pyo.value(whole.alpha) >= pyo.value(incumbent.alpha) * (1 - 1e-6)
    # The bound: each model's scaled LP's, or below it a scale where arithmetic prices every
    # fleet above the budget; past the optimum either way.
    by_lp = scale_bound(data, min(2 * affordable, data.demand_scale_limit or math.inf), EXACT)
    by_arithmetic = _arithmetic_bound(data.at_scale(reduced.bound), columns(data)) > budget
    assert by_arithmetic or reduced.bound == pytest.approx(max(by_lp, affordable), rel=1e-9)
    assert by_lp is not None and not by_arithmetic  # the LP's, tighter here
    assert reduced.bound >= pyo.value(whole.alpha) * (1 - 1e-9)


def test_the_arithmetic_plans_tiers_by_hand():
    """One GPU type at 1 $/h needing 4 then 2 GPUs over two equal periods; reserved at 0.6,
    spot at 0.35 for at most a quarter. Keeping R reserved: R = 0 pays 0.5·(3 + 0.35) + 0.5·2
    = 2.675 (a quarter of 2 GPUs is no whole spot GPU), R = 1 2.275, R = 2 1.2 + 0.5·(1 +
    0.35) = 1.875, R = 3 1.975, R = 4 2.4; on demand throughout 0.5·4 + 0.5·2 = 3."""
    market = GpuMarket("a", 1.0, None, None)
    config = dataclasses.replace(_program(seeded_instance(0, {})).configs[0], gpu="a", tp=1)
    periods = [Period(1.0, 1.0), Period(0.5, 1.0)]
    data = ProgramData([], [config], [market], periods=periods, tiers=Tiers(0.6, 0.35, 0.25))
    plan = {(0, 0): 4, (0, 1): 2}
    fleet = cheapest_tiers(data, plan)
    assert fleet.cost_per_hour == pytest.approx(1.875)
    assert fleet.gpus == {("a", 0): 4, ("a", 1): 2} and fleet.reserved == {"a": 2}
    assert fleet.spot == {("a", 0): 1, ("a", 1): 0}
    assert fleet.on_demand == {("a", 0): 1, ("a", 1): 0}
    on_demand = cheapest_tiers(dataclasses.replace(data, tiers=None), plan)
    assert on_demand.cost_per_hour == pytest.approx(3.0) and on_demand.gpus == fleet.gpus
    assert not on_demand.reserved and not on_demand.spot


TWO_MODELS = {"second_model": "mistral-7b"}
"""Half the classes served by a second model: a throughput program keeps both in one block."""


@pytest.mark.parametrize("limits", [*LIMITS, "two models in one block"])
@pytest.mark.parametrize("seed", range(2))
def test_the_arithmetic_plan_is_a_plan_of_the_program(seed, limits):
    """The presolve cuts by the arithmetic plan's objective and, short of time, starts HiGHS
    from its replicas: held at them (capped at the replica bounds where classes pool), the
    program has a plan no dearer than that objective, nor than its cost at the tiers
    `cheapest_tiers` picks (throughput mode's test of what a budget affords); with the GPUs in
    service and by tier held at that pick too, the same plan at that cost."""
    if limits in LIMITS:
        data = _program(seeded_instance(seed, LIMITS[limits]))
    else:  # one block of both models, as in throughput mode
        data = _program(seeded_instance(seed, TWO_MODELS, classes=4))
        data = dataclasses.replace(data, budget_per_hour=1e9)
    alone = _alone_plan(data)
    if alone is None:  # over a cap or the budget: no arithmetic plan, nothing cut by it
        assert limits in ("cap", "budget")
        return
    model = build_model(data)
    for (k, t), var in model.x.items():
        var.fix(min(alone.replicas.get((k, t), 0), model.replica_bound[k, t]))
    outcome = run_highs(model, EXACT)
    assert outcome.status == "optimal"
    assert outcome.objective <= alone.objective * (1 + 1e-9)
    tiered = cheapest_tiers(data, alone.replicas)
    assert pyo.value(model.cost_per_hour) <= tiered.cost_per_hour * (1 + 1e-9)
    assert tiered.cost_per_hour <= alone.objective
    for name in ("gpus", "reserved", "on_demand", "spot"):
        for key, value in getattr(tiered, name).items():
            getattr(model, name)[key].fix(value)
    assert run_highs(model, EXACT).status == "optimal"
    assert pyo.value(model.cost_per_hour) == pytest.approx(tiered.cost_per_hour, rel=1e-9)


@pytest.mark.parametrize("seed", [0, 1])
def test_each_models_classes_share_a_config_where_a_block_holds_several_models(seed):
    """No config carries the classes of two models, so where a block holds both (throughput
    mode, a budget) the arithmetic plan's way of pooling all classes on one config or pair
    is none; each model's classes together is, model by model (1.3 and 1.7 $/h less than
    every class alone on these seeds)."""
    data = _program(seeded_instance(seed, TWO_MODELS, classes=4))
    program = dataclasses.replace(data, budget_per_hour=1e9)  # one block, over no budget
    cheapest = _cheapest_by_period(program, columns(program))
    pick = {group: _cheapest_option(alone) for group, alone in cheapest[0].items()}

    def priced(groups: list[tuple[str, ...]]) -> float:
        return sum(cost for group in groups for cost, _, _ in pick[group])

    models = [
        tuple(c.name for c in data.classes if c.model == m) for m in ("llama-3.1-8b", "mistral-7b")
    ]
    by_model = sum(min(priced([model]), priced([(n,) for n in model])) for model in models)
    assert by_model < priced([(c.name,) for c in data.classes])
    tie_breaks = 0.01  # GPU_COUNT_TIE_BREAK on each of fewer than 100 GPUs and replicas
    assert by_model <= _alone_plan(program, cheapest).objective <= by_model + tie_breaks


@pytest.mark.parametrize("seed", [0, 1])
def test_classes_merged_greedily_are_a_plan_no_dearer_than_each_alone(seed):
    """`_merged_partition`: each class in one group, each group of one model, each merge a
    saving; the arithmetic plan on those groups alone is a plan of the program (held at its
    replicas, the program has one no dearer) and costs no more than every class alone."""
    data = _program(seeded_instance(seed, TWO_MODELS, classes=6))  # three classes a model
    program = dataclasses.replace(data, budget_per_hour=1e9)  # one block of both models
    cols = columns(program)
    cheapest = _cheapest_by_period(program, cols)
    partition = _merged_partition(program, cols, cheapest)
    assert sorted(n for group in partition for n in group) == sorted(cols.classes)
    model_of = {c.name: c.model for c in data.classes}
    assert all(len({model_of[n] for n in group}) == 1 for group in partition)
    assert len(partition) < len(cols.classes)  # these seeds pool some classes
    on_groups = _cheapest_by_period(program, cols, groups=partition)
    merged = _alone_plan(program, on_groups, [partition])
    alone = _alone_plan(program, cheapest, [[(n,) for n in cols.classes]])
    assert merged.objective <= alone.objective
    model = build_model(program)
    for (k, t), var in model.x.items():
        var.fix(min(merged.replicas.get((k, t), 0), model.replica_bound[k, t]))
    assert run_highs(model, EXACT).status == "optimal"
    assert pyo.value(model.cost_per_hour) <= cheapest_tiers(
        program, merged.replicas
    ).cost_per_hour * (1 + 1e-9)


@pytest.mark.parametrize("seed", [0, 1, 3])
def test_an_lp_bounded_in_place_solves_as_the_one_built_anew(seed):
    """The presolve's rounds change the held LP in place (replica bounds, the chords drawn to
    them, hull rows an LP broke) instead of building it again: it must be the LP of the
    program restricted to those bounds, so both solve to the same objective. (Seeds whose
    bounds below raise the LP's objective; on seed 2 another optimum escapes them.)"""
    data = _program(seeded_instance(seed, {}))
    lp = build_model(data, relaxed=True)
    held = HeldRelaxation(lp, EXACT)
    first = held.solve(primal=True)
    assert first is not None
    program = _with_broken_orders(data, lp, held)
    # A replica fewer than the LP used, and half the bound elsewhere: the optimum and chords move.
    bounds = {
        key: math.ceil(var.value - 1e-9) - 1 if var.value > 1e-9 else lp.replica_bound[key] // 2
        for key, var in lp.x.items()
    }
    _bound_replicas(held, lp, program, bounds)
    in_place = held.solve()
    kept = [k for k in range(len(program.configs)) if bounds[k, 0]]
    anew = HeldRelaxation(
        build_model(program.restricted(kept, bounds), relaxed=True), EXACT
    ).solve()
    assert in_place is not None and anew is not None
    assert in_place.objective == pytest.approx(anew.objective, rel=1e-9)
    assert in_place.objective > first.objective * (1 + 1e-6)


def test_a_held_lp_solves_within_what_is_left_of_the_limit():
    """Each solve of the presolve's LP had the whole limit on top of its building (the medium
    benchmark instance at a budget's scale: built in 7.4 s of a 16.9-s limit, then solved for
    19 s). HiGHS is now told what is left since `began`, at least a second."""
    lp = build_model(_program(seeded_instance(0, {})), relaxed=True)
    limits = []
    for spent in (0.0, 99.5):
        held = HeldRelaxation(lp, SolveOptions(time_limit=100.0), time.perf_counter() - spent)
        assert held.solve(primal=True) is not None
        highs = held.loaded.highs
        _, limit = highs.getOptionValue("time_limit")
        limits.append(limit - highs.getRunTime())
    assert limits[0] == pytest.approx(100.0, abs=0.5)
    assert limits[1] == pytest.approx(1.0, abs=0.05)  # 0.5 s left: the least a solve gets


TWO_PERIODS = {"demand_profile": {"period_hours": 1, "multipliers": [0.5, 1.0]}}
"""Two demand levels and nothing that couples them: two independent blocks."""


@pytest.mark.parametrize("seed", range(2))
def test_a_block_that_starts_with_no_time_left_answers_with_its_arithmetic_plan(seed):
    data = _program(seeded_instance(seed, {}))
    optimum = solve_program(data, EXACT).outcome.objective
    [block] = independent_blocks(data)
    late = block_result(block, SolveOptions(time_limit=60.0), deadline=time.monotonic() - 1.0)
    assert late.outcome.status == "feasible" and late.values is not None
    assert 0 < late.outcome.bound <= optimum * (1 + 1e-9) <= late.outcome.objective * (1 + 2e-9)
    assert late.outcome.objective <= _alone_plan(data).objective * (1 + 1e-9)


def test_a_first_lp_out_of_time_leaves_the_arithmetic_plan_as_the_incumbent(monkeypatch):
    data = _program(seeded_instance(0, {}))
    monkeypatch.setattr(HeldRelaxation, "solve", lambda self, primal=False: None)
    reduced = presolve(data, EXACT)
    assert reduced.incumbent is not None
    assert 0 < reduced.bound <= reduced.incumbent.outcome.objective
    assert reduced.incumbent.outcome.objective <= _alone_plan(data).objective * (1 + 1e-9)


def test_an_lp_whose_building_spends_the_time_is_not_solved(monkeypatch):
    """Fuzz seed 83 at `--time-limit 1`: building and handing over the presolve's LP took 1.8 s,
    and HiGHS then ran it for the second it is always granted, to no answer. Once the time is
    spent by the building, the LP is not solved: the arithmetic plan is the incumbent."""
    data = _program(seeded_instance(0, {}))

    def unasked(self, primal=False):
        raise AssertionError("the LP was solved after the time limit was spent")

    monkeypatch.setattr(HeldRelaxation, "solve", unasked)
    reduced = presolve(data, SolveOptions(time_limit=1e-9))
    assert reduced.incumbent is not None
    assert reduced.incumbent.outcome.objective <= _alone_plan(data).objective * (1 + 1e-9)


def test_a_program_too_large_to_build_in_the_time_left_is_not_built(monkeypatch):
    """Throughput mode on the large benchmark instance (one block of 24,151 configs × 23
    periods) built its whole program for minutes under a limit of 20 s, then ran out of
    memory. A program whose columns would take longer than the time left to build is not
    built: the presolve answers by arithmetic, the block with its incumbent. Here every
    column is priced at an hour, so that any program is too large for a limit of a minute."""
    data = _program(seeded_instance(0, {}))
    optimum = solve_program(data, EXACT).outcome.objective

    def unbuilt(data, relaxed=False):
        raise AssertionError("a program too large for the time left was built")

    monkeypatch.setattr(solve, "BUILD_SECONDS_PER_COLUMN", 3600.0)
    monkeypatch.setattr(pipeline, "build_model", unbuilt)
    answer = solve_program(data, SolveOptions(time_limit=60.0)).outcome
    assert answer.status == "feasible"
    assert answer.bound <= optimum * (1 + 1e-9) <= answer.objective * (1 + 2e-9)
    assert answer.objective <= _alone_plan(data).objective * (1 + 1e-9)


def test_a_program_highs_could_not_presolve_in_the_time_left_is_not_handed_over(monkeypatch):
    """The medium benchmark instance's whole throughput program under a limit of 60 s: built
    and handed over, then HiGHS presolved it for 38 s of a 41-s share, which it does
    not interrupt. The last program is handed over only where the time left covers HiGHS's
    presolve too; else the presolve's incumbent answers (here every column's presolve is
    priced at an hour; the presolve's own LP, which HiGHS does not presolve so, is built)."""
    data = _program(seeded_instance(0, {}))
    optimum = solve_program(data, EXACT).outcome.objective
    built = []

    def unbuilt(data, relaxed=False):
        raise AssertionError("a program HiGHS could not presolve in the time left was built")

    monkeypatch.setattr(solve, "PRESOLVE_SECONDS_PER_COLUMN", 3600.0)
    monkeypatch.setattr(pipeline, "build_model", unbuilt)
    original = presolve_module.build_model
    monkeypatch.setattr(
        presolve_module, "build_model", lambda *a, **k: built.append(1) or original(*a, **k)
    )
    answer = solve_program(data, SolveOptions(time_limit=60.0)).outcome
    assert built, "the presolve's LP and restricted program are built as before"
    assert answer.status == "feasible"
    assert answer.bound <= optimum * (1 + 1e-9) <= answer.objective * (1 + 2e-9)


def test_the_scale_search_stops_at_the_time_limit_with_what_it_found():
    """`_edge` on a monotone test: out of time, the last scale that fits still fits, and the
    first that does not is known only where one failed."""

    def fits(scale: float) -> float | None:
        return scale if scale <= 5.0 else None

    low, high, found = _edge(fits, 1.0, 1.0, 1e6, lambda: False)
    assert low <= 5.0 < high and high - low < 5.0 * 2**-10 and found == low
    asked = []
    low, high, _ = _edge(fits, 1.0, 1.0, 1e6, lambda: asked.append(1) or len(asked) > 2)
    assert (low, high) == (4.0, None)  # 2 and 4 fit; out of time before 8 was tried
    asked.clear()
    low, high, _ = _edge(fits, 1.0, 1.0, 1e6, lambda: asked.append(1) or len(asked) > 5)
    assert low <= 5.0 < high <= 8.0


def test_a_time_limit_spent_before_any_block_starts_still_gives_a_verified_plan(monkeypatch):
    """Blocks that start past the deadline ask HiGHS only to complete their arithmetic plans
    (`COMPLETE_SECONDS`), and the plan is verified all the same."""
    instance = parse_instance(seeded_instance(0, TWO_PERIODS))
    optimum = plan_fleet(instance, EXACT).cost_per_hour
    limits = []

    def recorded(model, options, start=None):
        limits.append(options.time_limit)
        return run_highs(model, options, start)

    monkeypatch.setattr(presolve_module, "run_highs", recorded)
    hurried = plan_fleet(instance, SolveOptions(time_limit=1e-12))  # verified, or it raises
    assert limits and all(limit == presolve_module.COMPLETE_SECONDS for limit in limits)
    assert hurried.status == "feasible"
    assert hurried.objective_bound <= optimum * (1 + 1e-9) <= hurried.cost_per_hour * (1 + 2e-9)


def test_a_period_without_demand_answers_by_arithmetic_too():
    """Fuzz seed 50 under `--time-limit 2`: a period of multiplier 0 that started late had an
    arithmetic plan of zero replicas on a config its own cut had dropped (KeyError), and then a
    program of no configs to bound (IndexError). Now it answers with the empty fleet."""
    quiet = {"demand_profile": {"period_hours": 1, "multipliers": [0.0, 1.0]}}
    instance = parse_instance(seeded_instance(0, quiet))
    optimum = plan_fleet(instance, EXACT).cost_per_hour
    hurried = plan_fleet(instance, SolveOptions(time_limit=1e-12))  # verified, or it raises
    assert hurried.periods[0].gpus == {} or not any(hurried.periods[0].gpus.values())
    assert hurried.objective_bound <= optimum * (1 + 1e-9) <= hurried.cost_per_hour * (1 + 2e-9)


def test_each_block_leaves_time_for_the_blocks_to_come(monkeypatch):
    data = _program(seeded_instance(0, TWO_PERIODS))
    limits, solve = [], pipeline.solve_block

    def recorded(block, options, late=False, cols=None, scaled=frozenset()):
        limits.append(options.time_limit)
        return solve(block, options, late, cols, scaled)

    monkeypatch.setattr(pipeline, "solve_block", recorded)
    solve_program(data, SolveOptions(time_limit=5.0))
    assert len(limits) == 2
    # The first keeps a second for the one to come; the second has what the first left.
    assert limits[0] == pytest.approx(5.0 - pipeline.BLOCK_SECONDS, abs=0.1)
    assert pipeline.BLOCK_SECONDS <= limits[1] <= 5.0


def test_a_block_left_too_little_for_its_lp_answers_with_its_arithmetic_plan(monkeypatch):
    """Less than BLOCK_SECONDS once the later blocks' reserve is kept: the first of two blocks
    answers at once; the last keeps no reserve and has its LP."""
    data = _program(seeded_instance(0, TWO_PERIODS))
    late, solve = [], pipeline.solve_block

    def recorded(block, options, is_late=False, cols=None, scaled=frozenset()):
        late.append(is_late)
        return solve(block, options, is_late, cols, scaled)

    monkeypatch.setattr(pipeline, "solve_block", recorded)
    limit = pipeline.BLOCK_SECONDS + pipeline.LATE_SECONDS / 2
    solved = solve_program(data, SolveOptions(time_limit=limit))
    assert late == [True, False]
    assert solved.outcome.status == "feasible" and solved.outcome.gap is not None


RESERVED_BELOW_SPOT = {
    "pricing": {"reserved_price_factor": 0.3, "spot_price_factor": 0.9},
    "demand_profile": {"period_hours": 1, "multipliers": [1.0, 1.0, 0.9, 1.0]},
}
"""Reserved GPUs far cheaper than spot over hours of flat demand: each hour's least weight of a
GPU (spot's, 0.9 of an hour) summed over the hours passes what one reserved GPU costs (0.3)."""


@pytest.mark.parametrize("limits", [*LIMITS, "reserved below spot"])
@pytest.mark.parametrize("seed", range(3))
def test_the_arithmetic_bound_is_a_bound(seed, limits):
    data = _program(seeded_instance(seed, LIMITS.get(limits, RESERVED_BELOW_SPOT)))
    optimum = solve_program(data, EXACT).outcome.objective
    bound = _arithmetic_bound(data, columns(data))
    assert 0 < bound <= optimum * (1 + 1e-9)
    # It prices a relaxation of the LP's rows (the chord among them): never above the LP.
    assert bound <= presolve(data, EXACT).bound * (1 + 1e-9)


def test_caps_that_break_every_arithmetic_plan_still_leave_an_incumbent():
    """Four classes of llama-3.1-8b on four GPU types, two of them capped (fuzz seed 663, its
    peak period): each class alone on its cheapest config breaks a cap, and the configs the LP
    uses round to no plan within the caps, so the presolve had no incumbent and HiGHS, on the
    whole block of 24,000 rows, none either within 20 s (exit 1). The restricted program then
    takes the cheapest configs on every GPU type too, which mix around the caps."""
    path = Path(__file__).parent / "data" / "caps_break_every_arithmetic_plan.yaml"
    instance = parse_instance(yaml.safe_load(path.read_text()))
    resolved = resolve(instance)
    config_set = enumerate_configs(resolved)
    data = program_data(resolved, config_set)
    assert _alone_plan(data) is None
    options = SolveOptions(time_limit=3.0)
    reduced = presolve(data, options)
    assert reduced.incumbent is not None
    assert reduced.incumbent.outcome.objective >= reduced.bound * (1 - 1e-9)
    plan = plan_fleet(instance, options, (resolved, config_set))
    assert plan.cost_per_hour >= reduced.bound * (1 - 1e-9)
    assert not verify(plan, resolved)
