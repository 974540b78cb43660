"""Re-check a plan against its instance with plain arithmetic from the perf functions.

Independent of the formulation: it never reads a coefficient the program was built from. It
rebuilds each pool's average replica — the sequences in flight by Little's law, their context,
the prompt tokens of a mean step — and asks the step-time model whether the step fits its budget,
the KV cache holds the contexts, every routed class meets its targets and every GPU is paid for.
"""

from __future__ import annotations

import math
from collections import defaultdict

from fleetopt.catalog import Resolved
from fleetopt.configs import RequestClass, limits_of, request_class, valid_tensor_parallel
from fleetopt.instance import Instance
from fleetopt.perf.curves import replica_for, replica_limits, uncovered
from fleetopt.perf.operating_point import (
    BATCH,
    KV,
    OperatingPoint,
    RequestShape,
    admission_headroom,
    admitted_usage,
    chunk_extra_s,
    chunk_step_s,
    own_sequence_s,
    queue_load,
    step_quantile,
    tpot_per_step,
    walker,
)
from fleetopt.perf.profiles import profile_rate
from fleetopt.perf.replica import Replica
from fleetopt.plan import PeriodPlan, Plan, PoolPlan
from fleetopt.workload.replay import bucket_workloads

REL_TOL = 1e-6
ROW_TOL = 1e-6
"""HiGHS's `mip_feasibility_tolerance`: a row of the program may exceed its bound by this much
in its own units (prefill s/s, sequences, tokens), so a capacity check allows it too: a plan
HiGHS found (an interrupted one's incumbent) can sit there, 1e-5 over on a 0.07 s/s row."""


def _exceeds(value: float, limit: float) -> bool:
    return value > limit * (1 + REL_TOL) + ROW_TOL


def verify(plan: Plan, resolved: Resolved) -> list[str]:
    """Every violated constraint, in words; an empty list means the plan holds."""
    classes, problems = served_classes(plan, resolved.instance)
    if not plan.periods:
        view = PeriodPlan(
            0, 1.0, 1.0, plan.cost_per_hour, plan.gpus, None, None, plan.pools, plan.workloads
        )
        problems += _check_period(view, plan.demand_scale, resolved, classes)
        return problems + _check_cost(plan, [view], resolved)
    profile = resolved.instance.demand_profile
    multipliers = profile.multipliers if profile is not None else [1.0]
    if len(plan.periods) != len(multipliers):
        problems.append(f"{len(plan.periods)} periods for {len(multipliers)} demand multipliers")
    for period, multiplier in zip(plan.periods, multipliers, strict=False):
        if not _close(period.multiplier, multiplier):
            problems.append(f"period {period.index}: multiplier {period.multiplier} ≠ {multiplier}")
        problems += [
            f"period {period.index}: {p}"
            for p in _check_period(period, plan.demand_scale * multiplier, resolved, classes)
        ]
    return problems + _check_cost(plan, plan.periods, resolved)


def served_classes(plan: Plan, instance: Instance) -> tuple[dict[str, RequestClass], list[str]]:
    """The request classes the plan must serve: the instance's workloads, a workload split by
    prompt length (`length_routing`) replaced by its buckets, whose rates must add up to it."""
    classes = {w.name: request_class(w) for w in instance.workloads}
    problems = []
    buckets = bucket_workloads(plan, instance)
    carried: dict[str, float] = defaultdict(float)
    for b in (plan.length_routing or {}).get("buckets", []):
        carried[b["source"]] += b["requests_per_s"]
    for source, parts in carried.items():
        whole = classes.pop(source).requests_per_s
        if not _close(parts, whole):
            problems.append(f"{source}: length buckets carry {parts:.4g} of {whole:.4g} req/s")
    return classes | {w.name: request_class(w) for w in buckets}, problems


