"""The shared shape of every capacity family: load of the routed classes ≤ capacity · replicas."""

from __future__ import annotations

import pyomo.environ as pyo

from fleetopt.formulation.data import ProgramData


def add_resource_rows(
    m: pyo.ConcreteModel, data: ProgramData, family: str, resources: tuple[str, ...]
) -> None:
    """Adds m.<family>[resource, k]:  Σ_c usage[k][c][resource] · r[c,k] ≤ capacity[k][resource] · x[k]."""
    rows = {}
    for k, config in enumerate(data.configs):
        for resource in resources:
            cap = config.capacity.get(resource)
            if cap is None:
                continue
            load = sum(
                use[resource] * m.r[c, k] for c, use in config.usage.items() if use.get(resource)
            )
            rows[resource, k] = load <= cap * m.x[k]
    if rows:
        setattr(m, family, pyo.Constraint(list(rows), rule=lambda _, res, k: rows[res, k]))
