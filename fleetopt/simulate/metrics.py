"""Turn a simulation outcome into the report: per class latency percentiles, SLO attainment and
achieved tokens/s; per pool utilisation, queues and batches. JSON names follow DESIGN §4.

Figures cover the measured window only: from the first request after the warm-up to the last
arrival, so neither the filling nor the draining of the fleet counts.
"""

from __future__ import annotations

import math

import numpy as np

from fleetopt.plan import Plan
from fleetopt.simulate.simulator import Outcome

PERCENTILES = (50, 90, 99)


def summarize(plan: Plan, outcome: Outcome) -> dict:
    requests = outcome.requests
    start, end = outcome.window
    span = end - start
    warmup = outcome.warmup
    share = warmup / len(requests)
    workloads = [_workload(plan, outcome, index) for index in range(len(requests.names))]
    warnings = [_busier_than_planned(w, span) for w in workloads]
    warnings += [_thin_tail(w) for w in workloads]
    return {
        "plan": plan.name,
        "arrivals": requests.source,
        "requests": len(requests),
        "refused": int(outcome.refused.sum()),
        "warmup_requests": warmup,
        "warmup": f"the first {warmup:,} requests ({share:.0%}) are warm-up, left out of every figure",
        "measured_seconds": span,
        "simulated_seconds": float(np.nanmax(outcome.finish_s, initial=0.0)),
        "workloads": workloads,
        "pools": [_pool(plan, outcome, index) for index in range(len(plan.pools))],
        "warnings": [text for text in warnings if text is not None],
    }


BUSIER = 0.10
"""A class arriving this much faster than the plan's rate (and beyond Poisson noise) is flagged:
a replayed trace busier than the plan was sized for misses its targets for that reason."""


def _busier_than_planned(workload: dict, span: float) -> str | None:
    """A warning where the class arrived faster than the plan's rate: more than BUSIER above
    it, and more than four Poisson standard deviations (a short run's count is noisy)."""
    measured, planned = workload["requests_per_s"], workload["planned_requests_per_s"]
    if measured is None or planned <= 0 or measured <= planned * (1 + BUSIER):
        return None
    if (measured - planned) * span <= 4 * math.sqrt(planned * span):
        return None
    return (
        f"{workload['name']} arrives at {measured:,.2f} req/s here, {measured / planned:.2f}x the "
        f"{planned:,.2f} req/s the plan is sized for: targets missed below may be the extra load, "
        "not the plan (to size for the trace's rate, solve with `rate: from_trace`)"
    )


TAIL_REQUESTS = 10
"""A class's tail percentile is read from at least this many requests beyond it; with fewer, its
p99 is little more than its slowest few requests, and the report says so."""


def _thin_tail(workload: dict) -> str | None:
    """A warning where too few requests were measured to read the class's tail percentile."""
    percentile = (workload["slo"] or {}).get("percentile", max(PERCENTILES))
    enough = math.ceil(TAIL_REQUESTS / (1 - percentile / 100) - 1e-9)
    if workload["requests"] >= enough:
        return None
    return (
        f"{workload['name']}: {workload['requests']:,} requests measured, too few to read its "
        f"p{percentile:g} ({enough:,} put {TAIL_REQUESTS} beyond it); simulate more with --requests"
    )


def _workload(plan: Plan, outcome: Outcome, index: int) -> dict:
    requests = outcome.requests
    name = requests.names[index]
    planned = next(w for w in plan.workloads if w.name == name)
    start, end = outcome.window
    span = end - start
    mine = requests.workload == index
    measured = mine & ~outcome.refused & (np.arange(len(requests)) >= outcome.warmup)
    arrival = requests.arrival_s[measured]
    first, finish = outcome.first_s[measured], outcome.finish_s[measured]
    output = requests.output_tokens[measured]
    ttft = (first - arrival) * 1e3
    decodes = output > 1
    tpot = (finish - first)[decodes] / (output[decodes] - 1) * 1e3
    slo = planned.slo
    attainment = None
    if slo and len(ttft):
        ttft_ok = ttft <= slo["ttft_ms"] if slo.get("ttft_ms") else np.ones(len(ttft), bool)
        tpot_ok = np.ones(len(ttft), bool)
        if slo.get("tpot_ms"):
            tpot_ok[decodes] = tpot <= slo["tpot_ms"]
        attainment = {
            "ttft": _share(ttft_ok),
            "tpot": _share(tpot_ok),
            "both": _share(ttft_ok & tpot_ok),
            "both_margin": _margin(ttft_ok & tpot_ok),
        }
    in_window = (requests.arrival_s >= start) & (requests.arrival_s <= end) & mine
    return {
        "name": name,
        "requests": int(measured.sum()),
        "refused": int((outcome.refused & mine).sum()),
        "requests_per_s": _rate(int(in_window.sum()), span),
        "planned_requests_per_s": planned.requests_per_s,
        "input_tokens": _mean(requests.input_tokens[measured]),
        "output_tokens": _mean(output),
        **_token_rates(outcome, mine & ~outcome.refused),
        "ttft_ms": _percentiles(ttft),
        "tpot_ms": _percentiles(tpot),
        "e2e_ms": _percentiles((finish - arrival) * 1e3),
        "predicted": {"ttft_ms": planned.ttft_ms, "tpot_ms": planned.tpot_ms},
        "slo": slo,
        "slo_attainment": attainment,
        "meets_slo": None
        if attainment is None
        else bool(min(attainment["ttft"], attainment["tpot"]) >= slo["percentile"] / 100),
    }