def _check_period(
    period: PeriodPlan, scale: float, resolved: Resolved, classes: dict[str, RequestClass]
) -> list[str]:
    """Routes cover scale × each class's rate, every pool holds its load, GPUs cover the pools."""
    problems: list[str] = []
    loads: dict[int, list[tuple[RequestClass, float]]] = defaultdict(list)
    served: dict[tuple[str, str], float] = defaultdict(float)
    for w in period.workloads:
        cls = classes.get(w.name)
        if cls is None:
            problems.append(f"workload {w.name} is not in the instance")
            continue
        for route in w.routes:
            loads[route.pool].append((cls, route.requests_per_s))
            for phase in ("prefill", "decode"):
                if route.phase in (phase, "both"):
                    served[w.name, phase] += route.requests_per_s
    for name, cls in classes.items():
        for phase in ("prefill", "decode"):
            want = scale * cls.requests_per_s
            if not _close(served[name, phase], want):
                problems.append(
                    f"{name}: {phase} routes carry {served[name, phase]:.4g} of {want:.4g} req/s"
                )
    networks = _decode_networks(period, loads, resolved)
    for index, pool in enumerate(period.pools):
        problems += [
            f"pool {index} ({_label(pool)}): {p}"
            for p in _check_pool(pool, loads[index], resolved, networks)
        ]
    return problems + _check_gpus(period, resolved)


def _decode_networks(
    period: PeriodPlan, loads: dict[int, list[tuple[RequestClass, float]]], resolved: Resolved
) -> dict[str, list[float]]:
    """Per class, the scale-out bandwidth of every decode pool it is routed to."""
    networks: dict[str, list[float]] = defaultdict(list)
    for index, pool in enumerate(period.pools):
        if pool.role != "decode" or pool.measured:
            continue
        model, gpu = resolved.models[pool.model], resolved.gpus[pool.gpu]
        bandwidth = Replica(model, gpu, pool.tensor_parallel).kv_transfer_bytes_per_s
        for cls, _ in loads[index]:
            networks[cls.name].append(bandwidth)
    return networks


