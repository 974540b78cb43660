"""Measured curves (profiles[].prefill / profiles[].decode) in place of the roofline: a known
optimum by hand, conservative interpolation, coverage, and bad input."""

from __future__ import annotations

import copy
import itertools
import math
import random
from dataclasses import replace

import pytest
from helpers import analytic_instance, solve

from fleetopt.catalog import resolve
from fleetopt.configs import enumerate_configs
from fleetopt.errors import InfeasibleError, InputError
from fleetopt.instance import DecodePoint, PrefillPoint, parse_instance
from fleetopt.perf.curves import CurveReplica, DecodePlane, PrefillCurve
from fleetopt.simulate import poisson_report
from fleetopt.simulate.simulator import pool_replicas
from fleetopt.verify import verify

PREFILL = [(500, 8000.0), (1000, 10000.0), (2000, 9000.0)]  # (prompt tokens, tokens/s)
FIXED_MS, PER_SEQ_MS, PER_TOKEN_MS = 5.0, 0.1, 1e-4
BATCHES, CONTEXTS = (1, 16, 64), (512, 2048, 4096)


def _step_ms(batch: int, context: float) -> float:
    return FIXED_MS + batch * (PER_SEQ_MS + PER_TOKEN_MS * context)


def _curves(role: str) -> dict:
    profile = {"model": "llama-3.1-8b", "gpu": "h100-sxm", "role": role}
    if role != "decode":
        profile["prefill"] = [{"input_tokens": n, "tokens_per_s": r} for n, r in PREFILL]
    if role != "prefill":
        profile["decode"] = [
            {"batch": b, "context_tokens": c, "step_ms": _step_ms(b, c)}
            for b, c in itertools.product(BATCHES, CONTEXTS)
        ]
    return profile


def _disaggregated(rate: float, input_tokens: float, output_tokens: float) -> dict:
    data = analytic_instance(
        ["h100-sxm"],
        requests_per_s=rate,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        ttft_ms=None,
        tpot_ms=None,
        modes=("disaggregated",),
    )
    data["serving"]["max_prefill_utilization"] = 1.0
    data["profiles"] = [_curves("prefill"), _curves("decode")]
    return data


def test_disaggregated_curves_give_the_optimum_by_hand():
    """Throughput only (no margins). Prefill: a 1,500-token prompt lies between the 1,000 and
    2,000 points, so it runs at the lower rate, 9,000 tok/s: 6 req/s per replica (linear
    interpolation, 9,500, would give 6.33 and 4 replicas for 25 req/s instead of 5). Decode: the
    grid is exactly bilinear, so its bound is the grid's own formula, and its largest batch (64,
    below max_num_seqs 256) caps the batch: a step of 64 sequences at context 1,500 + 200/2
    carries 64 / (200 · step) req/s."""
    rate, prompt, output = 25.0, 1500, 200
    plan = solve(_disaggregated(rate, prompt, output))
    prefill_per_replica = min(10000.0, 9000.0) / prompt
    batch = max(BATCHES)
    decode_per_replica = batch / (output * _step_ms(batch, prompt + output / 2) / 1e3)
    replicas = {p.role: p.replicas for p in plan.pools}
    assert replicas == {
        "prefill": math.ceil(rate / prefill_per_replica),
        "decode": math.ceil(rate / decode_per_replica),
    }
    assert replicas["prefill"] == 5  # the conservative reading matters here
    resolved = resolve(parse_instance(_disaggregated(rate, prompt, output)))
    assert verify(plan, resolved) == []
    assert all(isinstance(r, CurveReplica) for r in pool_replicas(plan, resolved))  # simulate
    short = [replace(p, replicas=p.replicas - 1, gpus=p.gpus - 1) for p in plan.pools]
    for index in range(len(short)):  # one replica fewer in any pool breaks the measured capacity
        pools = [short[i] if i == index else p for i, p in enumerate(plan.pools)]
        gpus = {"h100-sxm": sum(p.gpus for p in pools)}
        cost = plan.cost_per_hour * gpus["h100-sxm"] / sum(p.gpus for p in plan.pools)
        assert verify(replace(plan, pools=pools, gpus=gpus, cost_per_hour=cost), resolved)


