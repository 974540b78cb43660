"""Sets, variables and objective in one place; each constraint family comes from its generator.

| name | kind | meaning |
| --- | --- | --- |
| `x[k, t]` | integer | replicas of config k in period t |
| `r[c, k, t]` | continuous | requests/s of class c routed to config k in period t (eligible pairs only) |
| `gpus[g, t]` | integer | GPUs of type g in service in period t |
| `nodes[g, t]` | integer | whole nodes of type g (only where `gpus_per_node` is set) |
| `reserved[g]`, `on_demand[g, t]`, `spot[g, t]` | integer | GPUs by price tier (only with `pricing`) |
| `open[k, t]` | binary | config k has a pool in period t (only where its pool has a least size) |
| `alpha` | continuous | share of demand served: fixed at 1 when minimising cost |

Without a demand profile there is one period (t = 0) of multiplier 1.
"""

from __future__ import annotations

import math

import numpy as np
import pyomo.core as pyo

from fleetopt.formulation.coverage import add_coverage
from fleetopt.formulation.data import GPU_COUNT_TIE_BREAK, ProgramData
from fleetopt.formulation.decode import add_decode_capacity
from fleetopt.formulation.kv_transfer import add_kv_transfer
from fleetopt.formulation.limits import add_budget, add_gpu_supply
from fleetopt.formulation.prefill import add_prefill_capacity
from fleetopt.formulation.sizing import Columns, columns, replicas_alone_each
from fleetopt.formulation.tiers import add_price_tiers, period_cost
from fleetopt.perf.queueing import NO_QUEUEING


def build_model(data: ProgramData, relaxed: bool = False) -> pyo.ConcreteModel:
    """The program; `relaxed` builds its LP relaxation: every count continuous and the pooling
    curves held by their chord and hull rows alone (the expansion's binaries add nothing to the
    LP bound: docs/formulation.md §2), which fleetopt/presolve.py prices configs with."""
    m = pyo.ConcreteModel(name="fleetopt")
    m.K = pyo.Set(initialize=range(len(data.configs)))
    m.T = pyo.Set(initialize=range(len(data.periods)))
    m.E = pyo.Set(initialize=data.eligible(), dimen=2)
    m.G = pyo.Set(initialize=[g.name for g in data.gpus])
    m.replica_bound = replica_bounds(data)
    m.x = pyo.Var(
        m.K,
        m.T,
        domain=pyo.NonNegativeIntegers,
        bounds=lambda _, k, t: (0, stated_bound(m.replica_bound[k, t])),
    )
    m.r = pyo.Var(m.E, m.T, domain=pyo.NonNegativeReals)
    m.gpus = pyo.Var(m.G, m.T, domain=pyo.NonNegativeIntegers)
    if data.maximize_throughput:
        m.alpha = pyo.Var(domain=pyo.NonNegativeReals, bounds=(0, data.demand_scale_limit))
    else:
        m.alpha = 1.0  # a constant, not a Param: fixed data stays out of Pyomo's way

    add_coverage(m, data)
    add_prefill_capacity(m, data, expand=not relaxed)
    add_decode_capacity(m, data)
    add_kv_transfer(m, data)
    add_gpu_supply(m, data)
    add_price_tiers(m, data)

    hours = data.total_hours
    m.cost_per_hour = pyo.Expression(
        expr=sum(p.hours * period_cost(m, data, t) for t, p in enumerate(data.periods)) / hours
    )
    add_budget(m, data)
    if data.maximize_throughput:
        # Most demand first; among equal alpha, the cheaper fleet (cost scaled far below 1).
        scale = 1e-6 / data.budget_per_hour
        m.objective = pyo.Objective(expr=m.alpha - scale * m.cost_per_hour, sense=pyo.maximize)
    else:
        size = sum(
            p.hours * (sum(m.gpus[g, t] for g in m.G) + sum(m.x[k, t] for k in m.K))
            for t, p in enumerate(data.periods)
        )
        m.objective = pyo.Objective(expr=m.cost_per_hour + GPU_COUNT_TIE_BREAK * size / hours)
    if relaxed:
        for var in m.component_data_objects(pyo.Var):
            if var.domain is pyo.NonNegativeIntegers:
                var.domain = pyo.NonNegativeReals
            elif var.domain is pyo.Binary:
                var.domain = pyo.UnitInterval
    return m


