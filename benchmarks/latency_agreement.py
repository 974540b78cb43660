"""Program vs simulation: predicted and simulated p99 TTFT and TPOT for every shipped instance.

    python benchmarks/latency_agreement.py [--requests 20000] [--seed 0]

Each instance is solved, its plan simulated with Poisson arrivals at the planned rates (the
peak period's fleet for a demand profile), and per workload the program's prediction (a tail
prompt on an idle replica; the queueing margin is in the capacity, not in this number), the
simulated p99 and the target are printed with the share of requests that met both targets;
then per pool the planned and simulated utilisation. Instances sized by measured profiles have
no step model to simulate and are skipped. The table goes to docs/latency.md.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from fleetopt.catalog import resolve
from fleetopt.instance import load_instance
from fleetopt.pipeline import plan_fleet
from fleetopt.simulate import poisson_report

INSTANCES = Path(__file__).resolve().parent.parent / "instances"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(
        "| instance | workload | TTFT ms pred / sim p99 / target | TPOT ms pred / sim p99 / target | met both | at pct |"
    )
    print("| --- | --- | --- | --- | --- | --- |")
    pools = []
    for path in sorted(INSTANCES.glob("*.yaml")):
        instance = load_instance(path)
        if instance.profiles:
            continue
        resolved = resolve(instance)
        plan = plan_fleet(instance)
        report = poisson_report(plan, resolved, args.requests, args.seed)
        for w in report["workloads"]:
            slo = w["slo"] or {}
            met = w["slo_attainment"]["both"] if w["slo_attainment"] else None
            print(
                f"| {instance.name} | {w['name']} "
                f"| {_ms(w['predicted']['ttft_ms'])} / {_ms(w['ttft_ms']['p99'])} / {_ms(slo.get('ttft_ms'))} "
                f"| {_ms(w['predicted']['tpot_ms'])} / {_ms(w['tpot_ms']['p99'])} / {_ms(slo.get('tpot_ms'))} "
                f"| {'-' if met is None else f'{met:.1%}'} "
                f"| {'-' if w['meets_slo'] is None else ('yes' if w['meets_slo'] else 'no')} |"
            )
        pools += [(instance.name, p) for p in report["pools"]]
    print()
    print(
        "| instance | pool | role | GPU | replicas | utilisation plan / sim | step ms plan / sim mean | queue mean / max |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, p in pools:
        print(
            f"| {name} | {p['pool']} | {p['role']} | {p['gpu']} tp{p['tensor_parallel']} | {p['replicas']} "
            f"| {p['planned_utilization']:.0%} / {p['utilization']:.0%} "
            f"| {p['step_ms']:.1f} / {p['mean_step_ms']:.1f} "
            f"| {p['queue_mean']:.2f} / {p['queue_max']} |"
        )


if __name__ == "__main__":
    main()