def test_colocated_curves_with_targets_plan_and_verify():
    data = analytic_instance(
        ["h100-sxm"], requests_per_s=25, input_tokens=1500, output_tokens=200, ttft_ms=1500
    )
    data["profiles"] = [_curves("colocated")]
    plan = solve(data)
    assert plan.pools and all(not p.measured for p in plan.pools)
    assert verify(plan, resolve(parse_instance(copy.deepcopy(data)))) == []
    tpot_ms = data["workloads"][0]["slo"]["tpot_ms"]
    assert all(p.step_ms <= tpot_ms * (1 + 1e-9) for p in plan.pools)


def test_a_grid_flat_in_batch_plans_and_simulates():
    """A measured grid whose step does not grow with the batch at its longest context (noise,
    or a kernel that hides it): the batch costs no step time there, which the best-throughput
    step and the TPOT margin must take without dividing by it (a ZeroDivisionError until
    2026-12-04), and the plan verifies and simulates."""
    data = analytic_instance(
        ["h100-sxm"], requests_per_s=20, input_tokens=1000, output_tokens=300, ttft_ms=1500
    )
    profile = _curves("colocated")
    flat = {(1, 512): 8.0, (1, 4096): 20.0, (64, 512): 14.0, (64, 4096): 20.0}
    profile["decode"] = [
        {"batch": b, "context_tokens": c, "step_ms": ms} for (b, c), ms in flat.items()
    ]
    data["profiles"] = [profile]
    plan = solve(data)
    resolved = resolve(parse_instance(copy.deepcopy(data)))
    assert verify(plan, resolved) == []
    report = poisson_report(plan, resolved, count=2_000, seed=0)
    assert report["workloads"][0]["requests"] > 0


def test_a_measured_decode_pool_beside_an_analytic_prefill_pool_simulates():
    """Only decode is measured: the prefill pool uses the analytic model and the decode pool's
    curves have no prefill part, which the simulator must not ask for (an AttributeError until
    2026-12-04)."""
    data = _disaggregated(5.0, 500, 100)
    data["profiles"] = [_curves("decode")]
    plan = solve(data)
    resolved = resolve(parse_instance(copy.deepcopy(data)))
    kinds = {
        p.role: type(r) for p, r in zip(plan.pools, pool_replicas(plan, resolved), strict=True)
    }
    assert kinds["decode"] is CurveReplica and kinds["prefill"] is not CurveReplica
    report = poisson_report(plan, resolved, count=2_000, seed=0)
    assert report["workloads"][0]["requests"] > 0


def test_prefill_curve_never_beats_its_neighbours():
    rng = random.Random(3)
    for _ in range(50):
        lengths = sorted(rng.sample(range(64, 16384), rng.randint(1, 6)))
        points = [(n, rng.uniform(1e3, 5e4)) for n in lengths]
        curve = PrefillCurve.of([PrefillPoint(input_tokens=n, tokens_per_s=r) for n, r in points])
        for n, r in points:
            assert curve.rate(n) == r
        for (n0, r0), (n1, r1) in itertools.pairwise(points):
            prompt = rng.uniform(n0, n1)
            assert curve.rate(prompt) <= min(r0, r1)
            assert curve.prompt_s(prompt) >= n0 / r0  # never faster than the shorter neighbour
        shorter = rng.uniform(1, lengths[0])
        assert curve.prompt_s(shorter) == pytest.approx(lengths[0] / points[0][1])
        with pytest.raises(ValueError, match="beyond the measured prefill curve"):
            curve.rate(lengths[-1] + 1)


