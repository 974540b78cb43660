"""Every shipped instance validates, solves, verifies, and prints the JSON of DESIGN §4."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner

from fleetopt.catalog import resolve
from fleetopt.cli import main
from fleetopt.instance import load_instance
from fleetopt.pipeline import plan_fleet
from fleetopt.plan import Plan
from fleetopt.solve import SolveOptions
from fleetopt.verify import verify

INSTANCES = sorted((Path(__file__).resolve().parent.parent / "instances").glob("*.yaml"))

NUMBER = (int, float)
POOL_FIELDS = {
    "model": str,
    "role": str,
    "gpu": str,
    "tensor_parallel": int,
    "replicas": int,
    "gpus": int,
    "cost_per_hour": NUMBER,
    "prefill_tokens_per_s": NUMBER,
    "decode_tokens_per_s": NUMBER,
    "utilization": NUMBER,
}
WORKLOAD_FIELDS = {
    "name": str,
    "prefill_tokens_per_s": NUMBER,
    "decode_tokens_per_s": NUMBER,
    "ttft_ms": (*NUMBER, type(None)),
    "tpot_ms": (*NUMBER, type(None)),
    "routes": list,
}


def test_there_are_instances():
    assert INSTANCES


@pytest.fixture(scope="module", params=INSTANCES, ids=lambda p: p.stem)
def solved(request):
    instance = load_instance(request.param)
    plan = plan_fleet(instance, SolveOptions(time_limit=60))
    return request.param, instance, plan


def test_instance_validates_with_the_cli(solved):
    path, instance, _ = solved
    result = CliRunner().invoke(main, ["validate", str(path)])
    assert result.exit_code == 0, result.output
    assert "valid" in result.stdout
    count = len(instance.workloads)
    assert f"{count} workload{'' if count == 1 else 's'})" in result.stdout


def test_instance_solves_and_verifies(solved):
    _, instance, plan = solved
    assert plan.status in ("optimal", "feasible")
    assert verify(plan, resolve(instance)) == []
    assert plan.cost_per_hour > 0
    if plan.status == "optimal" and plan.mip_gap is not None:
        assert plan.mip_gap <= 1e-4 + 1e-9


def test_instance_json_has_the_contract_fields(solved):
    _, instance, plan = solved
    data = json.loads(plan.to_json())
    assert data["status"] in ("optimal", "feasible")
    assert isinstance(data["cost_per_hour"], NUMBER)
    assert data["mip_gap"] is None or isinstance(data["mip_gap"], NUMBER)
    assert isinstance(data["solve_seconds"], NUMBER) and data["solve_seconds"] >= 0
    assert "periods" in data
    assert isinstance(data["gpus"], dict) and data["gpus"]
    assert all(isinstance(n, int) and n > 0 for n in data["gpus"].values())
    assert data["pools"]
    for pool in data["pools"]:
        for field, kind in POOL_FIELDS.items():
            assert isinstance(pool[field], kind), (field, pool[field])
        assert pool["gpus"] == pool["replicas"] * pool["tensor_parallel"]
        assert pool["role"] in ("colocated", "prefill", "decode")
        assert 0 <= pool["utilization"] <= 1 + 1e-6
    served = _served(instance, data)
    assert {w["name"] for w in data["workloads"]} == {n for ws in served.values() for n in ws}
    for w in data["workloads"]:
        for field, kind in WORKLOAD_FIELDS.items():
            assert isinstance(w[field], kind), (field, w[field])
        assert w["routes"]
        for route in w["routes"]:
            assert 0 <= route["pool"] < len(data["pools"])
            assert route["requests_per_s"] > 0
    # the numbers add up: GPUs bought cover the pools, cost = sum of GPUs x price
    prices = {g.name: g.price_per_gpu_hour for g in resolve(instance).gpus.values()}
    for gpu, n in data["gpus"].items():
        assert n >= sum(p["gpus"] for p in data["pools"] if p["gpu"] == gpu)
    if data["periods"] is None:
        assert data["cost_per_hour"] == pytest.approx(
            sum(n * prices[g] for g, n in data["gpus"].items())
        )
    else:
        # by period: reserved GPUs paid every hour, on-demand and spot at their factors
        tiers = instance.pricing
        reserved = data["reserved_gpus"] or {}
        total = 0.0
        for period in data["periods"]:
            on_demand, spot = period["on_demand_gpus"] or {}, period["spot_gpus"] or {}
            cost = sum(
                prices[g]
                * (
                    (tiers.reserved_price_factor * reserved.get(g, 0) if tiers else 0)
                    + (on_demand.get(g, 0) if tiers else period["gpus"].get(g, 0))
                    + (tiers.spot_price_factor * spot.get(g, 0) if tiers else 0)
                )
                for g in prices
            )
            assert period["cost_per_hour"] == pytest.approx(cost)
            total += period["hours"] * cost
        hours = sum(p["hours"] for p in data["periods"])
        assert data["cost_per_hour"] == pytest.approx(total / hours)
        assert data["saving_per_hour"] >= -1e-6  # never worse than one fleet sized for the peak
    # demand reported in tokens, as the instance states it (a length-routed workload's buckets
    # carry its tokens between them)
    for w in instance.workloads:
        outs = [x for x in data["workloads"] if x["name"] in served[w.name]]
        assert sum(x["prefill_tokens_per_s"] for x in outs) == pytest.approx(w.rate * w.input.mean)
        assert sum(x["decode_tokens_per_s"] for x in outs) == pytest.approx(w.rate * w.output.mean)


def _served(instance, data) -> dict[str, list[str]]:
    """The plan's workload names serving each instance workload: itself, or its length buckets."""
    buckets = (data.get("length_routing") or {}).get("buckets", [])
    served = {
        w.name: [b["name"] for b in buckets if b["source"] == w.name] for w in instance.workloads
    }
    return {name: names or [name] for name, names in served.items()}


def test_instance_json_round_trips(solved):
    _, instance, plan = solved
    again = Plan.from_dict(json.loads(plan.to_json()))
    assert again.cost_per_hour == plan.cost_per_hour
    assert verify(again, resolve(instance)) == []


def test_instance_slo_is_met_by_prediction(solved):
    """The predicted (queueing-free) latency of every class is within its targets."""
    _, instance, plan = solved
    served = _served(instance, json.loads(plan.to_json()))
    for w in instance.workloads:
        for out in (x for x in plan.workloads if x.name in served[w.name]):
            if w.slo is None:
                continue
            if w.slo.ttft_ms is not None and out.ttft_ms is not None:
                assert out.ttft_ms <= w.slo.ttft_ms * (1 + 1e-6)
            if w.slo.tpot_ms is not None and out.tpot_ms is not None:
                assert out.tpot_ms <= w.slo.tpot_ms * (1 + 1e-6)
            assert not math.isnan(out.prefill_tokens_per_s)
