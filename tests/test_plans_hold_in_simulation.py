"""Every shipped instance's plan meets its targets in simulation at the stated percentile.

The program holds TTFT and TPOT with a queueing model (docs/latency.md); the simulator runs the
plan's fleet with iteration-level batching and the same step-time model, Poisson arrivals at the
planned rates, 20,000 requests, seed 0, and measures what share of requests met both targets.
It must be the stated percentile, within one percentage point. Instances sized by measured
profiles have no step model to simulate.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetopt.catalog import resolve
from fleetopt.instance import load_instance
from fleetopt.pipeline import plan_fleet
from fleetopt.simulate import poisson_report

INSTANCES = sorted((Path(__file__).resolve().parent.parent / "instances").glob("*.yaml"))
SIMULATED = [p for p in INSTANCES if not load_instance(p).profiles]


@pytest.mark.parametrize("path", SIMULATED, ids=lambda p: p.stem)
def test_plan_meets_its_targets_in_simulation(path):
    instance = load_instance(path)
    resolved = resolve(instance)
    plan = plan_fleet(instance)
    report = poisson_report(plan, resolved, count=20_000, seed=0)
    assert report["requests"] >= 20_000
    checked = 0
    for w in report["workloads"]:
        slo = w["slo"]
        if not slo:
            continue
        met = w["slo_attainment"]["both"]
        assert met >= slo["percentile"] / 100 - 0.01, (w["name"], met, w["ttft_ms"], w["tpot_ms"])
        checked += 1
    assert checked or all(not w.slo for w in instance.workloads)
