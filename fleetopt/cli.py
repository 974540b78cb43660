"""Command line: solve, validate, schema, catalog. Errors are one line and an exit code.

Each command imports what it needs when it runs, and the commands that live beside their feature
are imported only when named: `fleetopt solve` starts without pandas, matplotlib or the
simulator (docs/benchmarks.md, "Start-up")."""

from __future__ import annotations

import atexit
import contextlib
import functools
import importlib
import json
import os
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import click

from fleetopt.command_support import (
    FiniteRange,
    OneLineGroup,
    OutputPath,
    jobs_option,
    load_checked_instance,
    max_num_seqs_option,
    one_line_errors,
    progress,
    solver_options,
)
from fleetopt.dtypes import DTYPES
from fleetopt.errors import InfeasibleError, InputError, NoPlanInTime

if TYPE_CHECKING:
    from fleetopt.instance import Instance
    from fleetopt.plan import Plan

FEATURE_COMMANDS = {
    "calibrate": ("fleetopt.calibrate.command", "calibrate"),
    "import-aiconfigurator": ("fleetopt.calibrate.command", "import_aiconfigurator"),
    "explain": ("fleetopt.explain.command", "explain"),
    "simulate": ("fleetopt.simulate.command", "simulate_command"),
    "sweep": ("fleetopt.sweep.command", "sweep"),
    "pareto": ("fleetopt.sweep.command", "pareto"),
}
"""Commands that live beside their feature, one line each: name → (module, attribute)."""


