"""Candidate boundaries where the cheapest GPU type for a request changes with its prompt length.

A short prompt and a long one may be cheapest on different GPU types (a memory-bandwidth-bound
decode on one, a compute-bound prefill on another, or a TTFT target only a faster part can hold
for long prompts). Pricing requests of each length alone on every GPU type — the cost per
request/s of its cheapest config there, colocated or a prefill plus a decode replica, at the
large-pool rate — shows where that order changes; a boundary there separates requests whose
cost per GPU type differs. The program then prices the splits (routing.py).
"""

from __future__ import annotations

import math
from itertools import repeat

import numpy as np

from fleetopt.catalog import resolve
from fleetopt.configs import Config, enumerate_configs
from fleetopt.instance import Instance, TokenDistribution, Workload
from fleetopt.perf.operating_point import PREFILL, max_rate
from fleetopt.workers import can_fork, worker_pool
from fleetopt.workload.derive import Sample, distribution

GRID_QUANTILES = (0.1, 0.25, 0.4, 0.5, 0.6, 0.75, 0.85, 0.9, 0.95, 0.98, 0.99, 0.999)
"""Prompt-length quantiles at which requests are priced: denser in the tail, where few long
prompts cost most."""


def cost_crossings(
    instance: Instance, workload: Workload, sample: Sample, jobs: int = 1
) -> list[int]:
    """Boundaries just above a grid length whose cheapest GPU type differs from the next one's
    (each probe's configs enumerated in `jobs` processes, as `enumerate_configs`)."""
    lengths = _grid(sample)
    if len(lengths) < 2:
        return []
    output = TokenDistribution(**distribution(sample.output_tokens, sample.weight))
    probes = [
        Workload(
            name=f"probe-{i}",
            model=workload.model,
            requests_per_s=1.0,
            input_tokens=float(length),
            output_tokens=output,
            slo=workload.slo,
        )
        for i, length in enumerate(lengths)
    ]
    cheapest = _each_alone(instance, probes, jobs)
    return [
        math.floor(lengths[i]) + 1
        for i in range(len(lengths) - 1)
        if cheapest[i] is not None
        and cheapest[i + 1] is not None
        and cheapest[i] != cheapest[i + 1]
    ]


def _grid(sample: Sample) -> list[float]:
    order = np.argsort(sample.input_tokens, kind="stable")
    ordered, cumulative = sample.input_tokens[order], np.cumsum(sample.weight[order])
    picks = np.searchsorted(cumulative, np.array(GRID_QUANTILES) * (1 - 1e-12))
    return sorted({float(ordered[min(int(i), len(ordered) - 1)]) for i in picks})


def _each_alone(instance: Instance, probes: list[Workload], jobs: int) -> list[str | None]:
    """`_cheapest_alone` of every probe, `jobs` probes at a time in forked workers where this
    process may fork (`workers.can_fork`), each enumerated in one process."""
    jobs = min(jobs, len(probes))
    if jobs <= 1 or not can_fork():
        return [_cheapest_alone(instance, probe, jobs) for probe in probes]
    with worker_pool(jobs, forked=True) as pool:
        return list(pool.map(_cheapest_alone, repeat(instance), probes, repeat(1)))


def _cheapest_alone(instance: Instance, probe: Workload, jobs: int) -> str | None:
    """The cheapest GPU type for the probe's requests in an instance of them alone. Enumerated
    together, the probes shared configs and points (a queueing level carries every class whose
    budget reaches it, at the strictest member's margins; a decode point is some class's best
    step), so a length's price hung on the lengths probed beside it, and enumerating them took
    3-4x longer on the shipped traces (docs/benchmarks.md)."""
    resolved = resolve(instance.model_copy(update={"workloads": [probe]}))
    prices = {name: gpu.price_per_gpu_hour for name, gpu in resolved.gpus.items()}
    return _cheapest_type(enumerate_configs(resolved, jobs).configs, prices, probe.name)


def _cheapest_type(configs: list[Config], prices: dict[str, float], name: str) -> str | None:
    """The GPU type with the lowest $/h per request/s of this class, or None if none serves it."""
    by_role: dict[tuple[str, str], float] = {}
    for config in configs:
        use = config.usage.get(name)
        if use is None:
            continue
        caps = dict(config.capacity)
        if PREFILL in caps:  # the large-pool rate: pooling at its tail, capped at the ceiling
            caps[PREFILL] *= min(1.0, config.queue.tail_rate)
        rate, _ = max_rate(caps, use)
        if not 0 < rate < math.inf:
            continue
        cost = prices[config.gpu] * config.tp / rate
        key = (config.gpu, config.op.role)
        by_role[key] = min(by_role.get(key, math.inf), cost)
    per_type = {}
    for gpu in prices:
        split = by_role.get((gpu, "prefill"), math.inf) + by_role.get((gpu, "decode"), math.inf)
        per_type[gpu] = min(by_role.get((gpu, "colocated"), math.inf), split)
    best = min(per_type, key=per_type.get, default=None)
    return None if best is None or per_type[best] == math.inf else best
