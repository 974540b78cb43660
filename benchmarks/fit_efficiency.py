"""Fit the default efficiency factors to measured max-load serving throughput, and print the fit.

    python benchmarks/fit_efficiency.py            # fit on every row, print the table
    python benchmarks/fit_efficiency.py --holdout  # fit on half, report the held-out error too

Rows: fleetopt/catalog/calibration.csv (output tokens/s per GPU at max load, no latency limit).
Prediction: the best colocated operating point of one replica for the row's single class, with
the same coefficients the program uses. Objective: median absolute log error.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import math
import statistics
from importlib import resources

from fleetopt.catalog import Gpu, Model, gpu_catalog, model_catalog
from fleetopt.instance import Efficiency
from fleetopt.perf.efficiency import DEFAULT
from fleetopt.perf.operating_point import Limits, RequestShape
from fleetopt.perf.replica import Replica
from fleetopt.perf.throughput import best_throughput

MAX_LOAD = Limits(max_prefill_utilization=1.0, max_num_seqs=2048, gpu_memory_utilization=0.9)
CHUNKS = [256, 512, 1024, 2048, 4096, 8192, 16384]


def rows() -> list[dict]:
    text = resources.files("fleetopt.catalog").joinpath("calibration.csv").read_text()
    return list(csv.DictReader(text.splitlines()))


def predict(row: dict, eff: Efficiency) -> float:
    spec = gpu_catalog()[row["gpu"]].model_copy(update={"efficiency": eff})
    gpu = Gpu(row["gpu"], spec, None, None)
    dtype = row["weight_dtype"]
    model = Model(row["model"], model_catalog()[row["model"]], dtype, dtype)
    tp = int(row["tensor_parallel"])
    shape = RequestShape(
        float(row["input_tokens"]),
        float(row["output_tokens"]),
        float(row["input_tokens"]),
        float(row["output_tokens"]),
        None,
        None,
    )
    best = best_throughput(Replica(model, gpu, tp), "colocated", shape, CHUNKS, MAX_LOAD)
    return best.output_tokens_per_s(shape) / tp if best else 0.0


def errors(data: list[dict], eff: Efficiency) -> list[float]:
    return [predict(r, eff) / float(r["output_tokens_per_s_per_gpu"]) - 1 for r in data]


def fit(data: list[dict]) -> Efficiency:
    best, best_score = DEFAULT, math.inf
    grid = itertools.product(
        [0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7],
        [0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9],
        [0.5, 1.0, 2.0, 3.0, 4.0, 6.0],
    )
    for compute, memory, overhead in grid:
        eff = Efficiency(
            compute=compute,
            memory=memory,
            interconnect=DEFAULT.interconnect,
            step_overhead_ms=overhead,
        )
        errs = [abs(math.log1p(e)) for e in errors(data, eff)]
        score = statistics.median(errs) + 0.25 * max(errs)
        if score < best_score:
            best, best_score = eff, score
    return best


def report(title: str, data: list[dict], eff: Efficiency) -> None:
    print(f"\n{title}")
    print(
        f"{'model':<14} {'gpu':<9} {'tp':>2} {'in':>6} {'out':>5} {'measured':>9} {'predicted':>9} {'error':>7}"
    )
    errs = []
    for r, e in zip(data, errors(data, eff), strict=True):
        errs.append(abs(e))
        print(
            f"{r['model']:<14} {r['gpu']:<9} {r['tensor_parallel']:>2} {r['input_tokens']:>6} "
            f"{r['output_tokens']:>5} {float(r['output_tokens_per_s_per_gpu']):>9,.0f} "
            f"{predict(r, eff):>9,.0f} {e:>+7.1%}"
        )
    print(f"median |error| {statistics.median(errs):.1%}, max |error| {max(errs):.1%}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--holdout", action="store_true", help="fit on even rows, test on odd rows")
    args = parser.parse_args()
    data = rows()
    fitted_on = data[::2] if args.holdout else data
    eff = fit(fitted_on)
    print(f"fitted: {eff}")
    print(f"default in fleetopt/perf/efficiency.py: {DEFAULT}")
    report("rows fitted on", fitted_on, eff)
    if args.holdout:
        report("rows held out", data[1::2], eff)


if __name__ == "__main__":
    main()
