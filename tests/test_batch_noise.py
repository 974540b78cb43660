"""The batch's swings (perf/batch_noise.py): closed forms where they exist, and the simulator."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from fleetopt.catalog import resolve
from fleetopt.configs import request_class
from fleetopt.instance import TokenDistribution, load_instance
from fleetopt.perf.batch_noise import batch_variance_ratio
from fleetopt.perf.curves import replica_for
from fleetopt.perf.operating_point import (
    Limits,
    OperatingPoint,
    RequestShape,
    admission_headroom,
    batch_swing,
)
from fleetopt.perf.queueing import max_load
from fleetopt.pipeline import plan_fleet
from fleetopt.simulate import poisson_report
from fleetopt.workload.lengths import sampler_for
from tests.helpers import catalog_replica

INSTANCES = Path(__file__).resolve().parent.parent / "instances"
DATA = Path(__file__).resolve().parent / "data"


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


LIMITS = Limits(max_prefill_utilization=0.9, max_num_seqs=256, gpu_memory_utilization=0.9)
CHAT = RequestShape(1000, 300, 1000, 300, ttft_s=1.5, tpot_s=0.15)
BULK = RequestShape(1000, 300, 1000, 300, ttft_s=None, tpot_s=None)


def test_the_headroom_shrinks_as_the_step_feeds_back():
    """The same slots and wait: on a decode point whose step is mostly its batch's (a long
    step budget over a small fixed part) the batch swings wider than where the fixed part
    dominates, so less of the slots may be filled; both under the Poisson headroom."""
    replica = catalog_replica("llama-3.1-8b", "h100-sxm")
    tight, loose = (OperatingPoint("decode", tau, 0) for tau in (0.012, 0.060))
    (h_tight,) = admission_headroom(replica, tight, [CHAT], LIMITS)
    (h_loose,) = admission_headroom(replica, loose, [CHAT], LIMITS)
    poisson = max_load(LIMITS.max_num_seqs, ((1.0, 1 / CHAT.output_mean),), 0.01) / 256
    assert 0 < h_loose < h_tight < poisson < 1


def test_a_class_without_targets_keeps_the_headroom_beside_one_with_targets():
    """They share one first-come-first-served admission queue: untimed sequences filling every
    slot would make the timed class wait (a random instance's p99.9 class met its targets for
    97.5% of requests that way). Alone, untimed classes fill every slot."""
    replica = catalog_replica("llama-3.1-8b", "h100-sxm")
    op = OperatingPoint("decode", 0.030, 0)
    assert admission_headroom(replica, op, [BULK], LIMITS) == [1.0]
    chat, bulk = admission_headroom(replica, op, [CHAT, BULK], LIMITS)
    assert chat < 1 and bulk < 1


def _spread(shape: RequestShape, prompts: TokenDistribution) -> RequestShape:
    sampler = sampler_for(prompts)
    return replace(
        shape, input_mean=prompts.mean, input_moments=sampler.moments(), input_cv2=sampler.cv2
    )


DOCS = TokenDistribution(mean=8000, p50=6368, p90=15334, p99=37234, max=66235)
ANSWERS = TokenDistribution(mean=200, p50=103, p90=445, p99=971, max=2349)


def test_the_reservations_spread_matches_sampled_sequences():
    """The batch holds each sequence for its output's steps, so the KV it reserves, s = L + O,
    is weighed by O: `reserved_tokens` is E[O·s]/E[O] and `reservation_cv2` E[O·s²]/E[O] over
    its square, less 1 (400,000 sampled requests)."""
    prompts, outputs = sampler_for(DOCS), sampler_for(ANSWERS)
    shape = RequestShape(
        DOCS.mean,
        ANSWERS.mean,
        DOCS.mean,
        ANSWERS.mean,
        ttft_s=None,
        tpot_s=0.2,
        input_moments=prompts.moments(),
        output_moments=outputs.moments(),
        input_cv2=prompts.cv2,
        output_cv2=outputs.cv2,
    )
    rng = np.random.default_rng(3)
    length = prompts.sample(rng, 400_000).astype(float)
    steps = outputs.sample(rng, 400_000).astype(float)
    size = length + steps
    mean = (steps * size).sum() / steps.sum()
    second = (steps * size**2).sum() / steps.sum()
    assert shape.reserved_tokens == pytest.approx(mean, rel=0.02)
    assert shape.reservation_cv2 == pytest.approx(second / mean**2 - 1, rel=0.05)
    alike = replace(shape, input_moments=(), output_moments=(), input_cv2=0.0, output_cv2=0.0)
    assert alike.reservation_cv2 == 0


def test_spread_reservations_leave_less_of_the_kv_cache():
    """llama-3.1-70b decoded on one MI300X keeps ~90,000 tokens of KV: ten 8,200-token
    sequences. Prompts of the same mean spread as documents (p99 37,000 tokens) fill it
    unevenly, one 66,000-token prompt the room of eight: less of it may be filled on average
    than were every prompt at the mean."""
    replica = catalog_replica("llama-3.1-70b", "mi300x")
    op = OperatingPoint("decode", 0.084, 0)
    even = RequestShape(DOCS.mean, ANSWERS.mean, DOCS.mean, ANSWERS.mean, None, tpot_s=0.2)
    spread = _spread(even, DOCS)
    assert spread.reserved_tokens == even.reserved_tokens and spread.reservation_cv2 > 0.5
    (h_even,) = admission_headroom(replica, op, [even], LIMITS)
    (h_spread,) = admission_headroom(replica, op, [spread], LIMITS)
    assert 0 < h_spread < 0.8 * h_even


def test_a_decode_pool_of_spread_reservations_holds_its_tpot_in_simulation():
    """tests/data/kv_spread_decode.yaml: the prompts above, decoded on MI300X at tp 1. Sized on
    the mean reservation, one decode replica queued sequences for KV behind long prompts in
    simulation: p99 TPOT 592 ms against a 200-ms target, 97.4% of requests within it. Counting
    the sizes' spread, the plan holds its TPOT at the percentile."""
    instance = load_instance(DATA / "kv_spread_decode.yaml")
    plan = plan_fleet(instance)
    report = poisson_report(plan, resolve(instance), count=20_000, seed=0)
    (workload,) = report["workloads"]
    assert workload["tpot_ms"]["p99"] <= workload["slo"]["tpot_ms"]
    assert workload["slo_attainment"]["both"] >= 0.99