def _check_pool(
    pool: PoolPlan,
    load: list[tuple[RequestClass, float]],
    resolved: Resolved,
    decode_networks: dict[str, list[float]],
) -> list[str]:
    if pool.gpus != pool.replicas * pool.tensor_parallel:
        return [f"{pool.gpus} GPUs for {pool.replicas} replicas of tp{pool.tensor_parallel}"]
    if pool.replicas < 1:
        return [f"{pool.replicas} replicas"] if load or pool.replicas < 0 else []
    if pool.measured:
        return _check_measured(pool, load, resolved)
    model, gpu = resolved.models[pool.model], resolved.gpus[pool.gpu]
    problem = valid_tensor_parallel(model, gpu, pool.tensor_parallel)
    if problem:
        return [problem]
    replica = replica_for(model, gpu, pool.tensor_parallel, pool.role, resolved.instance.profiles)
    replica = walker(replica, pool.role, max((c.shape.walk_tokens for c, _ in load), default=0))
    limits = replica_limits(replica, limits_of(resolved))
    gaps = [
        f"{cls.name}: {reason}"
        for cls, _ in load
        if (reason := uncovered(replica, cls.shape, pool.role)) is not None
    ]
    if gaps:
        return gaps
    tau, chunk, x = pool.step_ms / 1e3, pool.chunk_tokens, pool.replicas
    longest = None if pool.longest_step_ms is None else pool.longest_step_ms / 1e3
    op = OperatingPoint(pool.role, tau, chunk, longest)
    chunk_step = chunk_step_s(replica, op)  # a step with a full chunk: the TTFT's, the TPOT's
    does_prefill = pool.role in ("colocated", "prefill")
    does_decode = pool.role in ("colocated", "decode")
    problems = []
    kv_tokens = replica.kv_capacity_tokens(limits.gpu_memory_utilization)
    for cls, _ in load:
        s = cls.shape
        if cls.model != pool.model:
            problems.append(f"{cls.name} is a {cls.model} class")
        longest = s.longest_sequence(does_decode)
        if longest > kv_tokens:
            problems.append(f"{cls.name}: a {longest:,.0f}-token sequence exceeds the KV cache")
        tpot = chunk_step * tpot_per_step(pool.role, s)
        if does_decode and s.tpot_s is not None and tpot > s.tpot_s * (1 + REL_TOL):
            problems.append(
                f"{cls.name}: TPOT {tpot * 1e3:.2f} ms > target {s.tpot_s * 1e3:.2f} ms"
            )
        if does_prefill and s.ttft_s is not None:
            # the step in progress, then the prompt's own steps, then the KV transfer to the
            # slowest decode pool the class is routed to
            ttft = (replica.chunked_prefill_steps(s.input_tail, chunk) + 1) * chunk_step
            if pool.role == "prefill":
                receivers = [replica.kv_transfer_bytes_per_s, *decode_networks.get(cls.name, [])]
                ttft += s.input_tail * replica.kv_bytes_per_token / min(receivers)
            if ttft > s.ttft_s * (1 + REL_TOL):
                problems.append(
                    f"{cls.name}: TTFT {ttft * 1e3:.0f} ms > target {s.ttft_s * 1e3:.0f} ms"
                )
    # The pool's prompt compute, s/s: its prefill load, and what its colocated steps carry.
    busy = sum(r * c.shape.prompt_s(replica) for c, r in load) if does_prefill else 0.0
    if does_prefill:
        # Against what x replicas carry with every routed class's TTFT percentile held (Erlang C
        # with pooling, perf/queueing.py).
        carried = queue_load(replica, op, [c.shape for c, _ in load], limits, x)
        allowed = limits.max_prefill_utilization * replica.chunk_compute_s(chunk) / tau
        if _exceeds(busy, allowed * carried):
            problems.append(
                f"prefill compute {busy:.4g} s/s > {allowed * carried:.4g} that {x} "
                "replicas carry within the TTFT percentile"
            )
    seqs = context = 0.0
    if does_decode:
        seqs = sum(r * c.shape.output_mean * tau for c, r in load) / x
        context = sum(r * c.shape.output_mean * tau * c.shape.decode_context for c, r in load) / x
        held = sum(r * c.shape.output_mean * tau * c.shape.reserved_tokens for c, r in load) / x
        # Slots and KV with each routed class's admission headroom (Erlang C on the pool's
        # slots), its sequences counted at the mean step the load gives (admitted_usage).
        headroom = admission_headroom(replica, op, [c.shape for c, _ in load], limits, pooled=x)
        if any(h <= 0 for h in headroom):
            problems.append("no slot headroom left for a latency-bound class")
        else:
            taken = {
                resource: sum(
                    r * admitted_usage(replica, op, c.shape, h, resource, limits)
                    for (c, r), h in zip(load, headroom, strict=True)
                )
                / x
                for resource in (BATCH, KV)
            }
            if _exceeds(taken[BATCH], limits.max_num_seqs):
                problems.append(
                    f"{seqs:.1f} sequences per replica take {taken[BATCH]:.1f} slots with their "
                    f"admission headroom > max_num_seqs {limits.max_num_seqs}"
                )
            if _exceeds(taken[KV], kv_tokens):
                problems.append(
                    f"{held:,.0f} KV tokens per replica take {taken[KV]:,.0f} with their "
                    f"admission headroom > {kv_tokens:,.0f}"
                )
    # A prefill replica's step carries a full chunk; a colocated replica's mean step the
    # prompts that arrive in it, whose time it adds (the step is a sum: perf/replica.py).
    prompts, prompt_s = chunk, replica.chunk_compute_s(chunk)
    if pool.role == "colocated":
        prompts = sum(r * c.shape.input_mean for c, r in load) * tau / x
        prompt_s = busy * tau / x
    step = replica.step_s(
        decode_seqs=seqs,
        decode_context_tokens=context,
        prefill_tokens=prompts,
        prefill_compute_s=prompt_s,
    )
    if step > tau * (1 + REL_TOL):
        problems.append(f"step {step * 1e3:.2f} ms > budget {tau * 1e3:.2f} ms")
    if pool.role == "colocated":  # the mean batch with a full chunk, within the longest step
        full = replica.step_s(
            decode_seqs=seqs,
            decode_context_tokens=context,
            prefill_tokens=chunk,
            prefill_compute_s=replica.chunk_compute_s(chunk),
        )
        if full > chunk_step * (1 + REL_TOL):
            problems.append(
                f"a step with a full chunk {full * 1e3:.2f} ms > {chunk_step * 1e3:.2f} ms"
            )
    z = step_quantile([c.shape for c, _ in load]) if does_decode else None
    # The TPOT: a colocated point's longest step where it holds one, else the mean step
    if z is not None:
        z = max(z, 0.0)  # below the median, the mean step and the request's own sequence
        rates = [(c.shape, r / x) for c, r in load]
        if pool.role == "colocated" and longest is not None:
            left = chunk_step - chunk_extra_s(replica, chunk)  # the batch beside a full chunk
            problems += _step_at_percentile(replica, pool.role, tau, left, z, rates, prompts=False)
        else:
            problems += _step_at_percentile(replica, pool.role, tau, tau, z, rates, prompts=True)
    tokens = sum(r * c.shape.output_mean for c, r in load) / x
    if does_decode and tokens * replica.host_s_per_token > 1 + REL_TOL:
        problems.append(
            f"{tokens:,.0f} output tokens/s per replica > the host's "
            f"{1 / replica.host_s_per_token:,.0f}"
        )
    if pool.role in ("prefill", "decode"):
        sent = sum(r * c.shape.input_mean * replica.kv_bytes_per_token for c, r in load) / x
        if sent > replica.kv_transfer_bytes_per_s * (1 + REL_TOL):
            problems.append(f"KV transfer {sent / 1e9:.3g} GB/s per replica > network")
    return problems


