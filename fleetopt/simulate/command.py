"""`fleetopt simulate PLAN.json --instance FILE`: measure a plan's latency by simulation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import click

from fleetopt.command_support import FiniteRange, load_checked_instance, one_line_errors
from fleetopt.errors import InputError

if TYPE_CHECKING:
    from fleetopt.plan import Plan


@click.command("simulate")
@click.argument("plan_file", type=click.Path(dir_okay=False))
@click.option(
    "--instance",
    "instance_file",
    required=True,
    type=click.Path(dir_okay=False),
    help="The instance the plan was solved for (models, GPUs, token lengths, SLOs).",
)
@click.option("--trace", type=click.Path(dir_okay=False), help="Replay a request trace CSV.")
@click.option(
    "--arrivals",
    type=click.Choice(["poisson", "gamma"]),
    default="poisson",
    show_default=True,
    help="Synthetic arrivals at the plan's rates (without --trace).",
)
@click.option(
    "--cv",
    type=FiniteRange(min=0, min_open=True),
    help="Coefficient of variation of gamma inter-arrival times (>1: bursty).",
)
@click.option(
    "--requests",
    "count",
    type=click.IntRange(min=1),
    help="Requests to simulate [default: 20,000 synthetic, or the whole trace].",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Random seed.")
@click.option(
    "--class",
    "assign",
    help="Workload of every trace row (a trace without a class column, several workloads).",
)
@click.option(
    "--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True
)
@one_line_errors
def simulate_command(
    plan_file, instance_file, trace, arrivals, cv, count, seed, assign, fmt
) -> None:
    """Simulate a plan: continuous batching on every replica, latency percentiles per class,
    SLO attainment, utilisation and queues per pool."""
    from fleetopt.catalog import resolve
    from fleetopt.simulate import request_stream, simulate_plan
    from fleetopt.simulate.render import to_table

    if trace is not None and (cv is not None or arrivals != "poisson"):
        raise InputError("--trace replays its own arrivals; drop --arrivals/--cv")
    if arrivals == "gamma" and cv is None:
        raise InputError("--arrivals gamma needs --cv (the inter-arrival coefficient of variation)")
    if arrivals == "poisson" and cv not in (None, 1.0):
        raise InputError("--cv applies to --arrivals gamma (Poisson has cv 1)")
    if assign is not None and trace is None:
        raise InputError("--class applies to --trace")
    plan = _plan(plan_file)
    resolved = resolve(load_checked_instance(instance_file))
    requests = request_stream(plan, resolved, trace, assign, cv or 1.0, count, seed)
    report = simulate_plan(plan, resolved, requests, seed)
    click.echo(json.dumps(report, indent=2) if fmt == "json" else to_table(report))


def _plan(path: str) -> Plan:
    """A plan JSON as `fleetopt solve --format json` writes it; errors name the file."""
    from fleetopt.plan import Plan

    try:
        data = json.loads(Path(path).read_text(encoding="utf-8-sig"))
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror})") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    try:
        if not isinstance(data, dict):
            raise TypeError(f"a JSON object expected, not {type(data).__name__}")
        plan = Plan.from_dict(data)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise InputError(
            f"{path}: not a fleetopt plan ({exc}); write one with `fleetopt solve --format json`"
        ) from None
    problem = _unservable(plan)
    if problem:
        raise InputError(f"{path}: {problem}; simulate a plan as `fleetopt solve` wrote it")
    return plan


def _unservable(plan: Plan) -> str | None:
    """What makes a (hand-edited) plan one that no request could be served by: no pools, a
    pool without replicas, a route to a pool that is not there."""
    if not plan.pools:
        return "pools: empty, no fleet to simulate"
    for i, pool in enumerate(plan.pools):
        if not isinstance(pool.replicas, int) or pool.replicas < 1:
            return f"pools[{i}].replicas: {pool.replicas!r}, not a whole number of at least 1"
    for workload in plan.workloads:
        for route in workload.routes:
            if not isinstance(route.pool, int) or not 0 <= route.pool < len(plan.pools):
                return f"workloads[{workload.name}].routes: pool {route.pool!r} is not in pools"
    return None
