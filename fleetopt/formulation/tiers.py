"""§7 periods and price tiers: reserved GPUs paid in every period, on-demand and spot per period."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyomo.core as pyo

from fleetopt.formulation.data import ProgramData


def add_price_tiers(m: pyo.ConcreteModel, data: ProgramData) -> None:
    """gpus[g,t] = reserved[g] + on_demand[g,t] + spot[g,t];  spot[g,t] ≤ f·gpus[g,t]."""
    if data.tiers is None:
        return
    m.reserved = pyo.Var(m.G, domain=pyo.NonNegativeIntegers)
    m.on_demand = pyo.Var(m.G, m.T, domain=pyo.NonNegativeIntegers)
    m.spot = pyo.Var(m.G, m.T, domain=pyo.NonNegativeIntegers)
    m.gpu_tiers = pyo.Constraint(
        m.G,
        m.T,
        rule=lambda _, g, t: m.gpus[g, t] == m.reserved[g] + m.on_demand[g, t] + m.spot[g, t],
    )
    share = data.tiers.spot_max_fraction
    m.spot_cap = pyo.Constraint(m.G, m.T, rule=lambda _, g, t: m.spot[g, t] <= share * m.gpus[g, t])


def period_cost(m: pyo.ConcreteModel, data: ProgramData, t: int):
    """$/h in period t: Σ_g p_g·gpus[g,t], or by tier Σ_g p_g·(ρ·reserved + on_demand + σ·spot)."""
    price = {g.name: g.price_per_gpu_hour for g in data.gpus}
    if data.tiers is None:
        return sum(price[g] * m.gpus[g, t] for g in m.G)
    rho, sigma = data.tiers.reserved_price_factor, data.tiers.spot_price_factor
    return sum(
        price[g] * (rho * m.reserved[g] + m.on_demand[g, t] + sigma * m.spot[g, t]) for g in m.G
    )


@dataclass(frozen=True)
class TieredFleet:
    """GPUs in service and by tier for a plan's replicas (`cheapest_tiers`), keyed as the
    program's variables (`reserved`, `on_demand` and `spot` empty without tiers)."""

    gpus: dict[tuple[str, int], float]
    reserved: dict[str, float]
    on_demand: dict[tuple[str, int], float]
    spot: dict[tuple[str, int], float]
    cost_per_hour: float


def cheapest_tiers(data: ProgramData, replicas: dict[tuple[int, int], int]) -> TieredFleet:
    """The GPUs these replicas need, in whole nodes, each GPU type's fleet at the tiers that
    cost least for the reserved GPUs R it keeps, the cheapest R of 0 up to its largest fleet:
    in each period the larger of its need and R in service, as much spot beyond R as the spot
    fraction allows, the rest on demand (more GPUs in service could allow more spot: this is a
    plan's cost, not always the least). On demand throughout without tiers. Arithmetic for
    plans found without a program's GPU rows: the presolve's, priced as a budget buys them
    (on demand they undersell it, docs/benchmarks.md), and a throughput plan's GPUs trimmed
    to its replicas (pipeline)."""
    periods = range(len(data.periods))
    weights = np.array([p.hours for p in data.periods]) / data.total_hours
    need = {g.name: np.zeros(len(data.periods)) for g in data.gpus}
    for (k, t), n in replicas.items():
        need[data.configs[k].gpu][t] += n * data.configs[k].tp
    tiers, total = data.tiers, 0.0
    gpus, reserved_gpus, on_demand_gpus, spot_gpus = {}, {}, {}, {}
    for market in data.gpus:
        g, size = market.name, market.gpus_per_node or 1
        in_service = np.ceil(need[g] / size) * size
        gpus.update({(g, t): float(in_service[t]) for t in periods})
        if tiers is None:
            total += market.price_per_gpu_hour * float(in_service @ weights)
            continue
        reserved = np.arange(int(in_service.max()) + 1, dtype=float)[:, None]
        serving = np.maximum(in_service, np.ceil(reserved / size) * size)
        spot = np.minimum(np.floor(tiers.spot_max_fraction * serving), serving - reserved)
        on_demand = serving - reserved - spot
        paid = (on_demand + tiers.spot_price_factor * spot) @ weights
        costs = tiers.reserved_price_factor * reserved[:, 0] + paid
        best = int(np.argmin(costs))
        total += market.price_per_gpu_hour * float(costs[best])
        gpus.update({(g, t): float(serving[best, t]) for t in periods})
        reserved_gpus[g] = float(best)
        on_demand_gpus.update({(g, t): float(on_demand[best, t]) for t in periods})
        spot_gpus.update({(g, t): float(spot[best, t]) for t in periods})
    return TieredFleet(gpus, reserved_gpus, on_demand_gpus, spot_gpus, total)
