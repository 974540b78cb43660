"""Discrete-event simulation of a plan: measured latency percentiles instead of trusted ones.

`simulate_plan` is the entry point the CLI uses: it builds the request stream (synthetic or a
trace), runs the fleet (`simulator`) and summarises it (`metrics`). docs/latency.md, section
"Simulation", states the model.
"""

from __future__ import annotations

from fleetopt.catalog import Resolved
from fleetopt.errors import InputError
from fleetopt.instance import Instance
from fleetopt.plan import Plan
from fleetopt.simulate.arrivals import Requests, synthetic_requests
from fleetopt.simulate.metrics import summarize
from fleetopt.simulate.simulator import simulate
from fleetopt.simulate.trace import load_trace

DEFAULT_REQUESTS = 20_000


def request_stream(
    plan: Plan,
    resolved: Resolved,
    trace: str | None = None,
    assign: str | None = None,
    cv: float = 1.0,
    count: int | None = None,
    seed: int = 0,
) -> Requests:
    """The trace's first `count` requests, or `count` synthetic ones at the plan's rates."""
    from fleetopt.workload import replay  # length buckets of a workload given as data

    names = [w.name for w in plan.workloads]
    if trace is not None:
        routed = replay.sources(plan)
        requests = load_trace(trace, routed or names, assign)
        requests = replay.into_buckets(requests, plan) if routed else requests
        return requests.head(count) if count else requests
    workloads = {w.name: w for w in resolved.instance.workloads}
    workloads |= {w.name: w for w in replay.bucket_workloads(plan, resolved.instance)}
    missing = [n for n in names if n not in workloads]
    if missing:
        raise InputError(f"plan workload(s) {', '.join(missing)} not in the instance")
    return synthetic_requests(
        [workloads[n] for n in names],
        [w.requests_per_s for w in plan.workloads],
        count or DEFAULT_REQUESTS,
        seed,
        cv,
    )


def simulate_plan(plan: Plan, resolved: Resolved, requests: Requests, seed: int = 0) -> dict:
    """Simulate the plan's fleet (the peak period's, for a plan with periods) on the requests
    and return the report (JSON names of DESIGN §4 where they overlap)."""
    return summarize(plan, simulate(plan, resolved, requests, seed))


def poisson_report(plan: Plan, resolved: Resolved, count: int | None = None, seed: int = 0) -> dict:
    """The report of a Poisson run at the plan's rates: what `solve --simulate`, the tests and
    the benchmarks measure a plan by."""
    return simulate_plan(
        plan, resolved, request_stream(plan, resolved, count=count, seed=seed), seed
    )


def after_solve(plan: Plan, instance: Instance) -> str:
    """What `fleetopt solve --simulate` prints: measured p99 beside prediction and target, or
    why there is none (a pool sized by measured capacity has no step time to run): the solve
    succeeded, so this is a note, not an error."""
    from fleetopt.catalog import resolve
    from fleetopt.simulate.render import versus_targets

    measured = [i for i, pool in enumerate(plan.pools) if pool.measured or pool.step_ms is None]
    if measured:  # the plan stands; only its measurement is out of reach
        pools = ", ".join(str(i) for i in measured)
        return (
            f"not simulated: pool(s) {pools} take their capacity from measurements (profiles), "
            "which give no step time to simulate; the plan above is solved and verified"
        )
    resolved = resolve(instance)
    report = poisson_report(plan, resolved)
    return f"simulated: {report['arrivals']}; {report['warmup']}\n\n{versus_targets(report)}"
