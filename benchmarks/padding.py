"""Is a plan padded? Take one replica out of each pool of every shipped plan and simulate.

    python benchmarks/padding.py [--requests 20000] [--seed 0]

For each pool of more than one replica, the plan with one replica fewer is simulated (Poisson at
the planned rates) and the worst class's margin is printed: the share of its requests that met
both targets less its percentile. A negative margin means the replica was needed; a positive
one measures how much the program's queueing margins over-provision — and costs something only
where the replica's GPUs would stop being paid for, which the last column says (the plan's
`one_fewer_frees_gpus`: fewer than tp where whole nodes stay bought). A pool of one replica
cannot lose it without losing its classes' route. The figures go to docs/latency.md.
"""

from __future__ import annotations

import argparse
import copy
from pathlib import Path

from fleetopt.catalog import resolve
from fleetopt.instance import load_instance
from fleetopt.pipeline import plan_fleet
from fleetopt.simulate import poisson_report

INSTANCES = Path(__file__).resolve().parent.parent / "instances"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print("| instance | pool | replicas | worst class margin with one fewer | GPUs it frees |")
    print("| --- | --- | --- | --- | --- |")
    for path in sorted(INSTANCES.glob("*.yaml")):
        instance = load_instance(path)
        if instance.profiles:
            continue
        resolved = resolve(instance)
        plan = plan_fleet(instance)
        for index, pool in enumerate(plan.pools):
            label = f"#{index} {pool.role} {pool.gpu} tp{pool.tensor_parallel}"
            if pool.replicas < 2:
                print(f"| {instance.name} | {label} | 1 | - (the pool's only replica) | - |")
                continue
            fewer = copy.deepcopy(plan)
            fewer.pools[index].replicas -= 1
            fewer.pools[index].gpus -= pool.tensor_parallel
            report = poisson_report(fewer, resolved, args.requests, args.seed)
            margins = [
                w["slo_attainment"]["both"] - w["slo"]["percentile"] / 100
                for w in report["workloads"]
                if w["slo"]
            ]
            worst = f"{min(margins) * 100:+.1f} pp" if margins else "no targets"
            freed = f"{pool.one_fewer_frees_gpus} of {pool.tensor_parallel}"
            print(
                f"| {instance.name} | {label} | {pool.replicas} → {pool.replicas - 1} | {worst} "
                f"| {freed} |"
            )


if __name__ == "__main__":
    main()
