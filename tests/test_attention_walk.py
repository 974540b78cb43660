"""Engines whose decode attention walks each sequence's context alone (`attention_latency_ns`)
and whose host spends time on each token (`sequence_overhead_us`): the step by hand, context
levels in the configs, the host's ceiling, plans that pass `verify`, and the simulator walking
its batch's longest context and waiting for its host."""

from __future__ import annotations

import copy
from heapq import heappop

import pytest

from fleetopt.catalog import gpu_catalog, resolve
from fleetopt.configs import enumerate_configs
from fleetopt.instance import parse_instance
from fleetopt.perf.calculator import replica_capacity
from fleetopt.perf.operating_point import HOST, Limits, RequestShape
from fleetopt.perf.replica import Replica
from fleetopt.perf.throughput import best_throughput
from fleetopt.simulate import simulate_plan
from fleetopt.simulate.arrivals import synthetic_requests
from fleetopt.simulate.engine import BatchReplica, Clock, Ledger, StepModel
from fleetopt.verify import verify
from tests.helpers import analytic_instance, catalog_replica, solve

GPU = "h100-sxm"
WALK_NS, HOST_US = 10.0, 80.0


def _efficiency(**update) -> dict:
    base = gpu_catalog()[GPU].efficiency.model_dump(exclude_none=True)
    return base | update


def _instance(**update) -> dict:
    """Llama 3.1 8B on H100s, a chat class (500/200) and a long-document class (8,000/500)."""
    data = analytic_instance([GPU], requests_per_s=4.0, input_tokens=500, tpot_ms=40)
    data["workloads"].append(
        copy.deepcopy(data["workloads"][0])
        | {"name": "docs", "input_tokens": 8000, "output_tokens": 500, "requests_per_s": 1.0}
    )
    data["workloads"][1]["slo"] = {"ttft_ms": 4000, "tpot_ms": 40}
    data["gpus"][0]["spec"] = {"efficiency": _efficiency(**update)}
    return data


def _replica(walk_tokens: float = 0.0, **update) -> Replica:
    plain = catalog_replica("llama-3.1-8b", GPU)
    spec = plain.gpu.spec.model_copy(
        update={"efficiency": plain.efficiency.model_copy(update=update)}
    )
    return Replica(plain.model, type(plain.gpu)(GPU, spec, None, None), 1, walk_tokens)


def test_step_adds_the_longest_walk_by_hand():
    """Llama 3.1 8B (32 layers), 8 sequences, longest 6,000 tokens: the walk is 32 · 10 ns ·
    6,000 = 1.92 ms on top of the step without it; the host's time is not in the step."""
    plain = catalog_replica("llama-3.1-8b", GPU)
    walking = _replica(6000, attention_latency_ns=WALK_NS, sequence_overhead_us=HOST_US)
    load = {"decode_seqs": 8, "decode_context_tokens": 30000}
    added = walking.step_s(**load) - plain.step_s(**load)
    assert added == pytest.approx(32 * 10e-9 * 6000, rel=1e-12)
    assert walking.at_walk(0).step_s(**load) == pytest.approx(plain.step_s(**load), rel=1e-12)


def test_the_host_caps_a_replica_tokens_per_second():
    """200 µs of host time per token: at most 5,000 output tokens/s per replica however large
    the batch (Llama 3.1 8B on an H100 makes ~12,800 at 200/200 without it); a small batch, far
    below the ceiling, is as fast as without it."""
    shape = RequestShape(200, 200, 200, 200, None, None, output_shortest=200)
    for seqs, capped in ((1024, True), (4, False)):
        limits = Limits(0.95, seqs, 0.9)
        free = best_throughput(_replica(), "colocated", shape, [2048], limits)
        hosted = best_throughput(
            _replica(sequence_overhead_us=200.0), "colocated", shape, [2048], limits
        )
        if capped:
            assert free.output_tokens_per_s(shape) > 2 * 5000
            assert hosted.output_tokens_per_s(shape) == pytest.approx(5000, rel=1e-9)
            assert hosted.limited_by == HOST
            report = replica_capacity(
                _replica(sequence_overhead_us=200.0), "colocated", shape, [2048], limits, 1
            )
            assert report.limited_by == "host"
        else:
            assert free.output_tokens_per_s(shape) < 5000 / 2
            assert hosted.output_tokens_per_s(shape) == free.output_tokens_per_s(shape)


def test_unset_factors_change_nothing():
    replica = catalog_replica("llama-3.1-8b", GPU)
    assert replica.walk_s_per_token == 0 and replica.host_s_per_token == 0
    assert replica.at_walk(50000).floor_s == replica.floor_s


