"""Solve time at fleet scale: seeded instances grown in GPU types × models × classes × periods.

    python benchmarks/scale.py [--sizes typical,medium,large] [--mip-gap 0.005] [--time-limit 600]
                               [--seed 0 | --seeds 0-11] [--jobs N] [--no-cli] [--pricing] [--whole]
                               [--highs-seed S] [--presolve-rounds R] [--budget B]

Every instance allows tp 1/2/4/8 and both serving modes. Prints per size: configs (after
dominated ones are dropped), kept (left after the presolve, summed over blocks), blocks
(independent sub-programs), variables and constraints (summed over blocks), enumerate seconds
(catalog + perf + configs), presolve seconds (its arithmetic, and HiGHS on its LP relaxation
and restricted programs, fleetopt/presolve.py), build seconds (Pyomo, every model: the
presolve's and the last program's), hand-off seconds (Pyomo to HiGHS and back, every model),
solve seconds (HiGHS on the last program), the total (wall clock), build% (build and hand-off
over all the stage seconds), the gap, $/h, and end-to-end seconds of `fleetopt solve` on the
same instance in a fresh process (start-up included). Stage seconds are summed over blocks, so
with `--jobs` > 1 (blocks, and configs where there is enough work, in parallel processes;
default 1) they may exceed the total. `--whole`
solves the program as one model instead of block by block (the "before" figure of the split).
`--seeds` runs each size at several seeds (a range A-B or a list A,B,…), a row each, then says
how many met the issue's end-to-end target (`TARGETS`), or with `--no-cli` sums the in-process
totals: branch and bound time varies from one instance to the next by more than any single seed
shows. `--highs-seed` (HiGHS's `random_seed`) and `--presolve-rounds` (fleetopt/presolve.py's
MAX_ROUNDS) measure that variability and the presolve's rounds; they apply in process only, so
they need `--no-cli`. `--budget B` asks each instance for the most throughput B $/h buys
(`objective: {maximize: throughput, budget_per_hour: B}`): the row's scale is the share of the
demand served, its $/h and gap the throughput solve's (the in-process figures stop there; the
end-to-end run includes the cheapest fleet at that scale after it). Figures go to
docs/benchmarks.md with the command.
"""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from fleetopt import presolve
from fleetopt.catalog import resolve
from fleetopt.configs import enumerate_configs
from fleetopt.instance import parse_instance
from fleetopt.pipeline import program_data, solve_program
from fleetopt.solve import SolveOptions
from fleetopt.workers import default_jobs

GPUS = ["h100-sxm", "a100-80gb", "l40s", "h200", "l4", "a10g", "a100-40gb", "h100-pcie", "b200"]
GPUS += ["mi300x"]
MODELS = ["llama-3.1-70b", "llama-3.1-8b", "qwen3-32b", "mistral-7b", "qwen2.5-7b", "mixtral-8x7b"]
TARGETS = {"typical": 1.5, "large": 20.0}
"""Issue 7's end-to-end targets, seconds of `fleetopt solve` on a 2-core machine."""
SIZES = {  # GPU types, models, classes, periods
    "typical": (4, 1, 3, 1),
    "medium": (6, 3, 12, 6),
    "large": (10, 6, 30, 24),
}


def instance(
    name: str,
    gpus: int,
    models: int,
    classes: int,
    periods: int,
    seed: int,
    pricing: bool,
    budget: float | None = None,
):
    """Classes spread over the models, with seeded rates, lengths and SLOs; `periods` distinct
    seeded demand levels (the hard case: no two periods merge); the most throughput `budget`
    buys, where given."""
    rng = random.Random(seed)
    workloads = [
        {
            "name": f"class-{i}",
            "model": MODELS[i % models],
            "requests_per_s": round(rng.uniform(2.0, 40.0), 1),
            "input_tokens": rng.choice([250, 500, 1000, 2000, 4000]),
            "output_tokens": rng.choice([100, 200, 400, 800]),
            "slo": {"ttft_ms": rng.choice([750, 1500, 3000]), "tpot_ms": rng.choice([40, 60, 90])},
        }
        for i in range(classes)
    ]
    data = {
        "name": name,
        "gpus": [{"type": g} for g in GPUS[:gpus]],
        "models": [{"name": m, "weight_dtype": "fp8", "kv_dtype": "fp8"} for m in MODELS[:models]],
        "workloads": workloads,
        "serving": {"modes": ["colocated", "disaggregated"], "tensor_parallel": [1, 2, 4, 8]},
    }
    if periods > 1:
        levels = [round(rng.uniform(0.25, 1.0), 3) for _ in range(periods)]
        data["demand_profile"] = {"period_hours": 1, "multipliers": levels}
    if budget is not None:
        data["objective"] = {"maximize": "throughput", "budget_per_hour": budget}
    if pricing:
        data["pricing"] = {
            "reserved_price_factor": 0.6,
            "spot_price_factor": 0.35,
            "spot_max_fraction": 0.25,
        }
    return data


def measure(data: dict, options: SolveOptions, whole: bool) -> dict:
    start = time.perf_counter()
    resolved = resolve(parse_instance(data))
    config_set = enumerate_configs(resolved, options.jobs)
    program = program_data(resolved, config_set)
    enumerated = time.perf_counter() - start
    solved = solve_program(program, options, split=not whole)
    s, o = solved.stats, solved.outcome
    return {
        "configs": len(program.configs),
        "kept": s.configs_kept,
        "blocks": s.blocks,
        "vars": s.variables,
        "rows": s.constraints,
        "enum": enumerated,
        "presolve": s.presolve_seconds,
        "build": s.build_seconds,
        "handoff": s.handoff_seconds,
        "solve": s.solve_seconds,
        "total": time.perf_counter() - start,
        "gap": o.gap,
        "status": o.status,
        "cost": None if solved.solution is None else solved.solution.cost_per_hour,
        "scale": None if solved.solution is None else solved.solution.alpha,
    }


