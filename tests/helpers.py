"""Small builders shared by the tests: inline instances as plain dicts, catalog replicas, and a
solve shortcut."""

from __future__ import annotations

import copy
import math
import random

from fleetopt.catalog import Gpu, Model, gpu_catalog, model_catalog
from fleetopt.errors import InfeasibleError
from fleetopt.instance import parse_instance
from fleetopt.perf.replica import Replica
from fleetopt.pipeline import plan_fleet
from fleetopt.plan import Plan


def catalog_replica(
    model: str = "llama-3.1-8b", gpu: str = "h100-sxm", tp: int = 1, dtype: str = "bf16"
) -> Replica:
    """A replica of a catalog model on a catalog GPU, weights and KV in `dtype`."""
    spec = model_catalog()[model]
    return Replica(Model(model, spec, dtype, dtype), Gpu(gpu, gpu_catalog()[gpu], None, None), tp)


def analytic_instance(
    gpus: list[str],
    requests_per_s: float = 10.0,
    input_tokens: float = 1000,
    output_tokens: float = 200,
    ttft_ms: float | None = 1000,
    tpot_ms: float | None = 50,
    model: str = "llama-3.1-8b",
    modes: tuple[str, ...] = ("colocated",),
    tensor_parallel: tuple[int, ...] = (1,),
    weight_dtype: str = "bf16",
) -> dict:
    """One request class of one catalog model, analytic cost model (no profiles)."""
    slo = {k: v for k, v in (("ttft_ms", ttft_ms), ("tpot_ms", tpot_ms)) if v is not None}
    workload = {
        "name": "chat",
        "model": model,
        "requests_per_s": requests_per_s,
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
    }
    if slo:
        workload["slo"] = slo
    return {
        "name": "test",
        "gpus": [{"type": g} for g in gpus],
        "models": [{"name": model, "weight_dtype": weight_dtype}],
        "workloads": [workload],
        "serving": {"modes": list(modes), "tensor_parallel": list(tensor_parallel)},
    }


def seeded_instance(seed: int, limits: dict, classes: int = 2) -> dict:
    """Seeded classes of llama-3.1-8b on an l40s and an h100-sxm, queueing, both serving modes,
    tp 1 and 2, with the limits asked for: `nodes` (whole h100 nodes of 8), `cap` (at most
    `cap` l40s GPUs), `second_model` (every other class served by that model instead), and
    `objective`, `pricing` or `demand_profile` as given."""
    rng = random.Random(seed)
    gpus = [{"type": "l40s"}, {"type": "h100-sxm"}]
    if limits.get("nodes"):
        gpus[1]["gpus_per_node"] = 8
    if limits.get("cap"):
        gpus[0]["max_gpus"] = limits["cap"]
    workloads = [
        {
            "name": f"class-{i}",
            "model": "llama-3.1-8b",
            "requests_per_s": round(rng.uniform(3, 30), 1),
            "input_tokens": rng.choice([300, 1000, 3000]),
            "output_tokens": rng.choice([100, 300, 600]),
            "slo": {"ttft_ms": rng.choice([500, 1000, 2000]), "tpot_ms": rng.choice([30, 50])},
        }
        for i in range(classes)
    ]
    models = [{"name": "llama-3.1-8b"}]
    if limits.get("second_model"):
        models.append({"name": limits["second_model"]})
        for workload in workloads[1::2]:
            workload["model"] = limits["second_model"]
    data = {
        "name": f"seeded-{seed}",
        "gpus": gpus,
        "models": models,
        "workloads": workloads,
        "serving": {"modes": ["colocated", "disaggregated"], "tensor_parallel": [1, 2]},
    }
    data.update(
        {k: v for k, v in limits.items() if k in ("objective", "pricing", "demand_profile")}
    )
    return data


def solve(data: dict) -> Plan:
    return plan_fleet(parse_instance(copy.deepcopy(data)))


def cost_or_inf(data: dict) -> float:
    """Cost of the optimal plan; an infeasible instance costs +inf (no fleet at any price)."""
    try:
        return solve(data).cost_per_hour
    except InfeasibleError:
        return math.inf


# --- measured-profile instances with several models and roles (budget, periods, compare, ------
# --- multi-model tests) -------------------------------------------------------------------------


def measured_instance(
    gpus: list[dict],
    workloads: list[tuple[str, str, float, float, float]],
    capacity: dict[tuple[str, str, str], dict[str, float]],
    modes: tuple[str, ...] = ("colocated",),
) -> dict:
    """An instance whose only configs are measured profiles (tp 1).

    gpus: GpuChoice dicts ({"type", "price_per_gpu_hour", optional "max_gpus", ...});
    workloads: (name, model, input tokens, output tokens, requests/s);
    capacity: (model, gpu, role) -> {class name: max requests/s of one replica}; give every
    (model, gpu, role) the modes allow, or the analytic cost model fills in the missing ones.
    Each table has one row per class at the class's exact lengths. Give the classes of one model
    lengths that grow in both input and output, so the exact row is the only nearest covering
    row and the table's rate is the rate the program uses."""
    models = sorted({model for _, model, *_ in workloads})
    lengths = {name: (inp, out) for name, _, inp, out, _ in workloads}
    return {
        "name": "measured",
        "gpus": [dict(g) for g in gpus],
        "models": [{"name": m} for m in models],
        "workloads": [
            {
                "name": name,
                "model": model,
                "requests_per_s": rate,
                "input_tokens": inp,
                "output_tokens": out,
            }
            for name, model, inp, out, rate in workloads
        ],
        "serving": {"modes": list(modes), "tensor_parallel": [1]},
        "profiles": [
            {
                "model": model,
                "gpu": gpu,
                "tensor_parallel": 1,
                "role": role,
                "table": [
                    {
                        "input_tokens": lengths[c][0],
                        "output_tokens": lengths[c][1],
                        "max_requests_per_s": mu,
                    }
                    for c, mu in rates.items()
                ]
                # no rates: a row that covers no class, so the config carries nothing (and no
                # analytic config stands in for it)
                or [{"input_tokens": 1, "output_tokens": 1, "max_requests_per_s": 1}],
            }
            for (model, gpu, role), rates in capacity.items()
        ],
    }