def _step_at_percentile(
    replica: Replica,
    role: str,
    tau: float,
    budget: float,
    z: float,
    rates: list[tuple[RequestShape, float]],
    prompts: bool,
) -> list[str]:
    """A step at the TPOT percentile: with n_c = r_c·O_c·τ sequences of per-step cost β_c in
    flight on a replica (a Poisson count; with `prompts`, on a colocated replica, β_c carries
    the class's prompt compute per output token), the batch's mean time plus the larger of
    z·σ and a TPOT-bound request's own sequence must fit what the fixed time and the weight
    read leave of `budget`."""
    comm = replica.allreduce_s_per_token
    left = budget - replica.floor_s

    def cost(s: RequestShape) -> float:
        beta = replica.decode_s_per_token(s.decode_context) + comm
        if prompts and role == "colocated":
            beta += (s.prompt_s(replica) + s.input_mean * comm) / s.output_mean
        return beta

    costs = [(s, cost(s)) for s, _ in rates]
    seqs = [(r * s.output_mean * tau, beta) for (s, beta), (_, r) in zip(costs, rates, strict=True)]
    mean = sum(n * b for n, b in seqs)
    spread = max(z * math.sqrt(sum(n * b * b for n, b in seqs)), own_sequence_s(costs))
    if mean + spread > left * (1 + REL_TOL):
        return [
            f"the batch at the TPOT percentile takes {(mean + spread) * 1e3:.2f} ms of the "
            f"{left * 1e3:.2f} ms a step of {budget * 1e3:.2f} ms leaves it"
        ]
    return []


