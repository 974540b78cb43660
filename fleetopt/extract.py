"""Read a solved program back into a Plan: pools, routes, utilisation and predicted latency."""

from __future__ import annotations

import pyomo.environ as pyo

from fleetopt.configs import Config, RequestClass
from fleetopt.formulation.data import ProgramData
from fleetopt.perf.operating_point import PREFILL, RESOURCE_LABELS, Limits
from fleetopt.plan import Plan, PoolPlan, Route, WorkloadPlan
from fleetopt.solve import Outcome

ROUTE_EPS = 1e-7


def extract_plan(
    name: str, data: ProgramData, m: pyo.ConcreteModel, outcome: Outcome, limits: Limits
) -> Plan:
    price = {g.name: g.price_per_gpu_hour for g in data.gpus}
    alpha = pyo.value(m.alpha)
    routed: dict[int, dict[str, float]] = {}
    for c, k in m.E:
        rate = pyo.value(m.r[c, k])
        if rate > ROUTE_EPS:
            routed.setdefault(k, {})[c] = rate
    pools: list[PoolPlan] = []
    pool_of: dict[int, int] = {}
    classes = {c.name: c for c in data.classes}
    for k, config in enumerate(data.configs):
        replicas = round(pyo.value(m.x[k]))
        if replicas == 0:
            continue
        pool_of[k] = len(pools)
        pools.append(_pool(config, replicas, routed.get(k, {}), classes, price, limits))

    workloads = []
    for cls in data.classes:
        routes = [
            Route(pool_of[k], _phase(data.configs[k]), rate)
            for k, by_class in sorted(routed.items())
            for c, rate in by_class.items()
            if c == cls.name and k in pool_of
        ]
        used = [data.configs[k] for k, by_class in routed.items() if cls.name in by_class]
        workloads.append(_workload(cls, alpha, routes, used))

    gpus = {g: round(pyo.value(m.gpus[g])) for g in m.G if round(pyo.value(m.gpus[g])) > 0}
    return Plan(
        name=name,
        status=outcome.status,
        objective="maximize throughput" if data.maximize_throughput else "minimize cost",
        cost_per_hour=round(sum(price[g] * n for g, n in gpus.items()), 9),
        objective_bound=outcome.bound,
        mip_gap=outcome.gap,
        solve_seconds=outcome.seconds,
        gpus=gpus,
        pools=pools,
        workloads=workloads,
        demand_scale=alpha,
    )


def _phase(config: Config) -> str:
    return "both" if config.role == "colocated" else config.role


def _pool(
    config: Config,
    replicas: int,
    by_class: dict[str, float],
    classes: dict[str, RequestClass],
    price: dict[str, float],
    limits: Limits,
) -> PoolPlan:
    """Utilisation is the busiest resource's load over its physical capacity (the prefill cap u
    is a policy, so a prefill pool at its cap shows u, not 1)."""
    busiest, limited_by = 0.0, ""
    for resource, cap in config.capacity.items():
        physical = cap / limits.max_prefill_utilization if resource == PREFILL else cap
        load = sum(rate * config.usage[c].get(resource, 0.0) for c, rate in by_class.items())
        share = load / (physical * replicas)
        if share > busiest:
            busiest, limited_by = share, RESOURCE_LABELS[resource]
    prefill = sum(rate * classes[c].shape.input_mean for c, rate in by_class.items())
    decode = sum(rate * classes[c].shape.output_mean for c, rate in by_class.items())
    does_prefill, does_decode = config.op.does_prefill, config.op.does_decode
    scale = 1 / busiest if busiest > 0 else 0.0
    return PoolPlan(
        model=config.model,
        role=config.role,
        gpu=config.gpu,
        tensor_parallel=config.tp,
        replicas=replicas,
        gpus=replicas * config.tp,
        cost_per_hour=replicas * config.tp * price[config.gpu],
        prefill_tokens_per_s=prefill * scale if does_prefill else 0.0,
        decode_tokens_per_s=decode * scale if does_decode else 0.0,
        routed_prefill_tokens_per_s=prefill if does_prefill else 0.0,
        routed_decode_tokens_per_s=decode if does_decode else 0.0,
        utilization=busiest,
        limited_by=limited_by,
        step_ms=None if config.measured else config.op.step_s * 1e3,
        chunk_tokens=None if config.measured else config.op.chunk_tokens,
        measured=config.measured,
    )


def _workload(
    cls: RequestClass, alpha: float, routes: list[Route], used: list[Config]
) -> WorkloadPlan:
    ttfts = [k.ttft_s[cls.name] for k in used if k.ttft_s.get(cls.name) is not None]
    tpots = [k.tpot_s[cls.name] for k in used if k.tpot_s.get(cls.name) is not None]
    shape = cls.shape
    slo = None
    if shape.ttft_s is not None or shape.tpot_s is not None:
        slo = {
            "ttft_ms": shape.ttft_s * 1e3 if shape.ttft_s is not None else None,
            "tpot_ms": shape.tpot_s * 1e3 if shape.tpot_s is not None else None,
            "percentile": cls.percentile,
        }
    rate = alpha * cls.requests_per_s
    return WorkloadPlan(
        name=cls.name,
        model=cls.model,
        requests_per_s=rate,
        prefill_tokens_per_s=rate * shape.input_mean,
        decode_tokens_per_s=rate * shape.output_mean,
        input_tokens=shape.input_mean,
        output_tokens=shape.output_mean,
        ttft_ms=max(ttfts) * 1e3 if ttfts else None,
        tpot_ms=max(tpots) * 1e3 if tpots else None,
        slo=slo,
        routes=routes,
    )
