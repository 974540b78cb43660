"""Solve-time figures: every shipped instance, and a synthetic instance grown in classes and GPU types.

    python benchmarks/solve_time.py

Prints, per instance: configs (columns of x), routing variables, build seconds (configs + Pyomo),
solve seconds (HiGHS), status and $/h. Figures go to docs/benchmarks.md with the command.
"""

from __future__ import annotations

import time
from pathlib import Path

from fleetopt.catalog import resolve
from fleetopt.configs import enumerate_configs
from fleetopt.formulation import build_model
from fleetopt.instance import load_instance, parse_instance
from fleetopt.pipeline import program_data
from fleetopt.solve import SolveOptions, run_highs

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
    model = build_model(data)
    built = time.perf_counter() - start
    outcome = run_highs(model, SolveOptions(time_limit=120, threads=1))
    cost = "-" if outcome.objective is None else f"{outcome.objective:,.2f}"
    return (
        f"{instance.name:<30} {len(data.configs):>7} {len(data.eligible()):>7} "
        f"{built:>8.2f} {outcome.seconds:>8.2f}  {outcome.status:<9} {cost:>10}"
    )


def main() -> None:
    print(
        f"{'instance':<30} {'configs':>7} {'routes':>7} {'build s':>8} {'solve s':>8}  {'status':<9} {'$/h':>10}"
    )
    for path in sorted(Path(__file__).parent.parent.joinpath("instances").glob("*.yaml")):
        print(measure(load_instance(path)))
    for classes, gpus in [(4, 5), (8, 9), (16, 9)]:
        print(measure(parse_instance(synthetic(classes, gpus))))


if __name__ == "__main__":
    main()
