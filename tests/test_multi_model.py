"""Several models in one fleet: replicas run one model, so every model has its own pools, and all
models share the GPU types' availability caps.

Known optimum by brute force with measured profiles (helpers.brute_force_fleet: replica counts
per (model, GPU type) config within the shared caps, routing LP), and properties on an analytic
two-model instance.
"""

from __future__ import annotations

import copy
import itertools
from collections import defaultdict

import pytest
from helpers import brute_force_fleet, measured_instance, solve

from fleetopt.catalog import resolve
from fleetopt.instance import parse_instance
from fleetopt.verify import verify

# a10g 1.00 $/h (capped), a100-80gb 2.50 $/h (uncapped).
# Model llama-2-7b, class "a" (500 in / 200 out): a10g 2 req/s, a100 6 req/s; lambda 8.
# Model mistral-7b, class "b" (1000 in / 300 out): a10g 1 req/s, a100 3 req/s; lambda 5.
# Alone and uncapped: a -> 1 a100 + 1 a10g = 3.50 (8 req/s; 4 a10g = 4.00, 2 a100 = 5.00);
#                     b -> 1 a100 + 2 a10g = 4.50 (5 req/s; 5 a10g = 5.00, 2 a100 = 5.00).
# Together they want 3 a10g: cap 3 -> 8.00. Cap 2: one of them must change:
#   a as before (1 a10g) + b on 2 a100 (5.00) = 8.50;  a on 2 a100 + b as before = 9.50;
#   so 8.50 with 2 a100 for b, 1 a100 + 1 a10g for a. Cap 0: 2 a100 + 2 a100 = 10.00.
PRICES = {"a10g": 1.00, "a100-80gb": 2.50}
MU = {
    ("llama-2-7b", "a10g"): {"a": 2.0},
    ("llama-2-7b", "a100-80gb"): {"a": 6.0},
    ("mistral-7b", "a10g"): {"b": 1.0},
    ("mistral-7b", "a100-80gb"): {"b": 3.0},
}
WORKLOADS = {"a": ("llama-2-7b", 500, 200, 8.0), "b": ("mistral-7b", 1000, 300, 5.0)}
# Cap 1: the 8.50 fleet uses a single a10g, so it stays optimal.
HAND = {None: 8.00, 3: 8.00, 2: 8.50, 1: 8.50, 0: 10.00}


def _data(cap: int | None, classes: tuple[str, ...] = ("a", "b")) -> dict:
    gpus = [{"type": g, "price_per_gpu_hour": p} for g, p in PRICES.items()]
    if cap is not None:
        gpus[0]["max_gpus"] = cap
    return measured_instance(
        gpus,
        [(c, *WORKLOADS[c]) for c in classes],
        {
            (model, gpu, "colocated"): mu
            for (model, gpu), mu in MU.items()
            if any(WORKLOADS[c][0] == model for c in classes)
        },
    )


def _brute(cap: int | None, classes: tuple[str, ...] = ("a", "b")) -> float:
    rates = {c: WORKLOADS[c][3] for c in classes}
    models = {WORKLOADS[c][0] for c in classes}
    configs = [(gpu, "colocated", mu) for (model, gpu), mu in MU.items() if model in models]
    caps = {"a10g": cap} if cap is not None else None
    return brute_force_fleet(rates, configs, PRICES, caps)[0]


def _check(plan, data: dict) -> None:
    """Verified; every class served only by pools of its own model; caps respected; the GPU
    totals are the sum of the per-model pools."""
    assert verify(plan, resolve(parse_instance(copy.deepcopy(data)))) == []
    model_of = {w["name"]: w["model"] for w in data["workloads"]}
    for w in plan.workloads:
        assert w.routes, w.name
        for phase in ("prefill", "decode"):
            routed = sum(r.requests_per_s for r in w.routes if r.phase in (phase, "both"))
            assert routed == pytest.approx(w.requests_per_s), (w.name, phase)
        for r in w.routes:
            assert plan.pools[r.pool].model == model_of[w.name]
    used: dict[str, int] = defaultdict(int)
    for p in plan.pools:
        used[p.gpu] += p.gpus
    for g in data["gpus"]:
        if "max_gpus" in g:
            assert plan.gpus.get(g["type"], 0) <= g["max_gpus"]
        assert used[g["type"]] <= plan.gpus.get(g["type"], 0)
    assert {p.model for p in plan.pools} == set(model_of.values())


