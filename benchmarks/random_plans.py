"""Seeded random instances through the command line: solve, then simulate, a row per seed.

    python benchmarks/random_plans.py [--seeds 0-69] [--time-limit 40] [--mip-gap 0.005]
                                      [--requests 20000] [--narrow]

Unseen instances differ from the shipped ones in every field; this draws them. `random_instance`
(also tests/test_random_instances.py's, at its quick seeds) draws a model, one to three GPU types,
tensor-parallel sizes, serving modes and one to three classes: rates, length distributions,
TTFT and TPOT targets, some percentiles. Without `--narrow` each seed also draws (its own
stream, so the narrow draw is unchanged) from more GPU types and models, BF16 weights, any
percentile from p50 to p99.9, a class without a TTFT or a TPOT target, `max_num_seqs`, a demand
profile of two to six periods and price tiers with spot.

Each instance goes through `fleetopt solve FILE --time-limit T --mip-gap G --jobs 1 --format
json` (the plan is verified before it is printed) and, with a plan, `fleetopt simulate` at
`--requests` Poisson arrivals, seed 0. A row: the exit code or status, $/h, gap, seconds of the
solve, and every class simulated more than one point below its percentile (both targets met,
as tests/test_plans_hold_in_simulation.py measures), with the simulator's margin on that share
(`both_margin`: a short window on a busy, variable queue reads wide; simulate such a plan
longer before calling it a miss). Infeasible instances show the first words of their
explanation; any other exit code is a failure. The summary counts each kind and the
slowest solves. Figures go to docs/benchmarks.md with the command.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from fleetopt.errors import InfeasibleError

GPUS = ["l40s", "a100-80gb", "h100-sxm", "h200", "b200", "mi300x"]
MODELS = ["llama-3.1-8b", "qwen3-32b", "llama-3.1-70b", "mixtral-8x7b"]
MORE_GPUS = [*GPUS, "l4", "a10g", "a100-40gb"]
MORE_MODELS = [*MODELS, "mistral-7b"]


def _lengths(rng: random.Random, mean: int, cap: int) -> int | dict:
    if rng.random() < 0.3:
        return mean
    p50 = round(mean * rng.uniform(0.5, 0.9))
    p90 = round(mean * rng.uniform(1.5, 2.5))
    p99 = min(cap, round(p90 * rng.uniform(1.5, 3)))
    longest = min(cap, round(p99 * rng.uniform(1.2, 2.5)))
    return {"mean": mean, "p50": p50, "p90": p90, "p99": p99, "max": longest}


def random_instance(seed: int) -> dict:
    rng = random.Random(seed)
    model = rng.choice(MODELS)
    workloads = []
    for i in range(rng.randint(1, 3)):
        slo = {
            "ttft_ms": rng.choice([500, 1000, 2000, 5000]),
            "tpot_ms": rng.choice([30, 50, 80, 150]),
        }
        if rng.random() < 0.4:
            slo["percentile"] = rng.choice([90, 95, 99.9])
        workloads.append(
            {
                "name": f"class-{i}",
                "model": model,
                "requests_per_s": round(rng.uniform(1, 40), 1),
                "input_tokens": _lengths(rng, rng.choice([200, 800, 2000, 6000]), 24000),
                "output_tokens": _lengths(rng, rng.choice([50, 200, 600, 1500]), 6000),
                "slo": slo,
            }
        )
    return {
        "name": f"random-{seed}",
        "gpus": [{"type": g} for g in rng.sample(GPUS, rng.randint(1, 3))],
        "models": [{"name": model, "weight_dtype": "fp8", "kv_dtype": "fp8"}],
        "workloads": workloads,
        "serving": {
            "modes": rng.choice([["colocated"], ["colocated", "disaggregated"]]),
            "tensor_parallel": sorted(rng.sample([1, 2, 4, 8], rng.randint(1, 3))),
        },
    }


def wider_instance(seed: int) -> dict:
    """`random_instance` redrawn wider: more GPU types and models, BF16 weights, any
    percentile, one target only, and the fields it leaves at their defaults."""
    data, rng = random_instance(seed), random.Random(10_000 + seed)
    model = rng.choice(MORE_MODELS)
    data["gpus"] = [{"type": g} for g in rng.sample(MORE_GPUS, rng.randint(1, 4))]
    data["models"] = [
        {"name": model, "weight_dtype": rng.choice(["fp8", "bf16"]), "kv_dtype": "fp8"}
    ]
    for workload in data["workloads"]:
        workload["model"] = model
        slo = workload["slo"]
        if rng.random() < 0.25:
            slo["percentile"] = rng.choice([50, 75, 90, 95, 99, 99.9])
        if rng.random() < 0.15:
            del slo["ttft_ms"]
        elif rng.random() < 0.15:
            del slo["tpot_ms"]
    if rng.random() < 0.3:
        data["serving"]["max_num_seqs"] = rng.choice([2, 4, 8, 16, 64, 256])
    if rng.random() < 0.3:
        periods = rng.randint(2, 6)
        data["demand_profile"] = {
            "multipliers": [round(rng.uniform(0.1, 1.5), 2) for _ in range(periods)]
        }
    if rng.random() < 0.25:
        spot = round(rng.uniform(0, 0.6), 2)
        data["pricing"] = {
            "reserved_price_factor": 0.6,
            "spot_price_factor": 0.35,
            "spot_max_fraction": spot,
        }
    return data


def _run(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "fleetopt.cli", *args], capture_output=True, text=True
    )


def _last_line(text: str, width: int = 100) -> str:
    """The message a command ended on, without its "error: " prefix."""
    lines = text.strip().splitlines()
    return lines[-1].removeprefix("error: ")[:width] if lines else ""


def row(seed: int, data: dict, folder: Path, options: argparse.Namespace) -> tuple[str, float, str]:
    """(kind, solve seconds, the row's text) for one instance: planned, missed (a class below
    its percentile in simulation), infeasible or failed."""
    path, plan_path = folder / f"random-{seed}.yaml", folder / f"plan-{seed}.json"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    solve = ["solve", str(path), "--time-limit", str(options.time_limit)]
    solve += ["--mip-gap", str(options.mip_gap), "--jobs", "1", "--format", "json"]
    start = time.perf_counter()
    solved = _run(solve)
    seconds = time.perf_counter() - start
    if solved.returncode == InfeasibleError.exit_code:
        return "infeasible", seconds, f"infeasible  {_last_line(solved.stderr)}"
    if solved.returncode != 0:
        return "failed", seconds, f"exit {solved.returncode}  {_last_line(solved.stderr)}"
    plan_path.write_text(solved.stdout)
    plan = json.loads(solved.stdout)
    text = (
        f"{plan['status']:<9} {plan['cost_per_hour']:>10,.2f} $/h  gap {plan['mip_gap'] or 0:.2%}"
    )
    simulate = ["simulate", str(plan_path), "--instance", str(path), "--format", "json"]
    simulated = _run([*simulate, "--requests", str(options.requests)])
    if simulated.returncode != 0:
        return (
            "failed",
            seconds,
            f"{text}  simulate exit {simulated.returncode}  {_last_line(simulated.stderr)}",
        )
    misses = []
    for workload in json.loads(simulated.stdout)["workloads"]:
        attained, percentile = workload["slo_attainment"], workload["slo"]["percentile"]
        met, margin = attained["both"], attained["both_margin"]
        if met is not None and met < percentile / 100 - 0.01:
            noise = "" if margin is None else f" ± {margin:.1%}"
            misses.append(f"{workload['name']} {met:.1%}{noise} of p{percentile:g}")
    kind = "missed" if misses else "planned"
    return kind, seconds, f"{text}  {'; '.join(misses) or 'every class within its percentile'}"


def main() -> None:
    from scale import seed_list  # the script beside this one (tests load this file alone)

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=seed_list, default=seed_list("0-69"), help="A-B or A,B,…")
    parser.add_argument("--time-limit", type=float, default=40.0)
    parser.add_argument("--mip-gap", type=float, default=0.005)
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--narrow", action="store_true", help="the tests' draw only")
    options = parser.parse_args()
    draw = random_instance if options.narrow else wider_instance
    kinds: dict[str, list[int]] = {}
    times: list[tuple[float, int]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for seed in options.seeds:
            kind, seconds, text = row(seed, draw(seed), Path(tmp), options)
            kinds.setdefault(kind, []).append(seed)
            times.append((seconds, seed))
            print(f"{seed:>5} {seconds:6.1f} s  {text}", flush=True)
    counts = ", ".join(f"{len(seeds)} {kind}" for kind, seeds in sorted(kinds.items()))
    slowest = ", ".join(
        f"seed {seed} {seconds:.1f} s" for seconds, seed in sorted(times)[-3:][::-1]
    )
    print(f"\n{len(options.seeds)} instances: {counts}; slowest solves {slowest}")
    for kind in ("missed", "failed"):
        if kind in kinds:
            print(f"{kind}: seeds {', '.join(map(str, kinds[kind]))}")


if __name__ == "__main__":
    main()
