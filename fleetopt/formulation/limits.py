"""§6 limits: GPUs bought cover the replicas, availability caps, whole nodes, budget."""

from __future__ import annotations

import pyomo.environ as pyo

from fleetopt.formulation.data import ProgramData


def add_gpu_supply(m: pyo.ConcreteModel, data: ProgramData) -> None:
    """gpus[g] ≥ Σ_{k on g} tp_k·x[k];  gpus[g] ≤ cap_g;  gpus[g] = s_g·nodes[g] where whole nodes."""
    used = {g.name: [] for g in data.gpus}
    for k, config in enumerate(data.configs):
        used[config.gpu].append(config.tp * m.x[k])
    m.gpu_supply = pyo.Constraint(m.G, rule=lambda _, g: m.gpus[g] >= sum(used[g]))
    caps = {g.name: g.max_gpus for g in data.gpus if g.max_gpus is not None}
    if caps:
        m.gpu_cap = pyo.Constraint(list(caps), rule=lambda _, g: m.gpus[g] <= caps[g])
    whole = [g for g in data.gpus if g.gpus_per_node]
    if whole:
        size = {g.name: g.gpus_per_node for g in whole}
        m.nodes = pyo.Var(list(size), domain=pyo.NonNegativeIntegers)
        m.whole_nodes = pyo.Constraint(
            list(size), rule=lambda _, g: m.gpus[g] == size[g] * m.nodes[g]
        )


def add_budget(m: pyo.ConcreteModel, data: ProgramData) -> None:
    """Σ_g price_g·gpus[g] ≤ B, where a budget is given."""
    if data.budget_per_hour is None:
        return
    price = {g.name: g.price_per_gpu_hour for g in data.gpus}
    m.budget = pyo.Constraint(expr=sum(price[g] * m.gpus[g] for g in m.G) <= data.budget_per_hour)