@pytest.mark.parametrize("cap", [None, 3, 2, 1, 0])
def test_two_models_shared_cap_known_optimum(cap):
    expected = _brute(cap)
    assert expected == pytest.approx(HAND[cap])
    data = _data(cap)
    plan = solve(data)
    assert plan.status == "optimal"
    assert plan.cost_per_hour == pytest.approx(expected, abs=1e-6)
    _check(plan, data)


def test_cap_two_splits_the_models_as_derived():
    plan = solve(_data(2))
    by_model: dict[str, dict[str, int]] = defaultdict(dict)
    for p in plan.pools:
        by_model[p.model][p.gpu] = by_model[p.model].get(p.gpu, 0) + p.gpus
    assert dict(by_model) == {
        "llama-2-7b": {"a100-80gb": 1, "a10g": 1},
        "mistral-7b": {"a100-80gb": 2},
    }
    assert plan.gpus == {"a10g": 1, "a100-80gb": 3}


@pytest.mark.parametrize("cap", [None, 2, 1])
def test_removing_one_models_demand_never_raises_cost(cap):
    both = solve(_data(cap)).cost_per_hour
    for keep in ("a", "b"):
        alone = _brute(cap, (keep,))
        data = _data(cap, (keep,))
        plan = solve(data)
        assert plan.cost_per_hour == pytest.approx(alone, abs=1e-6)
        assert plan.cost_per_hour <= both + 1e-9
        _check(plan, data)
    # Pools never mix models, so the only coupling is the shared cap: apart, each model could
    # use all of it; together they cost at least the sum, and exactly the sum when uncapped.
    apart = _brute(cap, ("a",)) + _brute(cap, ("b",))
    assert both >= apart - 1e-9
    if cap is None:
        assert both == pytest.approx(apart)


def _analytic(cap: int | None, with_second: bool = True) -> dict:
    l40s = {"type": "l40s"}
    if cap is not None:
        l40s["max_gpus"] = cap
    workloads = [
        {
            "name": "assistant",
            "model": "llama-3.1-8b",
            "requests_per_s": 12,
            "input_tokens": 800,
            "output_tokens": 200,
            "slo": {"ttft_ms": 1500, "tpot_ms": 60},
        }
    ]
    models = [{"name": "llama-3.1-8b"}]
    if with_second:
        workloads.append(
            {
                "name": "coder",
                "model": "qwen2.5-7b",
                "requests_per_s": 6,
                "input_tokens": 2000,
                "output_tokens": 300,
                "slo": {"ttft_ms": 2000, "tpot_ms": 50},
            }
        )
        models.append({"name": "qwen2.5-7b"})
    return {
        "name": "two-models",
        "gpus": [{"type": "l4"}, l40s],
        "models": models,
        "workloads": workloads,
        "serving": {"modes": ["colocated", "disaggregated"], "tensor_parallel": [1, 2]},
    }


@pytest.mark.parametrize("cap", [None, 4, 2])
def test_analytic_two_models_share_a_cap(cap):
    data = _analytic(cap)
    plan = solve(data)
    assert plan.status == "optimal"
    _check(plan, data)
    one = solve(_analytic(cap, with_second=False))
    assert one.cost_per_hour <= plan.cost_per_hour * (1 + 1e-4)


def test_analytic_tighter_shared_cap_never_costs_less():
    costs = [solve(_analytic(cap)).cost_per_hour for cap in (None, 6, 4, 3, 2)]
    assert all(b >= a * (1 - 1e-4) for a, b in itertools.pairwise(costs)), costs
