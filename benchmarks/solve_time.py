"""Solve-time figures: every shipped instance, and a synthetic instance grown in classes and GPU types.

    python benchmarks/solve_time.py

Prints, per instance: configs (columns of x), routing variables, configs kept by the presolve
(fleetopt/presolve.py, summed over blocks), enumerate seconds (catalog + perf + configs),
presolve seconds, model seconds (Pyomo build and hand-off), solve seconds (HiGHS), the total
(wall clock), status and $/h — the path `fleetopt solve` takes, on one process. Figures go to
docs/benchmarks.md with the command.
"""

from __future__ import annotations

import time
from pathlib import Path

from fleetopt.catalog import resolve
from fleetopt.configs import enumerate_configs
from fleetopt.instance import load_instance, parse_instance
from fleetopt.pipeline import program_data, solve_program
from fleetopt.solve import SolveOptions

GPUS = ["l4", "a10g", "l40s", "a100-80gb", "h100-pcie", "h100-sxm", "h200", "b200", "mi300x"]


def synthetic(classes: int, gpus: int) -> dict:
    """classes request classes of llama-3.1-70b with spread lengths and SLOs, on the first gpus types."""
    workloads = []
    for i in range(classes):
        workloads.append(
            {
                "name": f"class-{i}",
                "model": "llama-3.1-70b",
                "requests_per_s": 5 + 3 * i,
                "input_tokens": 400 * (1 + i % 5),
                "output_tokens": 150 + 100 * (i % 3),
                "slo": {"ttft_ms": 1000 + 500 * (i % 4), "tpot_ms": 30 + 10 * (i % 4)},
            }
        )
    return {
        "name": f"synthetic-{classes}x{gpus}",
        "gpus": [{"type": g} for g in GPUS[:gpus]],
        "models": [{"name": "llama-3.1-70b", "weight_dtype": "fp8", "kv_dtype": "fp8"}],
        "workloads": workloads,
    }


def measure(instance) -> str:
    start = time.perf_counter()
    resolved = resolve(instance)
    configs = enumerate_configs(resolved)
    data = program_data(resolved, configs)
    enumerated = time.perf_counter() - start
    solved = solve_program(data, SolveOptions(time_limit=120, threads=1))
    total = time.perf_counter() - start
    s, outcome = solved.stats, solved.outcome
    cost = "-" if solved.solution is None else f"{solved.solution.cost_per_hour:,.2f}"
    return (
        f"{instance.name:<30} {len(data.configs):>7} {len(data.eligible()):>7} "
        f"{s.configs_kept:>6} {enumerated:>6.2f} {s.presolve_seconds:>6.2f} "
        f"{s.build_seconds + s.handoff_seconds:>7.2f} {s.solve_seconds:>7.2f} {total:>7.2f}  "
        f"{outcome.status:<9} {cost:>10}"
    )


def main() -> None:
    print(
        f"{'instance':<30} {'configs':>7} {'routes':>7} {'kept':>6} {'enum s':>6} {'pre s':>6} "
        f"{'model s':>7} {'solve s':>7} {'total s':>7}  {'status':<9} {'$/h':>10}"
    )
    for path in sorted(Path(__file__).parent.parent.joinpath("instances").glob("*.yaml")):
        print(measure(load_instance(path)))
    for classes, gpus in [(4, 5), (8, 9), (16, 9)]:
        print(measure(parse_instance(synthetic(classes, gpus))))


if __name__ == "__main__":
    main()
