"""The one-way flow: instance → catalog → perf → configs → formulation → solve → plan → verify."""

from __future__ import annotations

import dataclasses

import pyomo.environ as pyo

from fleetopt.catalog import Resolved, resolve
from fleetopt.configs import ConfigSet, enumerate_configs, limits_of
from fleetopt.diagnose import blocked_classes
from fleetopt.errors import FleetoptError, InfeasibleError, VerificationError
from fleetopt.extract import extract_plan
from fleetopt.formulation import build_model
from fleetopt.formulation.data import GpuMarket, Period, ProgramData, Tiers
from fleetopt.instance import Instance, Pricing
from fleetopt.plan import Plan
from fleetopt.solve import SolveOptions, run_highs
from fleetopt.verify import verify


def plan_fleet(instance: Instance, options: SolveOptions | None = None) -> Plan:
    """Cheapest fleet (or most throughput for the budget) that meets every target, verified."""
    options = options or SolveOptions()
    resolved = resolve(instance)
    config_set = enumerate_configs(resolved)
    blocked = blocked_classes(config_set, resolved)
    if blocked:
        raise InfeasibleError("infeasible: " + " | ".join(blocked))
    data = program_data(resolved, config_set)
    model = build_model(data)
    outcome = run_highs(model, options)
    if outcome.status == "infeasible":
        raise InfeasibleError(explain_limits(resolved, config_set, options))
    if outcome.status == "no_solution":
        raise FleetoptError(
            f"no fleet found within the time limit ({options.time_limit} s); raise --time-limit"
        )
    if data.maximize_throughput and pyo.value(model.alpha) <= 1e-9:
        raise InfeasibleError(
            f"infeasible: the budget of {data.budget_per_hour:,.2f} $/h (objective.budget_per_hour) "
            "buys no fleet that serves any of the demand within its targets; raise the budget"
        )
    periods, schedule = period_schedule(instance)
    tiered = instance.demand_profile is not None or instance.pricing is not None
    plan = extract_plan(
        instance.name, data, model, outcome, limits_of(resolved), schedule if tiered else None
    )
    if tiered and not data.maximize_throughput:
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
    model = build_model(data)
    outcome = run_highs(model, options)
    return None if outcome.objective is None else round(pyo.value(model.cost_per_hour), 9)


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