def test_decode_bound_lies_on_or_above_every_point_and_cell():
    rng = random.Random(5)
    for _ in range(30):
        batches = sorted({1, *rng.sample(range(2, 512), rng.randint(1, 4))})
        contexts = sorted(rng.sample(range(128, 32768), rng.randint(1, 4)))
        step = {}  # a noisy grid, increasing in batch and context
        for b, c in itertools.product(batches, contexts):
            step[b, c] = rng.uniform(4, 8) + b * (rng.uniform(0.02, 0.2) + c * 2e-5)
        for b, c in itertools.product(batches[1:], contexts):
            step[b, c] = max(step[b, c], step[batches[batches.index(b) - 1], c])
        plane = DecodePlane.of(
            [DecodePoint(batch=b, context_tokens=c, step_ms=t) for (b, c), t in step.items()]
        )
        for (b, c), t in step.items():
            assert plane.step_s(b, b * c) * 1e3 >= t * (1 - 1e-12)
        for (b0, b1), (c0, c1) in itertools.product(
            itertools.pairwise(batches), itertools.pairwise(contexts)
        ):
            u, v = rng.random(), rng.random()
            b, c = b0 + u * (b1 - b0), c0 + v * (c1 - c0)
            corners = (1 - u) * (1 - v) * step[b0, c0] + u * (1 - v) * step[b1, c0]
            corners += (1 - u) * v * step[b0, c1] + u * v * step[b1, c1]
            assert plane.step_s(b, b * c) * 1e3 >= corners * (1 - 1e-9)


def test_decode_bound_of_a_bilinear_grid_is_the_grid():
    points = [
        DecodePoint(batch=b, context_tokens=c, step_ms=_step_ms(b, c))
        for b, c in itertools.product(BATCHES, CONTEXTS)
    ]
    plane = DecodePlane.of(points)
    assert plane.fixed_s == pytest.approx(FIXED_MS / 1e3)
    assert plane.per_seq_s == pytest.approx(PER_SEQ_MS / 1e3)
    assert plane.per_context_token_s == pytest.approx(PER_TOKEN_MS / 1e3)


@pytest.mark.parametrize(
    ("prompt", "output", "message"),
    [
        (2500, 200, "prefill curve measured up to 2,000-token prompts"),
        (1500, 6000, "decode grid measured up to 4,096 context tokens"),
    ],
)
def test_a_class_beyond_the_curves_is_not_covered(prompt, output, message):
    data = _disaggregated(5, prompt, output)
    configs = enumerate_configs(resolve(parse_instance(copy.deepcopy(data))))
    reasons = [r.reason for r in configs.rejections["chat"] if r.kind == "profile"]
    assert any(message in r for r in reasons)
    with pytest.raises(InfeasibleError, match=message):
        solve(data)


def _with_profile(**changes) -> dict:
    data = analytic_instance(["h100-sxm"])
    profile = _curves("colocated")
    profile.update(changes)
    data["profiles"] = [{k: v for k, v in profile.items() if v is not None}]
    return data


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"table": [{"input_tokens": 1, "output_tokens": 1, "max_requests_per_s": 1}]},
            "not both",
        ),
        ({"decode": None}, "needs a table or a decode curve"),
        ({"role": "prefill"}, "has no use for a decode curve"),
        ({"prefill": [{"input_tokens": 100, "tokens_per_s": 0}]}, "greater than 0"),
        (
            {"prefill": [{"input_tokens": 100, "tokens_per_s": 5}] * 2},
            "prompt length twice",
        ),
        (
            {"decode": [{"batch": b, "context_tokens": 512, "step_ms": 5} for b in (2, 4)]},
            "must include batch 1",
        ),
        (
            {
                "decode": [
                    {"batch": 1, "context_tokens": 512, "step_ms": 5},
                    {"batch": 8, "context_tokens": 1024, "step_ms": 9},
                ]
            },
            "lacks batch 1 at context_tokens 1024",
        ),
    ],
)
def test_bad_curves_are_input_errors(changes, message):
    with pytest.raises(InputError, match="profiles") as error:
        parse_instance(_with_profile(**changes))
    assert message in str(error.value)