def max_alpha_lp(
    rates: dict[str, float], mu: dict[str, dict[str, float]], fleet: dict[str, int]
) -> float:
    """Largest uniform scale alpha of the class rates that a fixed fleet of colocated measured
    replicas carries: max alpha s.t. sum_g r[c][g] = alpha*rates[c], sum_c r[c][g]/mu[g][c] <=
    fleet[g]. A pure LP handed to HiGHS directly (no fleetopt code, no integers)."""
    import highspy
    import numpy as np

    classes, types = list(rates), list(fleet)
    pairs = [(c, g) for c in classes for g in types if mu[g].get(c)]
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    # HiGHS's thread scheduler is process-wide: one thread, as fleetopt's solves ask for, or
    # every later solve in this process fails (see test_budget.py).
    h.setOptionValue("threads", 1)
    inf = highspy.kHighsInf
    n = len(pairs)  # variables 0..n-1 are the routed rates, n is alpha
    costs = np.zeros(n + 1)
    costs[n] = -1.0  # minimise -alpha
    h.addVars(n + 1, np.zeros(n + 1), np.full(n + 1, inf))
    h.changeColsCost(n + 1, np.arange(n + 1, dtype=np.int32), costs)
    for c in classes:
        idx = [i for i, (ci, _) in enumerate(pairs) if ci == c] + [n]
        val = [1.0] * (len(idx) - 1) + [-rates[c]]
        h.addRow(0.0, 0.0, len(idx), np.array(idx, dtype=np.int32), np.array(val))
    for g in types:
        idx = [i for i, (_, gi) in enumerate(pairs) if gi == g]
        if idx:
            val = [1.0 / mu[g][pairs[i][0]] for i in idx]
            h.addRow(-inf, float(fleet[g]), len(idx), np.array(idx, dtype=np.int32), np.array(val))
    h.run()
    assert h.getModelStatus() == highspy.HighsModelStatus.kOptimal
    return -h.getInfo().objective_function_value


def routing_feasible(
    rates: dict[str, float],
    configs: list[tuple[str, str, dict[str, float]]],
    replicas: tuple[int, ...],
) -> bool:
    """Whether fixed replica counts of measured configs carry every class: a feasibility LP over
    the routed rates (HiGHS's LP solver directly, no fleetopt code). configs are (gpu, role,
    {class: mu}); a colocated config counts towards a class's prefill and decode, a prefill or
    decode config towards one of them; sum_c r[c,k]/mu[k][c] <= replicas[k]."""
    import highspy
    import numpy as np

    pairs = [(c, k) for k, (_, _, mu) in enumerate(configs) for c in mu if c in rates]
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("threads", 1)  # see max_alpha_lp
    inf = highspy.kHighsInf
    h.addVars(len(pairs), np.zeros(len(pairs)), np.full(len(pairs), inf))
    for c, rate in rates.items():
        for phase in ("prefill", "decode"):
            idx = [
                i
                for i, (ci, k) in enumerate(pairs)
                if ci == c and configs[k][1] in (phase, "colocated")
            ]
            if not idx:
                return False
            h.addRow(rate, rate, len(idx), np.array(idx, dtype=np.int32), np.ones(len(idx)))
    for k, (_, _, mu) in enumerate(configs):
        idx = [i for i, (_, ki) in enumerate(pairs) if ki == k]
        if idx:
            val = [1.0 / mu[pairs[i][0]] for i in idx]
            upper = replicas[k] * (1 + 1e-7)
            h.addRow(-inf, upper, len(idx), np.array(idx, dtype=np.int32), np.array(val))
    h.run()
    status = h.getModelStatus()
    assert status in (highspy.HighsModelStatus.kOptimal, highspy.HighsModelStatus.kInfeasible)
    return status == highspy.HighsModelStatus.kOptimal


def brute_force_fleet(
    rates: dict[str, float],
    configs: list[tuple[str, str, dict[str, float]]],
    prices: dict[str, float],
    caps: dict[str, int] | None = None,
) -> tuple[float, tuple[int, ...]]:
    """Cheapest replica counts of measured tp-1 configs (gpu, role, {class: mu}) that carry
    every class within the GPU caps, by exhaustive enumeration, cheapest first. No config needs
    more replicas than carry all its eligible demand alone, so the enumeration stops there.
    Returns (math.inf, ()) when no fleet exists."""
    import itertools
    import math

    caps = caps or {}
    ranges = []
    for gpu, _, mu in configs:
        alone = math.ceil(sum(rates[c] / m for c, m in mu.items() if c in rates) - 1e-9)
        ranges.append(range(min(alone, caps.get(gpu, alone)) + 1))
    fleets = []
    for x in itertools.product(*ranges):
        used: dict[str, int] = {}
        for n, (gpu, _, _) in zip(x, configs, strict=True):
            used[gpu] = used.get(gpu, 0) + n
        if all(used[g] <= caps[g] for g in used if g in caps):
            fleets.append((sum(n * prices[g] for g, n in used.items()), x))
    for cost, x in sorted(fleets):
        if routing_feasible(rates, configs, x):
            return cost, x
    return math.inf, ()
