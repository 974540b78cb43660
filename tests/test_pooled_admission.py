"""Admission sized for the pool: a replica of few batch slots needs a wide margin alone and
little in a pool that shares its queue, so its configs have variants sized for pools of 2, 4,
8, … replicas, each kept at none or at least that many (configs.pooled_variants,
docs/formulation.md §3 "Pools of a least size")."""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import pytest

from fleetopt.catalog import resolve
from fleetopt.configs import Config, enumerate_configs, limits_of, request_class
from fleetopt.instance import parse_instance
from fleetopt.perf.curves import replica_for
from fleetopt.perf.operating_point import PREFILL, admission_headroom
from fleetopt.perf.queueing import NO_QUEUEING
from fleetopt.perf.throughput import candidate_points
from fleetopt.pipeline import plan_fleet
from fleetopt.simulate import poisson_report
from fleetopt.simulate.router import least_loaded
from fleetopt.verify import verify

MODEL, GPU = "llama-3.1-8b", "a100-80gb"
FEW_SLOTS = {
    "name": "few-slots",
    "gpus": [{"type": GPU}],
    "models": [{"name": MODEL}],
    "serving": {"modes": ["colocated"], "tensor_parallel": [1], "max_num_seqs": 4},
    "workloads": [
        {
            "name": "chat",
            "model": MODEL,
            "input_tokens": 500,
            "output_tokens": 200,
            "requests_per_s": 10,
            "slo": {"ttft_ms": 1000, "tpot_ms": 50},
        }
    ],
}


def _at(rate: float) -> dict:
    data = copy.deepcopy(FEW_SLOTS)
    data["workloads"][0]["requests_per_s"] = rate
    return data


def _carried(config: Config, replicas: int) -> float:
    """Requests/s of the one class that this many replicas of the config carry (0 below its
    least pool): every resource's row, the prefill's with its pooling curve."""
    if replicas < config.min_replicas:
        return 0.0
    ((_, use),) = config.usage.items()
    rates = []
    for resource, cap in config.capacity.items():
        if use.get(resource, 0.0) <= 0:
            continue
        pooled = resource == PREFILL and config.queue != NO_QUEUEING
        held = config.queue.load(replicas) if pooled else replicas
        rates.append(cap * held / use[resource])
    return min(rates)


def _fewest_replicas(configs: list[Config], rate: float, most: int = 150) -> int:
    """The fewest replicas, over every split among the configs (one class, one GPU type, tp 1:
    every replica costs the same), whose pools carry the rate: a knapsack by exhaustive
    dynamic programming over (configs so far, replicas)."""
    best = [0.0] * (most + 1)  # the most requests/s n replicas carry on the configs so far
    for config in configs:
        best = [
            max(best[n - j] + _carried(config, j) for j in range(n + 1)) for n in range(most + 1)
        ]
    return next(n for n, carried in enumerate(best) if carried >= rate * (1 - 1e-9))


def test_the_headroom_rises_with_the_pool_to_at_most_one():
    resolved = resolve(parse_instance(FEW_SLOTS))
    limits = limits_of(resolved)
    shape = request_class(resolved.instance.workloads[0]).shape
    replica = replica_for(resolved.models[MODEL], resolved.gpus[GPU], 1, "colocated", [])
    op = candidate_points(replica, "colocated", shape, [256], limits)[0]
    rooms = [admission_headroom(replica, op, [shape], limits, pooled=n)[0] for n in (1, 2, 8, 64)]
    assert rooms == sorted(rooms) and rooms[-1] <= 1.0
    assert rooms[-1] > 2 * rooms[0]  # four slots alone keep most of them free


def test_few_slots_get_pooled_variants_and_keep_their_single_replica_configs():
    configs = enumerate_configs(resolve(parse_instance(FEW_SLOTS))).configs
    least = sorted({c.min_replicas for c in configs})
    assert least[0] == 1 and len(least) > 2
    assert all(math.log2(n).is_integer() for n in least)


@pytest.mark.parametrize("rate", [0.3, 2.0, 10.0, 25.0])
def test_the_plan_is_the_fewest_replicas_by_exhaustive_search(rate):
    instance = parse_instance(_at(rate))
    configs = enumerate_configs(resolve(instance)).configs
    plan = plan_fleet(instance)
    assert sum(p.replicas for p in plan.pools) == _fewest_replicas(configs, rate)
    singles = [c for c in configs if c.min_replicas == 1]
    assert _fewest_replicas(configs, rate) <= _fewest_replicas(singles, rate)


def test_pooling_buys_fewer_replicas_than_each_alone_would_and_verify_checks_the_pool():
    instance = parse_instance(FEW_SLOTS)
    resolved = resolve(instance)
    configs = enumerate_configs(resolved).configs
    singles = [c for c in configs if c.min_replicas == 1]
    plan = plan_fleet(instance)
    replicas = sum(p.replicas for p in plan.pools)
    assert replicas < 0.6 * _fewest_replicas(singles, 10.0)
    assert verify(plan, resolved) == []
    shrunk = copy.deepcopy(plan)
    shrunk.pools[0].replicas -= 1
    assert verify(shrunk, resolved)


def test_the_pooled_plan_meets_its_targets_in_simulation():
    instance = parse_instance(FEW_SLOTS)
    plan = plan_fleet(instance)
    report = poisson_report(plan, resolve(instance), count=20_000, seed=0)
    (chat,) = report["workloads"]
    assert chat["slo_attainment"]["both"] >= 0.99


@dataclass
class _Replica:
    prefill_backlog: int
    full: bool
    backlog: int


def test_the_router_sends_a_request_to_a_free_slot_before_fewer_outstanding_tokens():
    """The pool shares its slots only if a request does not join a replica whose slots are all
    taken while another has one free: at 50 req/s the 26-replica plan of chatbot-8b at
    max_num_seqs 4 met its p99 TTFT for 95.7% of requests with ties broken by outstanding
    tokens alone, 99.5% with this (docs/latency.md)."""
    busy, free = _Replica(0, True, 300), _Replica(0, False, 900)
    assert least_loaded([busy, free]) is free
    assert least_loaded([_Replica(0, True, 300), _Replica(0, True, 900)]).backlog == 300
    assert least_loaded([_Replica(500, False, 500), busy]) is busy  # prompt work ahead first
