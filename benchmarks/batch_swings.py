"""The batch's spread, predicted and simulated, for every decoding pool of the shipped instances.

    python benchmarks/batch_swings.py [--requests 30000] [--seed 0] [INSTANCE.yaml ...]

Each instance is solved and its plan simulated with Poisson arrivals at the planned rates.
Per pool that decodes, the simulated batch (sequences per step: mean and standard deviation)
is printed beside the Poisson spread √mean, which a fixed step would give, and the spread the
planner predicts from the step's feedback at the plan's rates, √(F·mean) with F from
perf/batch_noise.py (`operating_point.batch_swing`). The table goes to docs/latency.md.
"""

from __future__ import annotations

import argparse
import math
from collections import defaultdict
from pathlib import Path

from fleetopt.catalog import resolve
from fleetopt.configs import request_class
from fleetopt.instance import load_instance
from fleetopt.perf.curves import replica_for
from fleetopt.perf.operating_point import OperatingPoint, batch_swing
from fleetopt.pipeline import plan_fleet
from fleetopt.simulate import poisson_report

INSTANCES = Path(__file__).resolve().parent.parent / "instances"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("instances", nargs="*", type=Path)
    parser.add_argument("--requests", type=int, default=30_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    paths = args.instances or sorted(INSTANCES.glob("*.yaml"))
    print(
        "| instance | pool | role | GPU | util sim | batch sim mean ± sd | Poisson sd | predicted sd (F) |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for path in paths:
        instance = load_instance(path)
        if instance.profiles:
            continue
        resolved = resolve(instance)
        plan = plan_fleet(instance)
        if plan.periods:
            continue  # the simulated fleet is the peak period's; its rates are not these
        report = poisson_report(plan, resolved, args.requests, args.seed)
        classes = {w.name: request_class(w) for w in instance.workloads}
        loads = defaultdict(list)
        for w in plan.workloads:
            for route in w.routes:
                if route.phase in ("both", "decode") and w.name in classes:
                    loads[route.pool].append((classes[w.name].shape, route.requests_per_s))
        for index, pool in enumerate(plan.pools):
            if pool.role == "prefill" or not loads[index]:
                continue
            model, gpu = resolved.models[pool.model], resolved.gpus[pool.gpu]
            replica = replica_for(model, gpu, pool.tensor_parallel, pool.role, instance.profiles)
            op = OperatingPoint(pool.role, pool.step_ms / 1e3, pool.chunk_tokens)
            per_replica = [(s, r / pool.replicas) for s, r in loads[index]]
            swing = batch_swing(replica, op, per_replica)
            sim = report["pools"][index]
            mean = sim["mean_batch"]
            print(
                f"| {instance.name} | {index} | {pool.role} | {pool.gpu} tp{pool.tensor_parallel} "
                f"×{pool.replicas} | {sim['utilization']:.0%} "
                f"| {mean:.1f} ± {sim['batch_sd']:.1f} | {math.sqrt(mean):.1f} "
                f"| {math.sqrt(swing * mean):.1f} ({swing:.2f}) |"
            )


if __name__ == "__main__":
    main()