def _token_rates(outcome: Outcome, served: np.ndarray) -> dict:
    """Tokens/s the class got in the window: a prompt counts when its first token is out; the
    output tokens are spread evenly from the first token to the last."""
    start, end = outcome.window
    span = end - start
    requests = outcome.requests
    first, finish = outcome.first_s[served], outcome.finish_s[served]
    prompt, output = requests.input_tokens[served], requests.output_tokens[served]
    prefilled = prompt[(first >= start) & (first <= end)].sum()
    first_in = ((first >= start) & (first <= end)).astype(float)
    lasting = finish - first
    overlap = np.clip(np.minimum(finish, end) - np.maximum(first, start), 0.0, None)
    spread = np.divide(overlap, lasting, out=np.zeros_like(overlap), where=lasting > 0)
    decoded = (first_in + spread * (output - 1)).sum()
    return {
        "prefill_tokens_per_s": _rate(float(prefilled), span),
        "decode_tokens_per_s": _rate(float(decoded), span),
    }


def _pool(plan: Plan, outcome: Outcome, index: int) -> dict:
    pool = plan.pools[index]
    counters = outcome.replicas[index]
    start, end = outcome.window
    span = end - start
    steps = sum(c.steps for c in counters)
    busy = sum(c.busy_s for c in counters)
    mean_batch = sum(c.batch_seqs for c in counters) / steps if steps else None
    square = sum(c.batch_square for c in counters)
    return {
        "pool": index,
        "model": pool.model,
        "role": pool.role,
        "gpu": pool.gpu,
        "tensor_parallel": pool.tensor_parallel,
        "replicas": pool.replicas,
        "utilization": min(1.0, busy / (span * len(counters))) if span > 0 else None,
        "planned_utilization": pool.utilization,
        "step_ms": pool.step_ms,
        "mean_step_ms": busy / steps * 1e3 if steps else None,
        "mean_batch": mean_batch,
        "batch_sd": math.sqrt(max(0.0, square / steps - mean_batch**2)) if steps else None,
        "queue_mean": sum(c.queue_area for c in counters) / (span * len(counters))
        if span > 0
        else None,
        "queue_max": max(c.queue_max for c in counters),
        "prefill_tokens_per_s": _rate(sum(c.prefill_tokens for c in counters), span),
        "decode_tokens_per_s": _rate(sum(c.decode_tokens for c in counters), span),
    }


def _percentiles(values: np.ndarray) -> dict[str, float | None]:
    if not len(values):
        return {f"p{p}": None for p in PERCENTILES}
    return {
        f"p{p}": float(v)
        for p, v in zip(PERCENTILES, np.percentile(values, PERCENTILES), strict=True)
    }


def _share(ok: np.ndarray) -> float | None:
    return float(ok.mean()) if len(ok) else None


BATCHES = 20
"""Batch means: the measured requests of a class, in arrival order, cut into this many runs."""
T_95 = 2.093
"""Student's t at 97.5% with BATCHES − 1 degrees of freedom: a two-sided 95% interval."""


def _margin(ok: np.ndarray) -> float | None:
    """Half-width of a 95% interval on the share met, by batch means: requests that queue
    behind the same long prompt miss together, so the share varies far more than a count of
    independent requests would say; the spread of the runs' shares measures that. None with
    fewer than two requests a run."""
    if len(ok) < 2 * BATCHES:
        return None
    runs = [part.mean() for part in np.array_split(ok.astype(float), BATCHES)]
    return float(T_95 * np.std(runs, ddof=1) / np.sqrt(BATCHES))


def _mean(values: np.ndarray) -> float | None:
    return float(values.mean()) if len(values) else None


def _rate(amount: float, span: float) -> float | None:
    return amount / span if span > 0 else None