def test_configs_carry_classes_at_their_context_level():
    """With a walk, a config at level W carries only classes whose long sequences reach at most
    W tokens, so the chat class has configs that do not pay the documents' walk; without one,
    every config is at level 0 as before."""
    walks = {"chat": 500 + 200, "docs": 8000 + 500}
    configs = enumerate_configs(resolve(parse_instance(_instance(attention_latency_ns=WALK_NS))))
    levels = {k.walk_tokens for k in configs.configs}
    assert min(levels) >= walks["chat"] and max(levels) >= walks["docs"] and len(levels) > 1
    for k in configs.configs:
        assert all(walks[c] <= k.walk_tokens for c in k.usage), k.key
    assert any(set(k.usage) == {"chat"} for k in configs.configs)
    plain = enumerate_configs(resolve(parse_instance(_instance())))
    assert {k.walk_tokens for k in plain.configs} == {0.0}


def test_plans_with_a_walk_pass_verify_and_never_cost_less():
    costs = []
    updates = (
        {},
        {"attention_latency_ns": WALK_NS},
        {"attention_latency_ns": 2 * WALK_NS},
        {"attention_latency_ns": 2 * WALK_NS, "sequence_overhead_us": 4 * HOST_US},
    )
    for update in updates:
        data = _instance(**update)
        plan = solve(data)
        assert plan.status == "optimal"
        assert verify(plan, resolve(parse_instance(copy.deepcopy(data)))) == []
        costs.append(plan.cost_per_hour)
    assert costs == sorted(costs) and costs[-1] > costs[0]


def _decode_two(model: StepModel) -> list[float]:
    """A decode replica given a 1,000-token sequence (4 outputs), then at once a 5,000-token one
    (3 outputs): the first runs alone for one step, then both; their finish times."""
    ledger = Ledger([1000, 5000], [4, 3], [0.0, 0.0], [0, 0], [0.0, 0.0], [0.0, 0.0])
    clock = Clock()
    engine = BatchReplica(model, 1e9, 256, 0.0, False, ledger, clock)
    engine.arrive(0.0, 0)
    engine.arrive(0.0, 1)
    while clock.heap:
        when, _, handler, arg = heappop(clock.heap)
        handler(when, arg)
    return ledger.finish_s


TWO_STEPS = [(1, 1001, 1001), (2, 1002 + 5001, 5001), (2, 1003 + 5002, 5002)]
"""`_decode_two`'s steps: (sequences, their context, the longest context)."""


def test_simulated_steps_walk_the_batch_longest_context():
    """Every step adds the walk of the longest context running then."""
    replica = _replica(attention_latency_ns=WALK_NS)
    model = StepModel.of(replica)
    want = sum(model.step_s(n, ctx, 0, 0.0, walk) for n, ctx, walk in TWO_STEPS)
    assert _decode_two(model) == pytest.approx([want, want], rel=1e-12)
    by_model = sum(
        replica.at_walk(walk).step_s(decode_seqs=n, decode_context_tokens=ctx)
        for n, ctx, walk in TWO_STEPS
    )
    assert want == pytest.approx(by_model, rel=1e-12)


def test_simulated_steps_wait_for_the_host():
    """4 ms of host time per sequence per step: a step of two sequences is the longer of the
    GPU's and the host's 8 ms, in the step model and in the engine's steps."""
    replica = _replica(sequence_overhead_us=4000.0)
    model = StepModel.of(replica)
    gpu = replica.step_s(decode_seqs=2, decode_context_tokens=4000)
    assert gpu < 8e-3
    assert model.step_s(2, 4000, 0, 0.0) == pytest.approx(8e-3, rel=1e-12)
    assert model.step_s(1, 2000, 0, 0.0) == pytest.approx(
        max(4e-3, replica.step_s(decode_seqs=1, decode_context_tokens=2000)), rel=1e-12
    )
    want = sum(
        max(n * 4e-3, replica.step_s(decode_seqs=n, decode_context_tokens=ctx))
        for n, ctx, _ in TWO_STEPS
    )
    assert _decode_two(model) == pytest.approx([want, want], rel=1e-12)


def test_verify_holds_a_plan_to_the_host_ceiling():
    """The plan made without a host time (2 replicas for 1,300 output tokens/s) fails against a
    host of 2 ms per token (500 tokens/s per replica), and says which ceiling."""
    plan = solve(_instance())
    strict = resolve(parse_instance(_instance(sequence_overhead_us=2000.0)))
    problems = verify(plan, strict)
    assert any("> the host's 500" in p for p in problems), problems


def test_the_plan_meets_its_targets_in_simulation():
    """Walk and host ceiling set, the plan at its full demand: the simulator, which walks each
    step's own longest context and waits for the host, measures every class within its SLO."""
    data = _instance(attention_latency_ns=WALK_NS, sequence_overhead_us=HOST_US)
    for w in data["workloads"]:
        w["input_tokens"] = {"mean": w["input_tokens"], "p99": 2 * w["input_tokens"]}
        w["output_tokens"] = {"mean": w["output_tokens"], "p99": 3 * w["output_tokens"]}
    plan, resolved = solve(data), resolve(parse_instance(copy.deepcopy(data)))
    rates = [w.requests_per_s for w in plan.workloads]
    requests = synthetic_requests(list(resolved.instance.workloads), rates, 6000, seed=0)
    report = simulate_plan(plan, resolved, requests)
    assert [w["meets_slo"] for w in report["workloads"]] == [True, True]
