"""The shared shape of every capacity family: load of the routed classes ≤ capacity · replicas."""

from __future__ import annotations

import pyomo.core as pyo

from fleetopt.formulation.data import ProgramData
from fleetopt.formulation.rows import add_rows, linear


def add_resource_rows(
    m: pyo.ConcreteModel,
    data: ProgramData,
    family: str,
    resources: tuple[str, ...],
    configs: list[int] | None = None,
) -> None:
    """Adds m.<family>[resource, k, t] for the given configs (default all):
    Σ_c usage[k][c][resource] · r[c,k,t] ≤ capacity[k][resource] · x[k,t]."""
    rows = {}
    for k in range(len(data.configs)) if configs is None else configs:
        config = data.configs[k]
        for resource in resources:
            cap = config.capacity.get(resource)
            if cap is None:
                continue
            users = [(c, use[resource]) for c, use in config.usage.items() if use.get(resource)]
            coefs = [u for _, u in users] + [-cap]
            for t in m.T:
                terms = [m.r[c, k, t] for c, _ in users] + [m.x[k, t]]
                rows[resource, k, t] = (None, linear(coefs, terms), 0.0)
    add_rows(m, family, rows)
