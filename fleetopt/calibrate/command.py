"""`fleetopt calibrate`: fit one GPU type's efficiency factors to serving-benchmark results.

Each run of a result file is one observation: the replica (model, GPU, tp, formats) produced the
run's output tokens/s at its mean lengths. A run that states its concurrency kept that many
requests in flight: its prediction is the cost model's throughput with that many in flight
(closed loop: the TPOT is what that batch gave, not a limit). A run without one is predicted as
the best throughput with the run's mean TPOT as the step budget, under the engine's batch limit
(`--max-num-seqs`). Either way the fitted factors make the planner reproduce what was measured.
Runs that did not saturate the server (a request rate below capacity) carry little information
about capacity: sweep the rate or the concurrency; runs at a few requests in flight also fit
the small-batch factors (per-layer overhead, decode attention's bandwidth share and walk, the
host's ceiling: fleetopt/calibrate/fit.py).
"""

from __future__ import annotations

import statistics
from pathlib import Path

import click

from fleetopt.calibrate.fit import fit
from fleetopt.calibrate.observation import Observation, predict, replica_for
from fleetopt.calibrate.overlay import write_overlay
from fleetopt.calibrate.results import Run, read_runs
from fleetopt.catalog import gpu_catalog
from fleetopt.command_support import FiniteRange, max_num_seqs_option, one_line_errors
from fleetopt.configs import valid_tensor_parallel
from fleetopt.dtypes import DTYPES
from fleetopt.errors import InfeasibleError, InputError
from fleetopt.perf.efficiency import Efficiency, describe, efficiency_for_spec
from fleetopt.perf.operating_point import weights_blocker

DTYPE_CHOICE = click.Choice(DTYPES)


def observation(run: Run, model: str, gpu: str, tp: int, weight: str, kv: str, seqs: int):
    return Observation(
        model=model,
        gpu=gpu,
        tensor_parallel=tp,
        weight_dtype=weight,
        kv_dtype=kv,
        input_tokens=run.input_tokens,
        output_tokens=run.output_tokens,
        output_tokens_per_s_per_gpu=run.output_tokens_per_s / tp,
        tpot_ms=run.tpot_ms,
        max_num_seqs=max(1, round(run.concurrency)) if run.concurrency else seqs,
        label=run.source,
        closed_loop=run.concurrency is not None,
    )


@click.command()
@click.argument("results", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--model", required=True, help="Catalog model key the benchmark served.")
@click.option("--gpu", required=True, help="Catalog GPU type the benchmark ran on.")
@click.option("--tp", type=click.IntRange(min=1), required=True, help="Tensor-parallel size.")
@click.option("--weight-dtype", type=DTYPE_CHOICE, default="bf16", show_default=True)
@click.option("--kv-dtype", type=DTYPE_CHOICE, default="bf16", show_default=True)
@max_num_seqs_option("Engine batch limit, for runs that do not state their concurrency.")
@click.option(
    "-o", "--output", required=True, type=click.Path(dir_okay=False), help="Overlay YAML to write."
)
@one_line_errors
def calibrate(results, model, gpu, tp, weight_dtype, kv_dtype, max_num_seqs, output) -> None:
    """Fit efficiency factors to vLLM / GuideLLM benchmark results and write an overlay."""
    _calibrate(results, model, gpu, tp, weight_dtype, kv_dtype, max_num_seqs, output)


def _calibrate(results, model, gpu, tp, weight_dtype, kv_dtype, max_num_seqs, output) -> None:
    runs = [run for path in results for run in read_runs(path)]
    observations = [
        observation(r, model, gpu, tp, weight_dtype, kv_dtype, max_num_seqs) for r in runs
    ]
    before = efficiency_for_spec(gpu_catalog().get(gpu))
    _check_replica(observations[0], before)  # one clear error before the fit
    fitted = fit(observations, before)
    click.echo(f"{gpu}: catalog factors {describe(before)}")
    click.echo(f"{gpu}: fitted factors  {describe(fitted)}")
    errors = []
    for obs in observations:
        old, new = predict(obs, before), predict(obs, fitted)
        err = new / obs.output_tokens_per_s_per_gpu - 1
        errors.append(abs(err))
        was = f"{old:,.0f}" if old > 0 else "no operating point within the run's limits"
        click.echo(
            f"  {obs.label}: measured {obs.output_tokens_per_s_per_gpu:,.0f} tok/s/GPU, "
            f"predicted {new:,.0f} ({err:+.1%}; with the catalog factors {was})"
        )
    click.echo(
        f"{len(errors)} runs: median |error| {statistics.median(errors):.1%}, "
        f"largest {max(errors):.1%}"
    )
    note = (
        f"written by fleetopt calibrate --model {model} --gpu {gpu} --tp {tp} "
        f"--weight-dtype {weight_dtype} --kv-dtype {kv_dtype}\n"
        f"from {len(runs)} runs: " + ", ".join(results) + "\n"
        "include it in an instance with `calibration: <this file>`"
    )
    write_overlay(output, gpu, fitted, note)
    click.echo(f"wrote {output}")


def _check_replica(obs: Observation, efficiency: Efficiency) -> None:
    """The runs' replica exists: a known model and GPU (InputError otherwise), a tp that shards
    the model on the GPU (as `perf` checks), and weights that leave room for a KV cache (else
    every prediction is 0 and the fit means nothing)."""
    replica = replica_for(obs, efficiency)
    if why := valid_tensor_parallel(replica.model, replica.gpu, obs.tensor_parallel):
        raise InputError(f"--tp {obs.tensor_parallel}: {why}")
    limits, _ = obs.engine(replica)
    if blocker := weights_blocker(replica, limits):
        raise InfeasibleError(
            f"{obs.model} on {obs.gpu} tp{obs.tensor_parallel}: its {blocker.message}; "
            "the runs cannot have been measured there: check --model, --gpu and --tp"
        )


@click.command("import-aiconfigurator")
@click.argument("csv_file", type=click.Path(dir_okay=False))
@click.option("--model", required=True, help="Model name as the instance lists it.")
@click.option("--gpu", required=True, help="GPU type as the instance lists it.")
@click.option("--ttft-ms", type=FiniteRange(min=0, min_open=True), help="Drop slower rows.")
@click.option("--tpot-ms", type=FiniteRange(min=0, min_open=True), help="Drop slower rows.")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write YAML here.")
@one_line_errors
def import_aiconfigurator(csv_file, model, gpu, ttft_ms, tpot_ms, output) -> None:
    """Turn aiconfigurator's pareto.csv / best_config_topn.csv into instance `profiles`."""
    _import(csv_file, model, gpu, ttft_ms, tpot_ms, output)


def _import(csv_file, model, gpu, ttft_ms, tpot_ms, output) -> None:
    import yaml

    from fleetopt.calibrate.aiconfigurator import read_capacities, to_profiles

    profiles = to_profiles(read_capacities(csv_file, ttft_ms, tpot_ms), model, gpu)
    text = f"# from aiconfigurator results {csv_file}; paste under `profiles:` in an instance\n"
    text += yaml.safe_dump({"profiles": profiles}, sort_keys=False)
    if output:
        Path(output).write_text(text)
        click.echo(f"wrote {len(profiles)} profiles to {output}")
    else:
        click.echo(text.rstrip("\n"))
