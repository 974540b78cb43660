"""Mélange's formulation (binary slices, PuLP + CBC) beside fleetopt's (continuous routing, HiGHS).

    pip install -e '.[bench]'   # PuLP, with its bundled CBC: only this script needs it
    python benchmarks/melange_side_by_side.py [--seed 0] [--slice-factor 8]

One instance: Llama 3.1 8B on four GPU types (L4, A10G, A100 80GB, H100 SXM; tp 1, colocated),
requests bucketed by (input, output) length into 60 buckets (10 × 6) with seeded rates and a
TPOT target. Both programs use the same per-replica capacity of each GPU type for each bucket,
taken from fleetopt's perf model: the most requests/s one replica of any of fleetopt's configs
on that GPU type carries of that bucket alone (its busiest resource at capacity). Mélange
(Griggs et al. 2024): integer GPU counts, each bucket's rate split into `slice_factor` equal
slices, each slice assigned whole to one GPU type (binary), Σ slice rate / capacity ≤ count per
GPU type. fleetopt: the same capacities as one measured config per GPU type, each bucket's rate
routed continuously over them (`pipeline.solve_program`). Prints both costs and times.
"""

from __future__ import annotations

import argparse
import random
import time

from fleetopt.catalog import resolve
from fleetopt.configs import Config, enumerate_configs
from fleetopt.formulation.data import GpuMarket, ProgramData
from fleetopt.instance import parse_instance
from fleetopt.perf.operating_point import PROFILE, OperatingPoint
from fleetopt.pipeline import solve_program
from fleetopt.solve import SolveOptions

GPUS = ["l4", "a10g", "a100-80gb", "h100-sxm"]
INPUTS = [100, 250, 500, 1000, 2000, 3000, 4000, 6000, 8000, 12000]
OUTPUTS = [50, 100, 200, 400, 800, 1600]
MODEL = "llama-3.1-8b"


def buckets_instance(seed: int) -> dict:
    rng = random.Random(seed)
    workloads = [
        {
            "name": f"in{i}-out{o}",
            "model": MODEL,
            "requests_per_s": round(rng.uniform(0.05, 2.0), 2),
            "input_tokens": i,
            "output_tokens": o,
            "slo": {"tpot_ms": 80},
        }
        for i in INPUTS
        for o in OUTPUTS
    ]
    return {
        "name": "melange-60-buckets",
        "gpus": [{"type": g} for g in GPUS],
        "models": [{"name": MODEL}],
        "workloads": workloads,
        "serving": {"modes": ["colocated"], "tensor_parallel": [1]},
    }


def capacity_table(data: dict):
    """(classes, prices, rate[gpu][bucket]): one replica's best requests/s, from fleetopt."""
    resolved = resolve(parse_instance(data))
    config_set = enumerate_configs(resolved)
    rate: dict[str, dict[str, float]] = {g: {} for g in GPUS}
    for config in config_set.configs:
        for c, use in config.usage.items():
            alone = min(cap / use[r] for r, cap in config.capacity.items() if use.get(r))
            rate[config.gpu][c] = max(rate[config.gpu].get(c, 0.0), alone)
    prices = {g.name: g.price_per_gpu_hour for g in resolved.gpus.values()}
    return config_set.classes, prices, rate


def melange(classes, prices, rate, slice_factor: int) -> tuple[float, float, str, str]:
    import pulp

    start = time.perf_counter()
    prob = pulp.LpProblem("melange", pulp.LpMinimize)
    count = {g: pulp.LpVariable(f"count_{g}", lowBound=0, cat="Integer") for g in GPUS}
    assign = {
        (c.name, s, g): pulp.LpVariable(f"y_{i}_{s}_{g}", cat="Binary")
        for i, c in enumerate(classes)
        for s in range(slice_factor)
        for g in GPUS
        if rate[g].get(c.name)
    }
    prob += pulp.lpSum(prices[g] * count[g] for g in GPUS)
    for c in classes:
        for s in range(slice_factor):
            prob += pulp.lpSum(assign[c.name, s, g] for g in GPUS if (c.name, s, g) in assign) == 1
    share = {c.name: c.requests_per_s / slice_factor for c in classes}
    for g in GPUS:
        load = [share[c] / rate[g][c] * y for (c, _, gg), y in assign.items() if gg == g]
        prob += pulp.lpSum(load) <= count[g]
    prob.solve(pulp.PULP_CBC_CMD(msg=False, threads=1))
    seconds = time.perf_counter() - start
    fleet = _fleet({g: round(count[g].value()) for g in GPUS})
    return pulp.value(prob.objective), seconds, pulp.LpStatus[prob.status], fleet


def fleetopt_side(classes, prices, rate) -> tuple[float, float, str, str]:
    start = time.perf_counter()
    configs = [
        Config(
            MODEL,
            g,
            1,
            OperatingPoint("colocated", 0.0, 0),
            {PROFILE: 1.0},
            usage={c: {PROFILE: 1.0 / mu} for c, mu in rate[g].items()},
            measured=True,
        )
        for g in GPUS
    ]
    markets = [GpuMarket(g, prices[g], None, None) for g in GPUS]
    solved = solve_program(ProgramData(classes, configs, markets), SolveOptions())
    seconds = time.perf_counter() - start
    fleet = _fleet({g: round(solved.solution.gpus[g, 0]) for g in GPUS})
    return solved.solution.cost_per_hour, seconds, solved.outcome.status, fleet


def _fleet(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {g}" for g, n in counts.items() if n)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--slice-factor", type=int, default=8)
    args = parser.parse_args()
    classes, prices, rate = capacity_table(buckets_instance(args.seed))
    total = sum(c.requests_per_s for c in classes)
    print(f"{len(classes)} buckets, {total:.1f} req/s, GPU types {', '.join(GPUS)}")
    print(f"{'formulation':<42} {'$/h':>9} {'seconds':>8}  {'status':<8} GPUs")
    cost, seconds, status, fleet = fleetopt_side(classes, prices, rate)
    label = "fleetopt: continuous routing, HiGHS"
    print(f"{label:<42} {cost:>9.2f} {seconds:>8.2f}  {status:<8} {fleet}")
    try:
        import pulp  # noqa: F401
    except ImportError:
        print("Mélange side skipped: PuLP is not installed (pip install -e '.[bench]')")
        return
    cost, seconds, status, fleet = melange(classes, prices, rate, args.slice_factor)
    label = f"Mélange: {args.slice_factor} binary slices, CBC"
    print(f"{label:<42} {cost:>9.2f} {seconds:>8.2f}  {status.lower():<8} {fleet}")


if __name__ == "__main__":
    main()
