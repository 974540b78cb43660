"""A request's own sequence in the step it sees (perf/operating_point.py `own_sequence_s`):
the TPOT row holds the batch's mean plus the larger of z standard deviations and one sequence
of the costliest TPOT-bound class, in the program and in verify."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest

from fleetopt.catalog import resolve
from fleetopt.instance import load_instance
from fleetopt.perf.operating_point import (
    DECODE_STEP,
    Limits,
    OperatingPoint,
    RequestShape,
    capacity,
    step_quantile,
    usage,
    with_latency_margins,
)
from fleetopt.pipeline import plan_fleet
from fleetopt.simulate import poisson_report
from fleetopt.verify import verify
from tests.helpers import catalog_replica

DATA = Path(__file__).resolve().parent / "data"
LIMITS = Limits(max_prefill_utilization=0.95, max_num_seqs=256, gpu_memory_utilization=0.9)


def _decode_row(shape: RequestShape, step_s: float) -> tuple[float, float, float]:
    """The decode step row's capacity and usage with the margins, and the class's β."""
    replica = catalog_replica("llama-3.1-70b", "l40s", tp=8)
    op = OperatingPoint("decode", step_s, 0)
    caps, use = capacity(replica, op, LIMITS), usage(replica, op, shape)
    margins = with_latency_margins(replica, op, {"c": shape}, LIMITS, caps, {"c": use})
    assert margins is not None
    beta = use[DECODE_STEP] / shape.output_mean
    return caps[DECODE_STEP] - margins[0][DECODE_STEP], margins[1]["c"][DECODE_STEP], beta


def _shape(input_mean: float, percentile: float) -> RequestShape:
    return RequestShape(
        input_mean, 300, input_mean, 300, None, tpot_s=0.04, miss_share=1 - percentile / 100
    )


def test_near_the_median_the_step_keeps_room_for_the_request_itself():
    """At p50 (z = 0) the row had no margin; it now keeps one sequence's β of the step, and
    the usage is the mean's."""
    step_s = 0.038
    cut, used, beta = _decode_row(_shape(66_000, 50), step_s)
    assert cut == pytest.approx(beta / step_s, rel=1e-12)
    assert used == pytest.approx(_shape(66_000, 50).output_mean * beta, rel=1e-12)


def test_at_a_high_percentile_the_z_term_covers_it():
    """At p99 on short contexts the batch is large and z·√(S·β)/2 exceeds one β: the row is
    the z term's alone."""
    step_s = 0.038
    shape = _shape(1_000, 99)
    cut, _, beta = _decode_row(shape, step_s)
    replica = catalog_replica("llama-3.1-70b", "l40s", tp=8)
    budget = step_s - replica.floor_s
    z = step_quantile([shape])
    assert z * math.sqrt(budget * beta) / 2 > beta
    assert cut == pytest.approx(z * math.sqrt(budget * beta) / 2 / step_s, rel=1e-12)


def test_a_long_prompt_pool_holds_a_low_percentile_in_simulation():
    """tests/data/own_sequence_decode.yaml: its plan passes verify and, simulated, meets the
    TPOT at p55 (51% of requests before the own sequence counted); with one decode replica
    fewer, verify refuses it for the step at the percentile, the mean step still in budget."""
    instance = load_instance(DATA / "own_sequence_decode.yaml")
    resolved = resolve(instance)
    plan = plan_fleet(instance)
    assert verify(plan, resolved) == []
    pools = [
        replace(p, replicas=p.replicas - 1, gpus=p.gpus - p.tensor_parallel)
        if p.role == "decode"
        else p
        for p in plan.pools
    ]
    (problem,) = verify(replace(plan, pools=pools), resolved)
    assert "the batch at the TPOT percentile" in problem
    report = poisson_report(plan, resolved, count=20_000, seed=0)
    (workload,) = report["workloads"]
    assert workload["slo_attainment"]["tpot"] >= 0.55
