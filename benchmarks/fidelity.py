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

Rows of an engine in OWN_FACTORS are fitted on their own, per GPU type, as `fleetopt calibrate`
fits a user's engine: the same split, the same objective, the fitted half only. They test the
model's form (small batches, fixed concurrency, latency) without pulling the catalog's factors
towards an older engine.
"""

from __future__ import annotations

import argparse
import csv
import statistics
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

from fleetopt.calibrate.fit import fit, free_factors
from fleetopt.calibrate.observation import BATCH_RULES, Observation, prediction
from fleetopt.calibrate.overlay import write_overlay
from fleetopt.instance import Efficiency
from fleetopt.perf.efficiency import DEFAULT, describe

MIN_ROWS_PER_GPU = 6
ROOT = Path(__file__).resolve().parents[1]
OWN_FACTORS = {"NIM TensorRT-LLM (2024)": ROOT / "calibrations" / "nim-trtllm-2024.yaml"}
"""Engines fitted on their own, and the calibration overlay each fit is shipped as: NIM's
closed-loop sweeps (2024) ran a TensorRT-LLM older than the perf-overview rows, with a larger
fixed time per step, an attention walk and a host ceiling (docs/cost-model.md)."""
CLOSED_LOOP = "closed loop"
"""`latency_limit` of a run that kept `max_num_seqs` requests in flight (a fixed concurrency)."""


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
                closed_loop=row["latency_limit"].startswith(CLOSED_LOOP),
                engine_name=row["engine"],
                kv_cache_free_fraction=float(row["kv_cache_free_fraction"])
                if row["kv_cache_free_fraction"]
                else None,
            )
        )
    return usable, skipped


def catalog_rows(rows: Sequence[Observation]) -> list[Observation]:
    """The rows the shipped factors are fitted to: every engine but those in OWN_FACTORS."""
    return [o for o in rows if o.engine_name not in OWN_FACTORS]


def engine_rows(rows: Sequence[Observation], engine: str) -> list[Observation]:
    return [o for o in rows if o.engine_name == engine]


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


def fit_own_factors(fitted: Sequence[Observation], start: dict[str, Efficiency]):
    """Each GPU type's factors for rows of an engine fitted on its own, from that GPU's
    catalog factors (`start`), every factor its rows identify free."""
    return {
        gpu: fit(mine, start[gpu], free_factors(mine))
        for gpu in sorted({o.gpu for o in fitted})
        if len(mine := [o for o in fitted if o.gpu == gpu]) >= MIN_ROWS_PER_GPU
    }


def report(title: str, data: Sequence[Observation], factors, markdown: bool) -> list[float]:
    """Print predicted vs measured per row; closed-loop rows also show requests in flight and
    their mean TPOT, measured and predicted (a latency check beside the throughput one)."""
    default, per_gpu = factors
    closed = any(o.closed_loop for o in data)
    print(f"\n{title}\n")
    if markdown:
        extra = " in flight | TPOT ms meas. / pred. |" if closed else ""
        print("| model | GPU | tp | in | out | measured tok/s/GPU | predicted | error |" + extra)
        print("| --- " * (10 if closed else 8) + "|")
    errs, tpot_errs = [], []
    for o in data:
        efficiency = per_gpu.get(o.gpu, default)
        predicted, tpot = prediction(o, efficiency)
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
        if closed:
            if tpot is not None and o.tpot_ms:
                tpot_errs.append(abs(tpot / o.tpot_ms - 1))
            shown = "-" if tpot is None else f"{tpot:.1f}"
            cells += [str(o.max_num_seqs), f"{o.tpot_ms or 0:.1f} / {shown}"]
        if markdown:
            print("| " + " | ".join(cells) + " |")
        else:
            layout = "{:<16} {:<9} {:>2} {:>6} {:>5} {:>9} {:>9} {:>7}"
            print((layout + (" {:>4} {:>14}" if closed else "")).format(*cells))
    print(
        f"\n{len(errs)} rows: median |error| {statistics.median(errs):.1%}, largest {max(errs):.1%}"
    )
    if tpot_errs:
        print(
            f"mean TPOT of the closed-loop rows: median |error| {statistics.median(tpot_errs):.1%},"
            f" largest {max(tpot_errs):.1%}"
        )
    return errs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--markdown", action="store_true", help="print markdown tables")
    parser.add_argument(
        "--write-overlays", action="store_true", help="write the OWN_FACTORS fits' overlays"
    )
    args = parser.parse_args()
    usable, skipped = load_rows()
    fitted, held_out = split(catalog_rows(usable))
    factors = fit_factors(fitted)
    default, per_gpu = factors
    print(f"default factors: {describe(default)}")
    for gpu, eff in per_gpu.items():
        print(f"{gpu} factors: {describe(eff)}")
    report("Rows fitted on", fitted, factors, args.markdown)
    report("Rows held out", held_out, factors, args.markdown)
    for engine, overlay in OWN_FACTORS.items():
        own_fitted, own_held_out = split(engine_rows(usable, engine))
        start = {o.gpu: per_gpu.get(o.gpu, default) for o in own_fitted}
        own = fit_own_factors(own_fitted, start)
        print(f"\n{engine}, fitted on its own rows:")
        for gpu, eff in own.items():
            print(f"{gpu} factors: {describe(eff)}")
            if args.write_overlays:
                note = f"{engine}: fitted by python benchmarks/fidelity.py --write-overlays"
                write_overlay(overlay, gpu, eff, note + " (docs/cost-model.md)")
        report(f"{engine}: rows fitted on", own_fitted, (default, own), args.markdown)
        report(f"{engine}: rows held out", own_held_out, (default, own), args.markdown)
    print(f"\nNot predicted ({len(skipped)} rows, lengths or tp not sourced):")
    for row in skipped:
        print(
            f"  {row['model']} {row['gpu']} {row['latency_limit']}: "
            f"{row['output_tokens_per_s_per_gpu']} tok/s/GPU"
        )


if __name__ == "__main__":
    main()
