"""Simulator speed: simulated requests per wall-clock second on an 8-replica pool.

The instance is instances/chatbot-8b.yaml (Llama 3.1 8B chat, p99 TTFT 500 ms / TPOT 30 ms)
restricted to H100-SXM tp1 colocated; its plan is then resized to one pool of 8 replicas at the
same load per replica (rate × 8 / planned replicas), so the figure does not move when the cost
model does. Poisson arrivals at that rate, seed 0; the figure is the best of a few runs of the
event loop (request generation and the report are not timed).

    python benchmarks/simulate.py [--requests N] [--repeat K]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import yaml

from fleetopt.catalog import resolve
from fleetopt.instance import parse_instance
from fleetopt.pipeline import plan_fleet
from fleetopt.simulate.arrivals import synthetic_requests
from fleetopt.simulate.simulator import simulate

INSTANCE = Path(__file__).resolve().parent.parent / "instances" / "chatbot-8b.yaml"
REPLICAS = 8


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    data = yaml.safe_load(INSTANCE.read_text())
    data["gpus"] = [{"type": "h100-sxm"}]
    data["serving"] = {"modes": ["colocated"], "tensor_parallel": [1]}
    instance = parse_instance(data)
    plan = plan_fleet(instance)
    resolved = resolve(instance)
    (pool,) = plan.pools
    rate = plan.workloads[0].requests_per_s * REPLICAS / pool.replicas
    pool.replicas = REPLICAS
    requests = synthetic_requests(list(instance.workloads), [rate], args.requests, 0)
    best = float("inf")
    for _ in range(args.repeat):
        began = time.perf_counter()
        outcome = simulate(plan, resolved, requests)
        best = min(best, time.perf_counter() - began)
    steps = sum(c.steps for pool in outcome.totals for c in pool)
    print(
        f"pool: {pool.replicas} × {pool.gpu} tp{pool.tensor_parallel} {pool.role}, step "
        f"{pool.step_ms:.1f} ms, chunk {pool.chunk_tokens}; {rate:.1f} req/s Poisson"
    )
    print(
        f"{args.requests:,} requests, {steps:,} engine steps, "
        f"{outcome.finish_s.max():,.0f} simulated s: best of {args.repeat} {best:.2f} s wall"
    )
    print(f"{args.requests / best:,.0f} simulated requests per wall-clock second")


if __name__ == "__main__":
    main()
