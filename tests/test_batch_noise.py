"""The batch's swings (perf/batch_noise.py): closed forms where they exist, and the simulator."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from fleetopt.catalog import resolve
from fleetopt.configs import request_class
from fleetopt.instance import load_instance
from fleetopt.perf.batch_noise import batch_variance_ratio
from fleetopt.perf.curves import replica_for
from fleetopt.perf.operating_point import OperatingPoint, batch_swing
from fleetopt.pipeline import plan_fleet
from fleetopt.simulate import poisson_report

INSTANCES = Path(__file__).resolve().parent.parent / "instances"


def _exponential(mean: float, count: int = 256) -> list[tuple[float, float]]:
    middles = (np.arange(count) + 0.5) / count
    return [(1 / count, float(-mean * np.log(1 - p))) for p in middles]


@pytest.mark.parametrize("outputs", [[(1.0, 300.0)], _exponential(300)])
def test_a_fixed_step_gives_a_poisson_batch(outputs):
    assert batch_variance_ratio(outputs, 0.0) == pytest.approx(1.0, rel=0.01)


@pytest.mark.parametrize(
    ("kappa", "rho", "cv2"), [(0.5, 0.0, 0.0), (0.8, 0.0, 0.0), (0.23, 0.58, 0.0), (0.1, 0.6, 1.0)]
)
def test_exponential_outputs_match_the_closed_form(kappa, rho, cv2):
    """(1/a)·(1 + ρ²(1 + cv²)/(2(1 − ρ))), a = 1 − κ − ρ; with no prompts the birth–death
    chain's 1/(1 − κ). The closed form is the integral's in continuous time; the sampled
    exponential's 256 quantiles and the discrete steps leave about a percent."""
    fixed = 1 - kappa - rho
    closed = (1 + rho**2 * (1 + cv2) / (2 * (1 - rho))) / fixed
    assert batch_variance_ratio(_exponential(300), kappa, rho, cv2) == pytest.approx(
        closed, rel=0.02
    )


def test_fixed_outputs_swing_wider_than_exponential_ones_when_prompts_share_the_step():
    det = batch_variance_ratio([(1.0, 300.0)], 0.23, 0.58)
    expo = batch_variance_ratio(_exponential(300), 0.23, 0.58)
    assert det > 1.5 * expo


def test_a_step_that_outgrows_its_batch_has_no_steady_state():
    assert math.isinf(batch_variance_ratio([(1.0, 100.0)], 0.7, 0.3))
    assert math.isinf(batch_variance_ratio([(1.0, 100.0)], 0.8, 0.3))


def test_the_predicted_spread_matches_the_simulated_batch():
    """chatbot-8b's one colocated pool runs its batch at a fifth of the step's fixed part: the
    simulator's batch swings twice as wide as a Poisson count, as predicted (docs/latency.md,
    "Batch swings"; within 20%)."""
    instance = load_instance(INSTANCES / "chatbot-8b.yaml")
    resolved = resolve(instance)
    plan = plan_fleet(instance)
    report = poisson_report(plan, resolved, count=20_000, seed=0)
    (pool,) = plan.pools
    shapes = {w.name: request_class(w).shape for w in instance.workloads}
    loads = [
        (shapes[w.name], r.requests_per_s / pool.replicas) for w in plan.workloads for r in w.routes
    ]
    model, gpu = resolved.models[pool.model], resolved.gpus[pool.gpu]
    replica = replica_for(model, gpu, pool.tensor_parallel, pool.role, [])
    swing = batch_swing(replica, OperatingPoint(pool.role, pool.step_ms / 1e3, 0), loads)
    simulated = report["pools"][0]
    mean, spread = simulated["mean_batch"], simulated["batch_sd"]
    assert spread > 1.5 * math.sqrt(mean)  # not a Poisson count
    assert math.sqrt(swing * mean) == pytest.approx(spread, rel=0.2)
