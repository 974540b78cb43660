"""The one-way flow: instance → catalog → perf → configs → formulation → solve → plan → verify."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

import pyomo.environ as pyo
from pyomo.common.gc_manager import PauseGC

from fleetopt.catalog import Resolved, resolve
from fleetopt.configs import ConfigSet, enumerate_configs, limits_of
from fleetopt.diagnose import blocked_classes
from fleetopt.errors import FleetoptError, InfeasibleError, Interrupted, VerificationError
from fleetopt.extract import extract_plan
from fleetopt.formulation import build_model
from fleetopt.formulation.blocks import (
    Solution,
    add_block,
    empty_solution,
    finish,
    independent_blocks,
    whole_block,
)
from fleetopt.formulation.data import GpuMarket, Period, ProgramData, Tiers
from fleetopt.instance import Instance, Pricing
from fleetopt.plan import Plan
from fleetopt.solve import Outcome, SolveOptions, run_highs
from fleetopt.verify import verify


def plan_fleet(instance: Instance, options: SolveOptions | None = None) -> Plan:
    """Cheapest fleet (or most throughput for the budget) that meets every target, verified."""
    options = options or SolveOptions()
    if any(w.from_data for w in instance.workloads):  # split into length buckets first
        from fleetopt.workload.routing import plan_length_routing

        return plan_length_routing(instance, options, plan_fleet)
    resolved = resolve(instance)
    config_set = enumerate_configs(resolved)
    blocked = blocked_classes(config_set, resolved)
    if blocked:
        raise InfeasibleError("infeasible: " + " | ".join(blocked))
    data = program_data(resolved, config_set)
    solved = solve_program(data, options)
    outcome = solved.outcome
    if outcome.status == "infeasible":
        raise InfeasibleError(explain_limits(resolved, config_set, options))
    if outcome.status == "no_solution":
        raise FleetoptError(
            f"no fleet found within the time limit ({options.time_limit} s); raise --time-limit"
        )
    if data.maximize_throughput and solved.solution.alpha <= 1e-9:
        raise InfeasibleError(
            f"infeasible: the budget of {data.budget_per_hour:,.2f} $/h (objective.budget_per_hour) "
            "buys no fleet that serves any of the demand within its targets; raise the budget"
        )
    periods, schedule = period_schedule(instance)
    tiered = instance.demand_profile is not None or instance.pricing is not None
    plan = extract_plan(
        instance.name,
        data,
        solved.solution,
        outcome,
        limits_of(resolved),
        schedule if tiered else None,
    )
    plan.interrupted = outcome.interrupted
    if tiered and not data.maximize_throughput and not outcome.interrupted:
        plan.peak_sized_cost_per_hour = _peak_sized_cost(resolved, config_set, periods, options)
    problems = verify(plan, resolved)
    if problems:
        raise VerificationError("plan failed verification: " + "; ".join(problems[:5]))
    return plan


def period_schedule(instance: Instance) -> tuple[list[Period], list[int]]:
    """The program's periods — one per distinct demand level, carrying all its hours, since
    periods of equal demand have the same best fleet — and, for each period of the profile,
    the program period that serves it."""
    profile = instance.demand_profile
    if profile is None:
        return [Period()], [0]
    levels: dict[float, int] = {}
    schedule = [levels.setdefault(m, len(levels)) for m in profile.multipliers]
    periods = [Period(m, profile.period_hours * profile.multipliers.count(m)) for m in levels]
    return periods, schedule


def _peak_sized_cost(
    resolved: Resolved, config_set: ConfigSet, periods: list[Period], options: SolveOptions
) -> float | None:
    """$/h of one fleet sized for the peak period and paid on demand around the clock."""
    peak = max(p.multiplier for p in periods)
    data = dataclasses.replace(
        program_data(resolved, config_set), periods=[Period(peak, 1.0)], tiers=None
    )
    solved = solve_program(data, options)
    return None if solved.solution is None else round(solved.solution.cost_per_hour, 9)


@dataclass(frozen=True)
class Stats:
    """Where a solve's time went, summed over its blocks (benchmarks/scale.py prints these)."""

    blocks: int = 0
    variables: int = 0
    constraints: int = 0
    build_seconds: float = 0.0
    """Pyomo model construction."""
    handoff_seconds: float = 0.0
    """Pyomo handing the model to HiGHS and reading the solution back."""
    solve_seconds: float = 0.0
    """HiGHS itself."""

    def add(self, model: pyo.ConcreteModel, build: float, outcome: Outcome) -> Stats:
        highs = outcome.seconds if outcome.highs_seconds is None else outcome.highs_seconds
        return Stats(
            self.blocks + 1,
            self.variables + model.nvariables(),
            self.constraints + model.nconstraints(),
            self.build_seconds + build,
            self.handoff_seconds + outcome.seconds - highs,
            self.solve_seconds + highs,
        )


