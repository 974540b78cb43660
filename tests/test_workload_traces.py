"""The shipped trace instances: `fleetopt solve` on the Azure LLM traces themselves, and the
whole hour of each trace replayed against its plan, which holds at every bucket's percentile
within one point (the rates are sized for the busiest window each instance names)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetopt.catalog import resolve
from fleetopt.instance import load_instance
from fleetopt.pipeline import plan_fleet
from fleetopt.simulate import request_stream, simulate_plan

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("trace", ["conv", "code"])
def test_the_azure_trace_replays_against_its_plan(trace):
    instance = load_instance(ROOT / "instances" / f"azure-{trace}-trace-70b.yaml")
    plan, resolved = plan_fleet(instance), resolve(instance)
    routing = plan.length_routing
    assert routing["saving_vs_one_pool_per_hour"] >= 0
    assert routing["saving_vs_best_two_pool_per_hour"] >= 0
    path = ROOT / "instances" / "data" / f"azure-llm-2023-{trace}.csv"
    requests = request_stream(plan, resolved, trace=str(path))
    report = simulate_plan(plan, resolved, requests)
    assert report["refused"] == 0
    assert (
        sum(w["requests"] for w in report["workloads"]) == len(requests) - report["warmup_requests"]
    )
    for w in report["workloads"]:
        assert w["slo_attainment"]["both"] >= w["slo"]["percentile"] / 100 - 0.01, w["name"]
