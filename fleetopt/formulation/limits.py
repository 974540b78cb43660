"""§6 limits: GPUs in service cover the replicas, availability caps, whole nodes, budget."""

from __future__ import annotations

import pyomo.core as pyo

from fleetopt.formulation.data import ProgramData
from fleetopt.formulation.rows import add_rows, linear


def add_gpu_supply(m: pyo.ConcreteModel, data: ProgramData) -> None:
    """gpus[g,t] ≥ Σ_{k on g} tp_k·x[k,t];  gpus[g,t] ≤ cap_g;  gpus[g,t] = s_g·nodes[g,t]
    where whole nodes."""
    on_type = {g.name: [] for g in data.gpus}
    for k, config in enumerate(data.configs):
        on_type[config.gpu].append(k)
    add_rows(
        m,
        "gpu_supply",
        {
            (g, t): (
                0.0,
                linear(
                    [1.0] + [-float(data.configs[k].tp) for k in on_type[g]],
                    [m.gpus[g, t]] + [m.x[k, t] for k in on_type[g]],
                ),
                None,
            )
            for g in m.G
            for t in m.T
        },
    )
    caps = {g.name: g.max_gpus for g in data.gpus if g.max_gpus is not None}
    if caps:
        m.gpu_cap = pyo.Constraint(list(caps), m.T, rule=lambda _, g, t: m.gpus[g, t] <= caps[g])
    size = {g.name: g.gpus_per_node for g in data.gpus if g.gpus_per_node}
    if size:
        m.nodes = pyo.Var(list(size), m.T, domain=pyo.NonNegativeIntegers)
        m.whole_nodes = pyo.Constraint(
            list(size), m.T, rule=lambda _, g, t: m.gpus[g, t] == size[g] * m.nodes[g, t]
        )


def add_budget(m: pyo.ConcreteModel, data: ProgramData) -> None:
    """cost_per_hour ≤ B (the hour-weighted mean over periods), where a budget is given."""
    if data.budget_per_hour is None:
        return
    m.budget = pyo.Constraint(expr=m.cost_per_hour <= data.budget_per_hour)
