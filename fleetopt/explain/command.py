"""`fleetopt explain FILE`: demand in tokens/s, GPU-seconds per class, the requests/s rule's error."""

from __future__ import annotations

import json

import click

from fleetopt.command_support import (
    jobs_option,
    load_checked_instance,
    one_line_errors,
    solver_options,
)


@click.command()
@click.argument("instance_file", type=click.Path(dir_okay=False))
@click.option(
    "--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True
)
@solver_options("for the plan")
@jobs_option()
@one_line_errors
def explain(
    instance_file: str, fmt: str, time_limit: float | None, mip_gap: float, jobs: int | None
) -> None:
    """Show what requests/s hides: tokens/s per class, GPU-seconds per GPU type, and the fleet a
    requests/s rule buys beside the plan."""
    from fleetopt.explain.sizing import explain as explain_instance
    from fleetopt.report.explain import to_table
    from fleetopt.solve import SolveOptions
    from fleetopt.workers import default_jobs

    options = SolveOptions(time_limit, mip_gap, jobs=jobs or default_jobs())
    result = explain_instance(load_checked_instance(instance_file), options)
    click.echo(json.dumps(result.to_dict(), indent=2) if fmt == "json" else to_table(result))