def _check_measured(
    pool: PoolPlan, load: list[tuple[RequestClass, float]], resolved: Resolved
) -> list[str]:
    profile = next(
        (
            p
            for p in resolved.instance.profiles
            if (p.model, p.gpu, p.tensor_parallel, p.role)
            == (pool.model, pool.gpu, pool.tensor_parallel, pool.role)
        ),
        None,
    )
    if profile is None:
        return ["no measured profile for this pool"]
    used = 0.0
    for cls, rate in load:
        cap, reason = profile_rate(profile, cls.shape.input_mean, cls.shape.output_mean)
        if cap is None:
            return [f"{cls.name}: {reason}"]
        used += rate / cap
    return (
        []
        if used <= pool.replicas * (1 + REL_TOL)
        else [f"needs {used:.3f} replicas, has {pool.replicas}"]
    )


def _check_gpus(period: PeriodPlan, resolved: Resolved) -> list[str]:
    problems = []
    need: dict[str, int] = defaultdict(int)
    for pool in period.pools:
        need[pool.gpu] += pool.gpus
    for name, gpu in resolved.gpus.items():
        bought = period.gpus.get(name, 0)
        if need[name] > bought:
            problems.append(f"{name}: pools use {need[name]} GPUs, the fleet has {bought}")
        if gpu.max_gpus is not None and bought > gpu.max_gpus:
            problems.append(f"{name}: {bought} GPUs exceed max_gpus {gpu.max_gpus}")
        if gpu.gpus_per_node and bought % gpu.gpus_per_node:
            problems.append(f"{name}: {bought} GPUs is not whole nodes of {gpu.gpus_per_node}")
    unknown = set(period.gpus) - set(resolved.gpus)
    if unknown:
        problems.append(f"the fleet has unknown GPU types {sorted(unknown)}")
    return problems


def _check_cost(plan: Plan, periods: list[PeriodPlan], resolved: Resolved) -> list[str]:
    """Each period's $/h from its GPUs by tier, their hour-weighted mean, the budget."""
    problems = []
    pricing = resolved.instance.pricing
    price = {name: gpu.price_per_gpu_hour for name, gpu in resolved.gpus.items()}
    reserved = plan.reserved_gpus or {}
    total = 0.0
    for period in periods:
        if pricing is None:
            cost = sum(price[g] * n for g, n in period.gpus.items() if g in price)
        else:
            on_demand, spot = period.on_demand_gpus or {}, period.spot_gpus or {}
            for g in price:
                parts = reserved.get(g, 0) + on_demand.get(g, 0) + spot.get(g, 0)
                if parts != period.gpus.get(g, 0):
                    problems.append(
                        f"period {period.index}: {g} tiers add to {parts}, fleet {period.gpus.get(g, 0)}"
                    )
                if spot.get(g, 0) > pricing.spot_max_fraction * period.gpus.get(g, 0) + 1e-9:
                    problems.append(
                        f"period {period.index}: {g} spot GPUs exceed spot_max_fraction"
                    )
            cost = sum(
                price[g]
                * (
                    pricing.reserved_price_factor * reserved.get(g, 0)
                    + on_demand.get(g, 0)
                    + pricing.spot_price_factor * spot.get(g, 0)
                )
                for g in price
            )
        if not math.isclose(cost, period.cost_per_hour, rel_tol=1e-9, abs_tol=1e-6):
            problems.append(
                f"period {period.index}: cost {period.cost_per_hour:.4f} $/h, its GPUs cost {cost:.4f} $/h"
            )
        total += period.hours * cost
    mean = total / sum(p.hours for p in periods)
    if not math.isclose(mean, plan.cost_per_hour, rel_tol=1e-9, abs_tol=1e-6):
        problems.append(f"cost {plan.cost_per_hour:.4f} $/h, the fleet costs {mean:.4f} $/h")
    budget = resolved.instance.objective.budget_per_hour
    if budget is not None and mean > budget * (1 + REL_TOL):
        problems.append(f"cost {mean:.2f} $/h exceeds budget {budget:.2f} $/h")
    return problems


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-5, abs_tol=1e-6)


def _label(pool: PoolPlan) -> str:
    return f"{pool.model} {pool.role} on {pool.gpu} tp{pool.tensor_parallel}"