def cli_seconds(data: dict, options: SolveOptions) -> float:
    """`fleetopt solve` end to end in a fresh interpreter: start-up, solve, verify, print."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "instance.yaml"
        path.write_text(yaml.safe_dump(data))
        command = [sys.executable, "-m", "fleetopt.cli", "solve", str(path)]
        command += ["--mip-gap", str(options.mip_gap), "--format", "json"]
        command += ["--jobs", str(options.jobs)]
        if options.time_limit is not None:
            command += ["--time-limit", str(options.time_limit)]
        start = time.perf_counter()
        subprocess.run(command, check=False, capture_output=True)
        return time.perf_counter() - start


def seed_list(text: str) -> list[int]:
    """`A-B` (both ends included) or `A,B,…`."""
    if "-" in text:
        first, last = (int(part) for part in text.split("-"))
        return list(range(first, last + 1))
    return [int(part) for part in text.split(",")]


def summary(size: str, seconds: list[float], end_to_end: bool) -> str:
    """The runs' sum, median and slowest; end to end, how many met the size's target."""
    spread = (
        f"in all {sum(seconds):.1f} s, median {statistics.median(seconds):.2f} s, "
        f"slowest {max(seconds):.2f} s"
    )
    if not end_to_end:
        return f"{size}, {len(seconds)} seeds in process: {spread}"
    target = ""
    if size in TARGETS:
        met = sum(s <= TARGETS[size] for s in seconds)
        target = f", {met} within {TARGETS[size]:g} s"
    return f"{size}, {len(seconds)} seeds end to end{target}: {spread}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=",".join(SIZES))
    parser.add_argument("--mip-gap", type=float, default=0.005)
    parser.add_argument("--time-limit", type=float, default=600.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--seeds", type=seed_list, help="A-B or A,B,…: one row per seed")
    parser.add_argument(
        "--jobs",
        type=int,
        default=default_jobs(),
        help="worker processes: configs enumerated, blocks solved [default: one per core, as "
        "fleetopt solve]",
    )
    parser.add_argument("--no-cli", action="store_true", help="skip the end-to-end CLI run")
    parser.add_argument("--pricing", action="store_true", help="add reserved/spot price tiers")
    parser.add_argument("--whole", action="store_true", help="one model, no blocks")
    parser.add_argument("--highs-seed", type=int, default=0, help="HiGHS's random_seed")
    parser.add_argument("--presolve-rounds", type=int, help="presolve.MAX_ROUNDS instead")
    parser.add_argument("--budget", type=float, help="most throughput for B $/h, not least cost")
    args = parser.parse_args()
    if (args.highs_seed or args.presolve_rounds is not None) and not args.no_cli:
        parser.error("--highs-seed and --presolve-rounds apply in process only: add --no-cli")
    if args.presolve_rounds is not None:
        presolve.MAX_ROUNDS = args.presolve_rounds
    options = SolveOptions(
        time_limit=args.time_limit, mip_gap=args.mip_gap, jobs=args.jobs, seed=args.highs_seed
    )
    header = (
        f"{'size':<8} {'seed':>4} {'configs':>7} {'kept':>6} {'blocks':>6} {'vars':>8} "
        f"{'rows':>8} {'enum s':>7} {'pre s':>7} {'build s':>7} {'hand s':>7} {'solve s':>8} "
        f"{'total s':>8} {'build%':>6} {'gap':>7} {'status':<8} {'$/h':>9} {'cli s':>7}"
        + (f" {'scale':>7}" if args.budget is not None else "")
    )
    print(header)
    for size in args.sizes.split(","):
        ends, totals = [], []
        for seed in args.seeds or [args.seed]:
            data = instance(size, *SIZES[size], seed, args.pricing, args.budget)
            r = measure(data, options, args.whole)
            totals.append(r["total"])
            stages = sum(r[stage] for stage in ("enum", "presolve", "build", "handoff", "solve"))
            lean = (r["build"] + r["handoff"]) / stages
            gap = "-" if r["gap"] is None else f"{r['gap']:.2%}"
            cost = "-" if r["cost"] is None else f"{r['cost']:,.2f}"
            if not args.no_cli:
                ends.append(cli_seconds(data, options))
            cli = f"{ends[-1]:.2f}" if ends else "-"
            if args.budget is not None:
                cli += " " + ("-" if r["scale"] is None else f"{r['scale']:.4f}").rjust(7)
            print(
                f"{size:<8} {seed:>4} {r['configs']:>7} {r['kept']:>6} {r['blocks']:>6} "
                f"{r['vars']:>8} {r['rows']:>8} {r['enum']:>7.2f} {r['presolve']:>7.2f} "
                f"{r['build']:>7.2f} {r['handoff']:>7.2f} {r['solve']:>8.2f} {r['total']:>8.2f} "
                f"{lean:>6.0%} {gap:>7} {r['status']:<8} {cost:>9} {cli:>7}",
                flush=True,
            )
        if len(totals) > 1:
            print(summary(size, ends or totals, bool(ends)), flush=True)


if __name__ == "__main__":
    main()
