"""Read a solved program back into a Plan: pools, routes, utilisation and predicted latency."""

from __future__ import annotations

import math
from dataclasses import replace

from fleetopt.configs import Config, RequestClass
from fleetopt.formulation.blocks import Solution
from fleetopt.formulation.data import GpuMarket, ProgramData
from fleetopt.formulation.tiers import period_cost
from fleetopt.perf.operating_point import DECODE_STEP, PREFILL, RESOURCE_LABELS, Limits
from fleetopt.plan import PeriodPlan, Plan, PoolPlan, Route, WorkloadPlan
from fleetopt.solve import Outcome

ROUTE_EPS = 1e-7


def extract_plan(
    name: str,
    data: ProgramData,
    m: Solution,
    outcome: Outcome,
    limits: Limits,
    schedule: list[int] | None = None,
) -> Plan:
    """`schedule[i]` is the program period that serves the instance's period i (periods of equal
    demand share one); None for a plain plan: one period, one price, no `periods` list."""
    price = {g.name: g.price_per_gpu_hour for g in data.gpus}
    views = [_period(data, m, t, price, limits) for t in m.T]
    peak = max(m.T, key=lambda t: data.periods[t].multiplier)
    top = views[peak]
    periods = None
    reserved = None
    if schedule is not None:
        periods = [
            replace(views[t], index=i, hours=data.periods[t].hours / schedule.count(t))
            for i, t in enumerate(schedule)
        ]
    if data.tiers is not None:
        reserved = {g: n for g in m.G if (n := round(m.reserved[g])) > 0}
    return Plan(
        name=name,
        status=outcome.status,
        objective="maximize throughput" if data.maximize_throughput else "minimize cost",
        cost_per_hour=round(m.cost_per_hour, 9),
        objective_bound=outcome.bound,
        mip_gap=outcome.gap,
        solve_seconds=outcome.seconds,
        gpus=top.gpus,
        pools=top.pools,
        workloads=top.workloads,
        demand_scale=m.alpha,
        demand_scale_limit=data.demand_scale_limit,
        reserved_gpus=reserved,
        periods=periods,
    )


def _period(
    data: ProgramData, m: Solution, t: int, price: dict[str, float], limits: Limits
) -> PeriodPlan:
    """The fleet, routes and cost of one program period: read from the solution's nonzero
    values, in config order and each config's classes in its order."""
    rates: dict[int, dict[str, float]] = {}
    for (c, k, period), rate in m.r.items():
        if period == t and rate > ROUTE_EPS:
            rates.setdefault(k, {})[c] = rate
    routed = {
        k: {c: rates[k][c] for c in data.configs[k].usage if c in rates[k]} for k in sorted(rates)
    }
    pools: list[PoolPlan] = []
    pool_of: dict[int, int] = {}
    classes = {c.name: c for c in data.classes}
    for k in sorted(k for k, period in m.x if period == t):
        replicas = round(m.x[k, t])
        if replicas == 0:
            continue
        pool_of[k] = len(pools)
        pools.append(_pool(data.configs[k], replicas, routed.get(k, {}), classes, price, limits))

    scale = m.alpha * data.periods[t].multiplier
    workloads = []
    for cls in data.classes:
        routes = [
            Route(pool_of[k], _phase(data.configs[k]), rate)
            for k, by_class in sorted(routed.items())
            for c, rate in by_class.items()
            if c == cls.name and k in pool_of
        ]
        used = [data.configs[k] for k, by_class in routed.items() if cls.name in by_class]
        workloads.append(_workload(cls, scale, routes, used))

    def count(values: dict[tuple[str, int], float], g: str) -> int:
        return round(values[g, t])

    bought = {g: count(m.gpus, g) for g in m.G}
    pools = [_one_fewer(pool, pools, bought[pool.gpu], data.gpus) for pool in pools]
    tiered = data.tiers is not None
    return PeriodPlan(
        index=t,
        multiplier=data.periods[t].multiplier,
        hours=data.periods[t].hours,
        cost_per_hour=round(period_cost(m, data, t), 9),
        gpus={g: count(m.gpus, g) for g in m.G if count(m.gpus, g) > 0},
        on_demand_gpus={g: count(m.on_demand, g) for g in m.G if count(m.on_demand, g)}
        if tiered
        else None,
        spot_gpus={g: count(m.spot, g) for g in m.G if count(m.spot, g)} if tiered else None,
        pools=pools,
        workloads=workloads,
    )


def _one_fewer(
    pool: PoolPlan, pools: list[PoolPlan], bought: int, markets: list[GpuMarket]
) -> PoolPlan:
    """The pool with the GPUs one replica fewer would free: the GPUs in service fall to what
    the other replicas on its GPU type need, rounded up to whole nodes where it is sold so."""
    node = next(g.gpus_per_node for g in markets if g.name == pool.gpu) or 1
    used = sum(p.gpus for p in pools if p.gpu == pool.gpu) - pool.tensor_parallel
    return replace(pool, one_fewer_frees_gpus=max(0, bought - math.ceil(used / node) * node))


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
        prefill_step_share=None if config.measured else _prefill_step_share(config, by_class),
        longest_step_ms=None
        if config.op.longest_step_s is None
        else config.op.longest_step_s * 1e3,
        unqueued_ttft_misses={c: m for c, m in config.unqueued_misses.items() if c in by_class}
        or None,
    )


def _prefill_step_share(config: Config, by_class: dict[str, float]) -> float:
    """Share of the pool's step time its prompts take: colocated, the routed prompt compute
    over the routed mean-step load, which holds it (formulation §3)."""
    if not config.op.does_prefill:
        return 0.0
    if not config.op.does_decode:
        return 1.0
    prompts = sum(r * config.usage[c].get(PREFILL, 0.0) for c, r in by_class.items())
    step = sum(r * config.usage[c].get(DECODE_STEP, 0.0) for c, r in by_class.items())
    return min(1.0, prompts / step) if step > 0 else 0.0


def _workload(
    cls: RequestClass, scale: float, routes: list[Route], used: list[Config]
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
    rate = scale * cls.requests_per_s
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
