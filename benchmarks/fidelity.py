"""Predicted vs measured serving throughput for every row of the calibration data, and the fit.

    python benchmarks/fidelity.py             # fit, then print both tables and the medians
    python benchmarks/fidelity.py --markdown  # the same tables as markdown (docs/cost-model.md)

Rows: fleetopt/catalog/calibration.csv (output tokens/s per GPU, each with its source). Rows
whose lengths are not known (MLPerf's dataset input mean is not sourced) are listed, not
predicted.

Split, fixed and independent of any error (`split`): within each (model, GPU, tp) in file order
the 1st, 3rd, ... row is fitted and the 2nd, 4th, ... held out. The default factors are fitted on
all fitted rows; a GPU type with at least MIN_ROWS_PER_GPU fitted rows also gets its own factors,
fitted on its rows starting from the default. Held-out rows are predicted with the same factors
and were never seen by the fit. The shipped factors (fleetopt/perf/efficiency.py DEFAULT and
`efficiency:` in fleetopt/catalog/gpus.yaml) are the ones this script prints.
"""

from __future__ import annotations

import argparse
import csv
import statistics
from collections.abc import Sequence
from importlib import resources

from fleetopt.calibrate.fit import fit, free_factors
from fleetopt.calibrate.observation import BATCH_RULES, Observation, predict
from fleetopt.instance import Efficiency
from fleetopt.perf.efficiency import DEFAULT

MIN_ROWS_PER_GPU = 6


def load_rows() -> tuple[list[Observation], list[dict]]:
    """Predictable observations, and the rows that cannot be predicted (lengths unknown)."""
    text = resources.files("fleetopt.catalog").joinpath("calibration.csv").read_text()
    usable, skipped = [], []
    for row in csv.DictReader(text.splitlines()):
        if not row["input_tokens"] or not row["tensor_parallel"]:
            skipped.append(row)
            continue
        seqs = row["max_num_seqs"]
        usable.append(
            Observation(
                model=row["model"],
                gpu=row["gpu"],
                tensor_parallel=int(row["tensor_parallel"]),
                weight_dtype=row["weight_dtype"],
                kv_dtype=row["kv_dtype"],
                input_tokens=float(row["input_tokens"]),
                output_tokens=float(row["output_tokens"]),
                output_tokens_per_s_per_gpu=float(row["output_tokens_per_s_per_gpu"]),
                ttft_ms=float(row["ttft_ms"]) if row["ttft_ms"] else None,
                tpot_ms=float(row["tpot_ms"]) if row["tpot_ms"] else None,
                max_num_seqs=int(seqs) if seqs.isdigit() else 2048,
                batch_rule=seqs if seqs in BATCH_RULES else None,
                label=row["latency_limit"],
                kv_cache_free_fraction=float(row["kv_cache_free_fraction"])
                if row["kv_cache_free_fraction"]
                else None,
            )
        )
    return usable, skipped


def split(rows: Sequence[Observation]) -> tuple[list[Observation], list[Observation]]:
    """Fitted and held-out rows: within each (model, GPU, tp) in file order, the 1st, 3rd, ...
    row is fitted and the 2nd, 4th, ... held out — fixed, never chosen by error, and balanced
    over every replica configuration."""
    seen: dict[tuple, int] = {}
    fitted, held_out = [], []
    for o in rows:
        group = (o.model, o.gpu, o.tensor_parallel)
        seen[group] = seen.get(group, -1) + 1
        (held_out if seen[group] % 2 else fitted).append(o)
    return fitted, held_out


def fit_factors(fitted: Sequence[Observation]) -> tuple[Efficiency, dict[str, Efficiency]]:
    """The default factors (all fitted rows: compute, memory, the engine's step overhead and the
    MoE correction) and, where a GPU has enough rows, its own compute and memory shares (and
    interconnect, off NVLink); the step overhead and the MoE correction stay the default's."""
    default = fit(fitted, DEFAULT, free_factors(fitted, moe=True))
    per_gpu = {}
    for gpu in sorted({o.gpu for o in fitted}):
        mine = [o for o in fitted if o.gpu == gpu]
        if len(mine) >= MIN_ROWS_PER_GPU:
            names = [n for n in free_factors(mine) if n != "step_overhead_ms"]
            per_gpu[gpu] = fit(mine, default, names)
    return default, per_gpu


def report(title: str, data: Sequence[Observation], factors, markdown: bool) -> list[float]:
    default, per_gpu = factors
    print(f"\n{title}\n")
    if markdown:
        print("| model | GPU | tp | in | out | measured tok/s/GPU | predicted | error |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    errs = []
    for o in data:
        predicted = predict(o, per_gpu.get(o.gpu, default))
        err = predicted / o.output_tokens_per_s_per_gpu - 1
        errs.append(abs(err))
        cells = [
            o.model,
            o.gpu,
            str(o.tensor_parallel),
            f"{o.input_tokens:g}",
            f"{o.output_tokens:g}",
            f"{o.output_tokens_per_s_per_gpu:,.0f}",
            f"{predicted:,.0f}",
            f"{err:+.1%}",
        ]
        if markdown:
            print("| " + " | ".join(cells) + " |")
        else:
            print("{:<16} {:<9} {:>2} {:>6} {:>5} {:>9} {:>9} {:>7}".format(*cells))
    print(
        f"\n{len(errs)} rows: median |error| {statistics.median(errs):.1%}, largest {max(errs):.1%}"
    )
    return errs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--markdown", action="store_true", help="print markdown tables")
    args = parser.parse_args()
    usable, skipped = load_rows()
    fitted, held_out = split(usable)
    factors = fit_factors(fitted)
    default, per_gpu = factors
    print(f"default factors: {default}")
    for gpu, eff in per_gpu.items():
        print(f"{gpu} factors: {eff}")
    report("Rows fitted on", fitted, factors, args.markdown)
    report("Rows held out", held_out, factors, args.markdown)
    print(f"\nNot predicted ({len(skipped)} rows, lengths or tp not sourced):")
    for row in skipped:
        print(
            f"  {row['model']} {row['gpu']} {row['latency_limit']}: "
            f"{row['output_tokens_per_s_per_gpu']} tok/s/GPU"
        )


if __name__ == "__main__":
    main()
