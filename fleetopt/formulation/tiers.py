"""§7 periods and price tiers: reserved GPUs paid in every period, on-demand and spot per period."""

from __future__ import annotations

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
