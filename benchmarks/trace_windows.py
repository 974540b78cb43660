"""Which rate window makes a trace-sized plan hold when the whole trace is replayed.

    python benchmarks/trace_windows.py

For each shipped Azure trace instance (instances/azure-{conv,code}-trace-70b.yaml) and each
`rate_window_s` (the mean over the span, then the busiest 300, 60, 20 and 10 s), solve with
length routing, replay the whole hour of the trace against the plan (`simulate --trace`) and
print the sized rate, the plan's cost, the three answers (one pool, best single boundary,
optimised split) and the share of requests that met both targets (the worst bucket's).
"""

from __future__ import annotations

import time
from pathlib import Path

from fleetopt.catalog import resolve
from fleetopt.instance import load_instance
from fleetopt.pipeline import plan_fleet
from fleetopt.simulate import request_stream, simulate_plan

ROOT = Path(__file__).resolve().parent.parent
WINDOWS = (None, 300, 60, 20, 10)


def main() -> None:
    print(
        "trace  window_s  req/s   $/h    one_pool  two_pool  optimised  boundaries  met   solve_s"
    )
    for trace in ("conv", "code"):
        loaded = load_instance(ROOT / "instances" / f"azure-{trace}-trace-70b.yaml")
        for window in WINDOWS:
            (w,) = loaded.workloads
            data = loaded.model_dump(by_alias=True)
            data["workloads"][0].update(rate_window_s=window, requests_per_s=None)
            instance = type(loaded).model_validate(data)
            start = time.perf_counter()
            plan = plan_fleet(instance)
            seconds = time.perf_counter() - start
            resolved = resolve(instance)
            path = ROOT / "instances" / "data" / f"azure-llm-2023-{trace}.csv"
            report = simulate_plan(plan, resolved, request_stream(plan, resolved, str(path)))
            met = min(x["slo_attainment"]["both"] for x in report["workloads"])
            r = plan.length_routing
            print(
                f"{trace:5}  {window or 'mean'!s:>8}  {instance.workloads[0].rate:5.2f}  "
                f"{plan.cost_per_hour:6.2f}  {r['one_pool_cost_per_hour']:8.2f}  "
                f"{r['best_two_pool_cost_per_hour'] or float('nan'):8.2f}  "
                f"{r['optimised_cost_per_hour']:9.2f}  {r['boundaries'][w.name]!s:10}  "
                f"{met:6.2%}  {seconds:6.1f}"
            )


if __name__ == "__main__":
    main()
