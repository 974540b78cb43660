"""Sets, variables and objective in one place; each constraint family comes from its generator.

| name | kind | meaning |
| --- | --- | --- |
| `x[k]` | integer | replicas of config k |
| `r[c, k]` | continuous | requests/s of class c routed to config k (eligible pairs only) |
| `gpus[g]` | integer | GPUs of type g bought |
| `nodes[g]` | integer | whole nodes of type g (only where `gpus_per_node` is set) |
| `alpha` | continuous | share of demand served: fixed at 1 when minimising cost |
"""

from __future__ import annotations

import math

import pyomo.environ as pyo

from fleetopt.formulation.coverage import add_coverage
from fleetopt.formulation.data import GPU_COUNT_TIE_BREAK, ProgramData
from fleetopt.formulation.decode import add_decode_capacity
from fleetopt.formulation.kv_transfer import add_kv_transfer
from fleetopt.formulation.limits import add_budget, add_gpu_supply
from fleetopt.formulation.prefill import add_prefill_capacity


def build_model(data: ProgramData) -> pyo.ConcreteModel:
    m = pyo.ConcreteModel(name="fleetopt")
    m.K = pyo.Set(initialize=range(len(data.configs)))
    m.E = pyo.Set(initialize=data.eligible(), dimen=2)
    m.G = pyo.Set(initialize=[g.name for g in data.gpus])
    m.x = pyo.Var(
        m.K, domain=pyo.NonNegativeIntegers, bounds=lambda _, k: (0, _replica_bound(data, k))
    )
    m.r = pyo.Var(m.E, domain=pyo.NonNegativeReals)
    m.gpus = pyo.Var(m.G, domain=pyo.NonNegativeIntegers)
    if data.maximize_throughput:
        m.alpha = pyo.Var(domain=pyo.NonNegativeReals)
    else:
        m.alpha = pyo.Param(initialize=1.0)

    add_coverage(m, data)
    add_prefill_capacity(m, data)
    add_decode_capacity(m, data)
    add_kv_transfer(m, data)
    add_gpu_supply(m, data)
    add_budget(m, data)

    price = {g.name: g.price_per_gpu_hour for g in data.gpus}
    m.cost_per_hour = pyo.Expression(expr=sum(price[g] * m.gpus[g] for g in m.G))
    gpu_count = sum(m.gpus[g] for g in m.G)
    if data.maximize_throughput:
        # Most demand first; among equal alpha, the cheaper fleet (cost scaled far below 1).
        scale = 1e-6 / data.budget_per_hour
        m.objective = pyo.Objective(expr=m.alpha - scale * m.cost_per_hour, sense=pyo.maximize)
    else:
        replicas = sum(m.x[k] for k in m.K)
        m.objective = pyo.Objective(
            expr=m.cost_per_hour + GPU_COUNT_TIE_BREAK * (gpu_count + replicas)
        )
    return m


def _replica_bound(data: ProgramData, k: int) -> int | None:
    """Replicas of config k never needed: enough to carry every eligible class alone (cost
    mode), or what the budget buys (throughput mode). Tight bounds speed up branch and bound."""
    config = data.configs[k]
    if data.maximize_throughput:
        price = next(g.price_per_gpu_hour for g in data.gpus if g.name == config.gpu)
        return math.floor(data.budget_per_hour / (price * config.tp))
    rates = {c.name: c.requests_per_s for c in data.classes}
    need = 0.0
    for resource, cap in config.capacity.items():
        load = sum(rates[c] * use.get(resource, 0.0) for c, use in config.usage.items())
        need = max(need, load / cap)
    return math.ceil(need - 1e-9)