@dataclass(frozen=True)
class Solved:
    solution: Solution | None
    """None when a block is infeasible or has no incumbent."""
    outcome: Outcome
    stats: Stats


def solve_program(data: ProgramData, options: SolveOptions, split: bool = True) -> Solved:
    """Solve the program block by block (formulation/blocks.py: exact) and merge the values;
    `split=False` solves it as one model (benchmarks/scale.py --whole measures the difference).

    The time limit is for the whole: each block gets what the ones before it left."""
    start = time.perf_counter()
    blocks = independent_blocks(data) if split else [whole_block(data)]
    whole, stats, outcomes = empty_solution(data), Stats(), []
    # A build allocates objects by the million: collect once, after (as Pyomo's writers do).
    with PauseGC():
        for i, block in enumerate(blocks):
            built = time.perf_counter()
            model = build_model(block.data)
            build = time.perf_counter() - built
            left = options.time_limit
            if left is not None:
                left = max(left - (time.perf_counter() - start), 1.0)
            outcome = run_highs(model, dataclasses.replace(options, time_limit=left))
            stats = stats.add(model, build, outcome)
            outcomes.append((block.data.total_hours / data.total_hours, outcome))
            if outcome.status in ("infeasible", "no_solution"):
                return Solved(None, outcome, stats)
            if outcome.interrupted and i + 1 < len(blocks):
                raise Interrupted(f"interrupted after {i + 1} of {len(blocks)} independent blocks")
            add_block(whole, block, model)
    return Solved(finish(whole, data), merge_outcomes(outcomes), stats)


def merge_outcomes(weighted: list[tuple[float, Outcome]]) -> Outcome:
    """One outcome for blocks whose objectives add up with these weights."""
    if len(weighted) == 1:
        return weighted[0][1]
    outcomes = [o for _, o in weighted]
    objective = sum(w * o.objective for w, o in weighted)
    bounds = [o.bound for o in outcomes]
    bound = None if None in bounds else sum(w * o.bound for w, o in weighted)
    gap = None if bound is None else abs(objective - bound) / max(abs(objective), 1e-12)
    proven = all(o.status == "optimal" for o in outcomes)
    return Outcome(
        "optimal" if proven else "feasible",
        objective,
        bound,
        gap,
        sum(o.seconds for o in outcomes),
        any(o.interrupted for o in outcomes),
        sum(o.highs_seconds or 0.0 for o in outcomes),
    )


def program_data(resolved: Resolved, config_set: ConfigSet) -> ProgramData:
    objective = resolved.instance.objective
    return ProgramData(
        classes=config_set.classes,
        configs=config_set.configs,
        gpus=[
            GpuMarket(
                g.name,
                g.price_per_gpu_hour,
                g.max_gpus,
                g.gpus_per_node,
            )
            for g in resolved.gpus.values()
        ],
        maximize_throughput=objective.maximize is not None,
        budget_per_hour=objective.budget_per_hour,
        periods=period_schedule(resolved.instance)[0],
        tiers=_tiers(resolved.instance.pricing),
    )


def _tiers(pricing: Pricing | None) -> Tiers | None:
    if pricing is None:
        return None
    return Tiers(
        pricing.reserved_price_factor, pricing.spot_price_factor, pricing.spot_max_fraction
    )


def explain_limits(resolved: Resolved, config_set: ConfigSet, options: SolveOptions) -> str:
    """Every class has a config, so the limits block: HiGHS's IIS names the caps, whole nodes or
    budget in conflict, and its feasibility relaxation sizes the smallest fix (conflict.py)."""
    from fleetopt.conflict import explain_conflict

    data = program_data(resolved, config_set)
    return explain_conflict(data, build_model(data), options)