class LazyGroup(OneLineGroup):
    """Imports a feature command's module only when that command is named (or help lists it)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *FEATURE_COMMANDS})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in FEATURE_COMMANDS:
            return super().get_command(ctx, name)
        module, attribute = FEATURE_COMMANDS[name]
        return getattr(importlib.import_module(module), attribute)


@click.group(name="fleetopt", cls=LazyGroup)
@click.version_option(package_name="fleetopt")
def main() -> None:
    """Size GPU fleets for LLM serving in tokens per second."""


def _write(text: str, output: str | None) -> None:
    text = text.rstrip("\n")
    if output:
        Path(output).write_text(text + "\n")
    else:
        click.echo(text)


FORMATS = {".txt": "table", ".json": "json", ".csv": "csv", ".md": "markdown"}
"""A plan's format by its file's extension, where --format is not given."""


@main.command()
@click.argument("instance_file", type=click.Path(dir_okay=False))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(list(FORMATS.values())),
    help="Output format of the plan [default: from the -o file's extension (.json, .csv, .md), "
    "else table].",
)
@click.option("-o", "--output", type=OutputPath(), help="Write the plan to a file.")
@solver_options()
@click.option(
    "--threads",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Solver threads; 1 keeps the answer reproducible.",
)
@jobs_option()
@click.option(
    "--budget",
    type=FiniteRange(min=0, min_open=True),
    help="Maximise throughput within this $/hour instead of minimising cost "
    "(shortcut for objective: {maximize: throughput, budget_per_hour: B}).",
)
@click.option("-v", "--verbose", is_flag=True, help="Show the HiGHS log.")
@click.option(
    "--report",
    type=OutputPath(),
    help="Also write a report with plots: REPORT.md (PNGs beside it) or REPORT.html (one file).",
)
@click.option(
    "--simulate",
    "simulate",
    is_flag=True,
    help="Then simulate the plan (Poisson, 20,000 requests, seed 0) and print the measured "
    "p99 TTFT and TPOT beside the targets (on stderr for json and csv).",
)
@one_line_errors
def solve(
    instance_file,
    fmt,
    output,
    time_limit,
    mip_gap,
    threads,
    jobs,
    budget,
    verbose,
    report,
    simulate,
) -> None:
    """Find the cheapest fleet that meets every token-throughput and latency target."""
    from fleetopt.instance import Objective
    from fleetopt.report.text import to_csv, to_markdown, to_table
    from fleetopt.workers import default_jobs

    fmt = fmt or FORMATS.get(Path(output or "").suffix.lower(), "table")
    instance = load_checked_instance(instance_file)
    if budget is not None:
        objective = Objective(maximize="throughput", budget_per_hour=budget)
        instance = instance.model_copy(update={"objective": objective})
    hint = "Ctrl-C or --time-limit stops early: docs/user-guide.md, Stopping early"
    with progress(f"solving {instance.name}...", enabled=not verbose, hint=hint, detail=_how_far):
        plan = _plan(instance, time_limit, mip_gap, threads, verbose, jobs or default_jobs())
    render = {
        "table": to_table,
        "json": lambda p: p.to_json(),
        "csv": to_csv,
        "markdown": to_markdown,
    }
    _write(render[fmt](plan), output)
    if plan.interrupted:
        gap = "unknown" if plan.mip_gap is None else f"{plan.mip_gap:.2%}"
        click.echo(f"note: interrupted: the best plan found so far (gap {gap})", err=True)
    if report:
        from fleetopt.report.document import write_report

        write_report(plan, report)
    if simulate:
        from fleetopt.simulate import after_solve

        click.echo(after_solve(plan, instance), err=fmt in ("json", "csv"))


def _how_far() -> str:
    """The blocks solved and the gap of the one under way, for `fleetopt solve`'s display. Read
    from its thread, which may not import (the solver is imported meanwhile, by this process's
    main thread): nothing until fleetopt.solve is."""
    watched = getattr(sys.modules.get("fleetopt.solve"), "WATCHED", None)
    if watched is None:
        return ""
    blocks, gap = watched.blocks, watched.gap
    parts = [] if blocks is None else [f"{blocks[0]} of {blocks[1]} blocks"]
    parts += [] if gap is None else [f"gap {gap:.2%}"]
    return f"({', '.join(parts)})" if parts else ""


def _plan(
    instance: Instance,
    time_limit: float | None,
    mip_gap: float,
    threads: int,
    verbose: bool,
    jobs: int,
) -> Plan:
    """`plan_fleet`, its configs enumerated first, so that Pyomo and HiGHS, a sixth of a
    second of imports, load while the workers enumerate (a typical instance 0.08 s sooner:
    docs/benchmarks.md); where lengths are data, `plan_fleet` splits them into buckets first."""
    from fleetopt.catalog import resolve
    from fleetopt.configs import enumerate_configs

    enumerated = None
    if not instance.length_routed:
        resolved = resolve(instance)
        solver = functools.partial(importlib.import_module, "fleetopt.pipeline")
        enumerated = resolved, enumerate_configs(resolved, jobs, meanwhile=solver)
    from fleetopt.pipeline import plan_fleet
    from fleetopt.solve import SolveOptions

    options = SolveOptions(time_limit, mip_gap, threads, verbose, jobs=jobs)
    return plan_fleet(instance, options, enumerated)


@main.command()
@click.argument("instance_file", type=click.Path(dir_okay=False))
@one_line_errors
def validate(instance_file) -> None:
    """Check an instance file against the schema and the catalog."""
    instance = load_checked_instance(instance_file)
    counts = [
        _counted(len(instance.gpus), "GPU type"),
        _counted(len(instance.models), "model"),
        _counted(len(instance.workloads), "workload"),
    ]
    click.echo(f"{instance_file}: valid ({', '.join(counts)})")


def _counted(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


@main.command()
@click.option("--model", required=True, help="Catalog model key (see `fleetopt catalog`).")
@click.option("--gpu", required=True, help="Catalog GPU type.")
@click.option(
    "--tp", type=click.IntRange(min=1), default=1, show_default=True, help="Tensor-parallel size."
)
@click.option("--input-tokens", type=FiniteRange(min=1), required=True, help="Prompt length.")
@click.option("--output-tokens", type=FiniteRange(min=1), required=True, help="Output length.")
@click.option("--weight-dtype", type=click.Choice(DTYPES), default="bf16", show_default=True)
@click.option("--kv-dtype", type=click.Choice(DTYPES), default="bf16", show_default=True)
@click.option("--ttft-ms", type=FiniteRange(min=0, min_open=True), help="TTFT limit.")
@click.option("--tpot-ms", type=FiniteRange(min=0, min_open=True), help="TPOT limit.")
@click.option(
    "--role",
    type=click.Choice(["colocated", "prefill", "decode"]),
    default="colocated",
    show_default=True,
)
@max_num_seqs_option("Engine limit on sequences in a decode batch.")
@click.option(
    "--replicas",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Pool size: with a TTFT limit, replicas sharing one prefill queue each carry more.",
)
@click.option(
    "--calibration",
    type=click.Path(dir_okay=False),
    help="Calibration overlay (`fleetopt calibrate -o`): its factors for --gpu.",
)
@click.option(
    "--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True
)
@one_line_errors
def perf(
    model,
    gpu,
    tp,
    input_tokens,
    output_tokens,
    weight_dtype,
    kv_dtype,
    ttft_ms,
    tpot_ms,
    role,
    max_num_seqs,
    replicas,
    calibration,
    fmt,
) -> None:
    """Capacity of one replica: tokens/s, concurrency, KV capacity, latency and what limits it."""
    from fleetopt.catalog import gpu_catalog, model_catalog, resolve_gpu, resolve_model
    from fleetopt.configs import valid_tensor_parallel
    from fleetopt.instance import GpuChoice, ModelChoice, Serving
    from fleetopt.perf.calculator import replica_capacity, why_none
    from fleetopt.perf.operating_point import Limits, RequestShape, walker
    from fleetopt.perf.replica import Replica

    for option, name, known in (("--model", model, model_catalog()), ("--gpu", gpu, gpu_catalog())):
        if name not in known:
            raise InputError(
                f"{option} {name}: not in the catalog (known: {', '.join(sorted(known))}); "
                "see `fleetopt catalog`"
            )
    m = resolve_model(ModelChoice(name=model, weight_dtype=weight_dtype, kv_dtype=kv_dtype))
    calibrated = None
    if calibration is not None:
        from fleetopt.calibrate.overlay import read_overlay

        overlay = read_overlay(calibration)
        if gpu not in overlay:
            raise InputError(
                f"--calibration {calibration}: no factors for {gpu} (it has: "
                f"{', '.join(sorted(overlay))}); calibrate that GPU type or drop the option"
            )
        calibrated = overlay[gpu]
    g = resolve_gpu(GpuChoice(type=gpu), calibrated)
    problem = valid_tensor_parallel(m, g, tp)
    if problem:
        raise InputError(f"--tp: {problem}")
    serving = Serving(max_num_seqs=max_num_seqs)
    limits = Limits(serving.max_prefill_utilization, max_num_seqs, serving.gpu_memory_utilization)
    shape = RequestShape(
        input_tokens,
        output_tokens,
        input_tokens,
        output_tokens,
        ttft_ms / 1e3 if ttft_ms else None,
        tpot_ms / 1e3 if tpot_ms else None,
        output_shortest=output_tokens,
    )
    replica = walker(Replica(m, g, tp), role, shape.walk_tokens)
    result = replica_capacity(replica, role, shape, serving.chunk_tokens, limits, replicas)
    if result is None:
        why = why_none(replica, role, shape, serving.chunk_tokens, limits, replicas)
        raise InfeasibleError(f"{model} on {gpu} tp{tp} ({role}): {why}")
    if fmt == "json":
        click.echo(json.dumps(result.to_dict(), indent=2))
    else:
        from fleetopt.report.text import capacity_table

        click.echo(capacity_table(result))


@main.command()
@click.argument("instance_file", type=click.Path(dir_okay=False))
@click.option(
    "--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True
)
@solver_options("per mode")
@one_line_errors
def compare(instance_file, fmt, time_limit, mip_gap) -> None:
    """Colocated-only, disaggregated-only and mixed serving side by side, and why they differ."""
    from fleetopt.compare import compare_modes, to_dict
    from fleetopt.report.text import compare_table
    from fleetopt.solve import SolveOptions

    results = compare_modes(load_checked_instance(instance_file), SolveOptions(time_limit, mip_gap))
    click.echo(json.dumps(to_dict(results), indent=2) if fmt == "json" else compare_table(results))
    if all(result.plan is None for result in results):  # as `solve` would: exit 3, or 1
        mixed = next(r for r in results if r.mode == "mixed")
        error = InfeasibleError if mixed.status == "infeasible" else NoPlanInTime
        raise error(f"no mode has a fleet; mixed serving: {mixed.binding[0]}")


@main.command()
def schema() -> None:
    """Print the JSON Schema of instance files."""
    from fleetopt.instance import json_schema

    click.echo(json.dumps(json_schema(), indent=2))


@main.command()
@click.option(
    "--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True
)
@one_line_errors
def catalog(fmt) -> None:
    """List the built-in GPU types and models, with prices and their dates."""
    from fleetopt.report.catalog import catalog_json, catalog_table

    click.echo(catalog_json() if fmt == "json" else catalog_table())


def run() -> None:
    """The `fleetopt` console script: `main`, then the process ends without tearing the
    interpreter down. A solve leaves its memo caches and what the models referred to, and
    freeing them object by object took 0.08-0.1 s of a typical instance's 1.5 s
    (docs/benchmarks.md); the exit handlers (worker pools, temporary files) still run. Where a
    thread is still alive, the ordinary exit waits for it as it should."""
    try:
        main()
    except SystemExit as exc:
        if not isinstance(exc.code, int | None) or threading.active_count() > 1:
            raise
        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError):  # the reader has gone (`fleetopt catalog | head`)
                stream.flush()
        os._exit(exc.code or 0)


if __name__ == "__main__":  # pragma: no cover
    run()
