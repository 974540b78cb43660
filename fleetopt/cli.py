"""Command line: solve, validate, schema, catalog. Errors are one line and an exit code."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from functools import wraps
from pathlib import Path

import click

from fleetopt.errors import FleetoptError
from fleetopt.instance import json_schema, load_instance


def one_line_errors(func: Callable) -> Callable:
    """Turn every fleetopt error into one line on stderr and its exit code (2 input, 3 infeasible)."""

    @wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except FleetoptError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(exc.exit_code)

    return wrapper


@click.group()
@click.version_option(package_name="fleetopt")
def main() -> None:
    """Size GPU fleets for LLM serving in tokens per second."""


def _write(text: str, output: str | None) -> None:
    if output:
        Path(output).write_text(text if text.endswith("\n") else text + "\n")
    else:
        click.echo(text)


@main.command()
@click.argument("instance_file", type=click.Path(dir_okay=False))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "json", "csv", "markdown"]),
    default="table",
    show_default=True,
    help="Output format of the plan.",
)
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write the plan to a file.")
@click.option(
    "--time-limit", type=click.FloatRange(min=0, min_open=True), help="Solver time limit, seconds."
)
@click.option(
    "--mip-gap",
    type=click.FloatRange(min=0),
    default=1e-4,
    show_default=True,
    help="Relative optimality gap at which the solver stops.",
)
@click.option(
    "--threads",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Solver threads; 1 keeps the answer reproducible.",
)
@click.option("-v", "--verbose", is_flag=True, help="Show the HiGHS log.")
@one_line_errors
def solve(instance_file, fmt, output, time_limit, mip_gap, threads, verbose) -> None:
    """Find the cheapest fleet that meets every token-throughput and latency target."""
    from fleetopt.pipeline import plan_fleet
    from fleetopt.report.text import to_csv, to_markdown, to_table
    from fleetopt.solve import SolveOptions

    instance = load_instance(instance_file)
    plan = plan_fleet(instance, SolveOptions(time_limit, mip_gap, threads, verbose))
    render = {
        "table": to_table,
        "json": lambda p: p.to_json(),
        "csv": to_csv,
        "markdown": to_markdown,
    }
    _write(render[fmt](plan), output)


@main.command()
@click.argument("instance_file", type=click.Path(dir_okay=False))
@one_line_errors
def validate(instance_file) -> None:
    """Check an instance file against the schema and the catalog."""
    from fleetopt.catalog import resolve

    instance = load_instance(instance_file)
    resolve(instance)
    click.echo(
        f"{instance_file}: valid ({len(instance.gpus)} GPU types, {len(instance.models)} models, "
        f"{len(instance.workloads)} workloads)"
    )


@main.command()
def schema() -> None:
    """Print the JSON Schema of instance files."""
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


if __name__ == "__main__":  # pragma: no cover
    main()
