"""Candidate boundaries where the cheapest GPU type changes with prompt length: checked against
single-type fleets solved for requests of each length alone."""

from __future__ import annotations

import copy

from fleetopt.errors import InfeasibleError
from fleetopt.instance import parse_instance
from fleetopt.pipeline import plan_fleet
from fleetopt.workload.buckets import candidates
from fleetopt.workload.crossings import cost_crossings
from fleetopt.workload.derive import sample_of

SLO = {"ttft_ms": 800, "tpot_ms": 50}
CELLS = [(100, 200, 0.2), (4000, 200, 0.2), (4500, 200, 0.6)]
# (3000 and 6000 tokens until 2026-12-03, when the A100's colocated points at tighter
# longest-step budgets made it the cheapest 20 req/s fleet at 3000 tokens too)
GPUS = ("a100-80gb", "h100-sxm")
"""Short and medium prompts are a minority: no quantile candidate falls between them."""


def _instance(gpus: list[str], workload: dict) -> dict:
    return {
        "name": "crossings",
        "gpus": [{"type": g} for g in gpus],
        "models": [{"name": "llama-3.1-8b"}],
        "workloads": [{"name": "chat", "model": "llama-3.1-8b", "slo": SLO, **workload}],
        "serving": {"modes": ["colocated"], "tensor_parallel": [1]},
    }


def _cheapest_type(prompt_tokens: int) -> str:
    """Brute force: the GPU type whose single-type fleet serves this length alone cheapest."""
    costs = {}
    for gpu in GPUS:
        fixed = {"requests_per_s": 20, "input_tokens": prompt_tokens, "output_tokens": 200}
        try:
            costs[gpu] = plan_fleet(parse_instance(_instance([gpu], fixed))).cost_per_hour
        except InfeasibleError:
            continue
    return min(costs, key=costs.get)


def test_a_boundary_sits_where_the_cheapest_gpu_type_changes():
    histogram = [{"input_tokens": i, "output_tokens": o, "share": s} for i, o, s in CELLS]
    data = _instance(list(GPUS), {"requests_per_s": 20, "lengths": {"histogram": histogram}})
    instance = parse_instance(copy.deepcopy(data))
    workload = instance.workloads[0]
    sample = sample_of(workload)
    found = cost_crossings(instance, workload, sample)
    (short, _, _), (medium, _, _), (long, _, _) = CELLS
    assert _cheapest_type(short) != _cheapest_type(medium)
    assert _cheapest_type(medium) == _cheapest_type(long)
    assert len(found) == 1 and short < found[0] <= medium
    assert candidates(sample) == []  # the quantiles alone would not offer it
    assert cost_crossings(instance, workload, sample, jobs=2) == found  # probes in workers
    plan = plan_fleet(instance)
    assert plan.length_routing["candidate_boundaries"] == {"chat": found}
    assert plan.length_routing["best_two_pool_boundaries"] == {"chat": found}
