"""`fleetopt sweep` and `fleetopt pareto`: many scenarios of one instance, solved in parallel.

Both validate every scenario before solving anything (a bad --set or value is exit 2, one line),
print a progress line per finished scenario on stderr, and then the table on stdout.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import click

from fleetopt.command_support import (
    OutputPath,
    load_checked_instance,
    one_line_errors,
    solver_options,
)
from fleetopt.errors import InputError, VerificationError
from fleetopt.pareto import KINDS
from fleetopt.solve import SolveOptions
from fleetopt.sweep.runner import Result

PLOT_SUFFIXES = (".png", ".svg", ".pdf")


def _common(func: Callable) -> Callable:
    """Options shared by sweep and pareto."""
    for option in reversed(
        [
            click.option(
                "--jobs",
                type=click.IntRange(min=1),
                help="Scenarios solved at once, one process each [default: one per core].",
            ),
            click.option(
                "--csv",
                "csv_path",
                type=OutputPath(),
                help="Also write the table as CSV.",
            ),
            click.option(
                "--plot",
                "plot_path",
                type=OutputPath(),
                help="Also draw a plot (.png, .svg or .pdf).",
            ),
            click.option(
                "--format",
                "fmt",
                type=click.Choice(["table", "json"]),
                default="table",
                show_default=True,
            ),
        ]
    ):
        func = option(func)
    return solver_options("per scenario")(func)


def _check_plot(plot_path: str | None) -> None:
    """Fail before solving, not after, on a plot format matplotlib should not guess."""
    if plot_path is not None and Path(plot_path).suffix.lower() not in PLOT_SUFFIXES:
        raise InputError(f"--plot {plot_path}: name the file .png, .svg or .pdf")


def _fail_on_errors(results: list[Result]) -> None:
    """Exit 4 after the table when a plan failed verification (a bug, never the input's fault)."""
    failed = [r for r in results if r.outcome.status == "error"]
    if failed:
        raise VerificationError(
            f"{len(failed)} of {len(results)} scenarios failed verification (a bug; please "
            f"report it), first: {failed[0].outcome.reason}"
        )


def _progress(done: int, total: int, result: Result) -> None:
    from fleetopt.sweep.table import progress_line

    click.echo(progress_line(done, total, result), err=True)


@click.command()
@click.argument("instance_file", type=click.Path(dir_okay=False))
@click.option(
    "--set",
    "sets",
    multiple=True,
    metavar="PATH=V1,V2,...",
    help="A field and its values, e.g. workloads.chat.slo.tpot_ms=20,30,50; list items by "
    "name (workloads, models) or type (gpus). Repeat for a grid (cartesian product).",
)
@_common
@one_line_errors
def sweep(instance_file, sets, jobs, time_limit, mip_gap, csv_path, plot_path, fmt) -> None:
    """Solve a grid of scenarios in parallel: one row per scenario with $/h, GPUs and tokens/s."""
    from fleetopt.sweep.grid import expand, parse_sets
    from fleetopt.sweep.runner import run_scenarios
    from fleetopt.sweep.table import to_csv, to_dict, to_table

    _check_plot(plot_path)
    instance = load_checked_instance(instance_file)
    axes = parse_sets(list(sets), instance)
    scenarios = expand(instance, axes)
    results = run_scenarios(scenarios, SolveOptions(time_limit, mip_gap), jobs, _progress)
    click.echo(json.dumps(to_dict(axes, results), indent=2) if fmt == "json" else to_table(results))
    if csv_path:
        Path(csv_path).write_text(to_csv(results))
    if plot_path:
        from fleetopt.report.sweep_plots import save, sweep_figure

        save(sweep_figure(instance.name, axes, results), plot_path)
    _fail_on_errors(results)


@click.command()
@click.argument("instance_file", type=click.Path(dir_okay=False))
@click.option(
    "--vary",
    type=click.Choice(KINDS),
    required=True,
    help="The SLO target to vary.",
)
@click.option(
    "--workload",
    help="Vary this workload only [default: every workload that states "
    "the target, scaled together].",
)
@click.option(
    "--points",
    type=click.IntRange(min=2),
    default=8,
    show_default=True,
    help="Points from the tightest feasible target to 4× the stated one (log-spaced), "
    "plus the stated target.",
)
@click.option(
    "--values",
    help="Targets to solve instead, ms, comma-separated (the first varied "
    "workload's; others keep their stated ratio).",
)
@_common
@one_line_errors
def pareto(
    instance_file,
    vary,
    workload,
    points,
    values,
    jobs,
    time_limit,
    mip_gap,
    csv_path,
    plot_path,
    fmt,
) -> None:
    """Trace the cost–latency frontier: the cheapest fleet at each TPOT or TTFT target."""
    from fleetopt.pareto import choose_target, default_values, trace
    from fleetopt.sweep.table import frontier_column, frontier_dict, frontier_table, to_csv

    _check_plot(plot_path)
    instance = load_checked_instance(instance_file)
    if instance.objective.maximize is not None:  # its frontier is by cost; this one spends a budget
        raise InputError(
            "objective.maximize: pareto traces the cheapest fleet at each target, and this "
            "instance buys the most throughput for a budget; drop objective to trace costs, or "
            "vary the target with `fleetopt sweep --set` to see what the budget serves"
        )
    target = choose_target(instance, vary, workload)
    if values is not None:
        xs = _values(values)
        note = f"{vary} at the values given"
    else:
        xs, note = default_values(instance, target, points)
    options = SolveOptions(time_limit, mip_gap)
    front = trace(instance, target, xs, note, options, jobs, _progress)
    click.echo(
        json.dumps(frontier_dict(front), indent=2) if fmt == "json" else frontier_table(front)
    )
    if csv_path:
        Path(csv_path).write_text(to_csv([p.result for p in front.points], frontier_column(front)))
    if plot_path:
        from fleetopt.report.sweep_plots import frontier_figure, save

        save(frontier_figure(front), plot_path)
    _fail_on_errors([p.result for p in front.points])


def _values(text: str) -> list[float]:
    try:
        xs = [float(v) for v in text.split(",")]
    except ValueError:
        raise InputError(
            f"--values {text}: give targets in ms separated by commas, e.g. 20,30,50"
        ) from None
    if any(not x > 0 or x == float("inf") for x in xs):
        raise InputError(f"--values {text}: targets must be positive and finite, ms")
    if len(set(xs)) < len(xs):
        raise InputError(f"--values {text}: a value is given twice; list each once")
    return xs
