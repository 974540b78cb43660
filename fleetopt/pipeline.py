"""The one-way flow: instance → catalog → perf → configs → formulation → solve → plan → verify."""

from __future__ import annotations

import dataclasses

from fleetopt.catalog import Resolved, resolve
from fleetopt.configs import ConfigSet, enumerate_configs, limits_of
from fleetopt.diagnose import blocked_classes
from fleetopt.errors import FleetoptError, InfeasibleError, InputError, VerificationError
from fleetopt.extract import extract_plan
from fleetopt.formulation import build_model
from fleetopt.formulation.data import GpuMarket, ProgramData
from fleetopt.instance import Instance
from fleetopt.plan import Plan
from fleetopt.solve import SolveOptions, run_highs
from fleetopt.verify import verify


def plan_fleet(instance: Instance, options: SolveOptions | None = None) -> Plan:
    """Cheapest fleet (or most throughput for the budget) that meets every target, verified."""
    options = options or SolveOptions()
    refuse_unmodelled(instance)
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
    plan = extract_plan(instance.name, data, model, outcome, limits_of(resolved))
    problems = verify(plan, resolved)
    if problems:
        raise VerificationError("plan failed verification: " + "; ".join(problems[:5]))
    return plan


def refuse_unmodelled(instance: Instance) -> None:
    """Fields of the contract the program does not model yet: stop rather than ignore them."""
    for field in ("demand_profile", "pricing"):
        if getattr(instance, field) is not None:
            raise InputError(
                f"{field}: periods and price tiers are not modelled yet; remove `{field}` to "
                "plan for one period at on-demand prices"
            )


def program_data(
    resolved: Resolved, config_set: ConfigSet, with_limits: bool = True
) -> ProgramData:
    objective = resolved.instance.objective
    return ProgramData(
        classes=config_set.classes,
        configs=config_set.configs,
        gpus=[
            GpuMarket(
                g.name,
                g.price_per_gpu_hour,
                g.max_gpus if with_limits else None,
                g.gpus_per_node,
            )
            for g in resolved.gpus.values()
        ],
        maximize_throughput=objective.maximize is not None,
        budget_per_hour=objective.budget_per_hour if with_limits else None,
    )


def explain_limits(resolved: Resolved, config_set: ConfigSet, options: SolveOptions) -> str:
    """Every class has a config, so the caps or the budget block: solve without them and say
    how far the cheapest fleet overshoots each."""
    data = program_data(resolved, config_set, with_limits=False)
    if data.maximize_throughput:
        return "infeasible: the budget buys no replica of any config"
    model = build_model(data)
    outcome = run_highs(model, dataclasses.replace(options, time_limit=options.time_limit or 60))
    if outcome.status not in ("optimal", "feasible"):
        return "infeasible: no fleet meets the demand even without availability caps and budget"
    free = extract_plan(resolved.instance.name, data, model, outcome, limits_of(resolved))
    over = [
        f"{name} needs {free.gpus.get(name, 0)} GPUs but max_gpus is {gpu.max_gpus}"
        for name, gpu in resolved.gpus.items()
        if gpu.max_gpus is not None and free.gpus.get(name, 0) > gpu.max_gpus
    ]
    budget = resolved.instance.objective.budget_per_hour
    if budget is not None and free.cost_per_hour > budget:
        over.append(
            f"the cheapest fleet costs {free.cost_per_hour:,.2f} $/h, over the budget of {budget:,.2f} $/h"
        )
    detail = "; ".join(over) or "the caps and budget together leave no fleet"
    return (
        f"infeasible within the limits: without caps or budget the cheapest fleet would be "
        f"{free.cost_per_hour:,.2f} $/h, and {detail}"
    )