def model_columns(data: ProgramData, relaxed: bool = False) -> int:
    """About how many columns `build_model` makes: x, r and a pool's `open` in every period
    and, unless `relaxed`, each expanded pooling curve's fill and beyond (at most its
    increments; the GPU counts and tiers, a few per GPU type, left out). Building and handing
    over a model takes time in proportion (fleetopt.solve.builds_in_time), which a time limit
    weighs first: one block of a throughput program holds every config in every period."""
    count = len(data.configs) + len(data.eligible())
    count += sum(config.min_replicas > 1 for config in data.configs)
    if not relaxed:
        count += sum(
            len(config.queue.increments) + 1
            for config in data.configs
            if config.queue != NO_QUEUEING and not config.queue.linear
        )
    return len(data.periods) * count


def replica_bounds(data: ProgramData, cols: Columns | None = None) -> dict[tuple[int, int], int]:
    """Replicas of config k never needed in period t (`replica_bound_array`), by (k, t)."""
    bounds = replica_bound_array(data, cols)
    return {
        (k, t): int(bounds[k, t])
        for k in range(len(data.configs))
        for t in range(len(data.periods))
    }


def replica_bound_array(data: ProgramData, cols: Columns | None = None) -> np.ndarray:
    """[k, t]: replicas of config k never needed in period t: enough to carry every eligible
    class alone (cost mode; in throughput mode at the largest demand scale,
    `demand_scale_limit`, and no more than the budget buys or the GPU type's cap allows), or
    fewer where an incumbent proves it (`data.replica_bounds`). Tight bounds speed up branch and
    bound and tighten the pooling chord (docs/formulation.md §2); in throughput mode a budget's
    bound alone ran to millions, and `pool_beyond`'s coefficient X − N times HiGHS's integrality
    tolerance let a replica count at the tail rate with `fill` at 1e-6 (a plan verify refused).
    A bound an incumbent proved is never above the demand's (each started from it and only
    fell), so the demand is computed only where one is missing: the presolve builds a block's
    model several times, and its arithmetic reads every config in every period (as an array:
    a throughput program is one block of every config and period). `cols`: `columns(data)`,
    where the caller has it. Whole numbers, as floats."""
    bounds = np.full((len(data.configs), len(data.periods)), math.inf)
    for (k, t), bound in data.replica_bounds.items():
        bounds[k, t] = bound
    missing = np.isinf(bounds)
    limit = data.demand_scale_limit if data.maximize_throughput else 1.0
    if missing.any() and limit is not None:
        cols = columns(data) if cols is None else cols
        periods = np.flatnonzero(missing.any(axis=0))
        scales = [data.periods[t].multiplier * limit for t in periods]
        rates = [{c.name: c.requests_per_s * scale for c in data.classes} for scale in scales]
        for t, need in zip(periods, replicas_alone_each(cols, rates), strict=True):
            unknown = missing[:, t]
            bounds[unknown, t] = need[unknown]
    if data.maximize_throughput:
        price = {g.name: g.price_per_gpu_hour for g in data.gpus}
        caps = {g.name: g.max_gpus for g in data.gpus if g.max_gpus is not None}
        cheapest = min((1.0, *_factors(data)))
        tp = np.array([config.tp for config in data.configs], dtype=float)
        paid = np.array([price[config.gpu] * cheapest for config in data.configs]) * tp
        capped = np.array([caps.get(config.gpu, math.inf) for config in data.configs], dtype=float)
        cap = np.floor_divide(
            capped, tp, out=np.full_like(capped, math.inf), where=capped < math.inf
        )
        hours = np.array([period.hours for period in data.periods])
        budget = np.floor(data.budget_per_hour * data.total_hours / hours[None, :] / paid[:, None])
        most = np.minimum(np.minimum(bounds, budget), cap[:, None])
        bounds = np.where(missing, most, bounds)
    return bounds


LARGEST_STATED_BOUND = 10**5
"""HiGHS flags integer bounds above 1e5 as excessively large; a replica bound beyond it is left
off the variable (it stays in the pooling rows, as a coefficient, where it is needed)."""


def stated_bound(bound: int) -> int | None:
    return bound if bound <= LARGEST_STATED_BOUND else None


def _factors(data: ProgramData) -> tuple[float, ...]:
    if data.tiers is None:
        return ()
    return (data.tiers.reserved_price_factor, data.tiers.spot_price_factor)
