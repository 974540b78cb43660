"""Solve many scenarios at once: one process per scenario, HiGHS on one thread in each.

Workers receive the validated instance, never a Pyomo model (../shared/SOLVER-NOTES.md,
"Sweeps"): building the program is cheap beside solving it, and a model does not pickle well.
The workers are fleetopt/workers.py's. Results come back in scenario order whatever order they
finish in; a single HiGHS thread with a fixed seed makes
each answer independent of how many run beside it.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from concurrent.futures import as_completed
from dataclasses import dataclass, field

from fleetopt.errors import InfeasibleError, NoPlanInTime, VerificationError
from fleetopt.instance import Instance
from fleetopt.solve import SolveOptions
from fleetopt.sweep.grid import Scenario
from fleetopt.workers import default_jobs, worker_pool


@dataclass(frozen=True)
class Outcome:
    """What one scenario's solve gave: the summary a table row needs, not the whole plan."""

    status: str
    """optimal | feasible (time limit, with an incumbent) | infeasible | no_solution (time
    limit, no fleet found yet) | error (the plan failed verification: a bug)."""
    cost_per_hour: float | None = None
    gpus: dict[str, int] = field(default_factory=dict)
    prefill_tokens_per_s: float | None = None
    decode_tokens_per_s: float | None = None
    cost_per_million_output_tokens: float | None = None
    demand_scale: float | None = None
    """Share of the stated demand served (below 1 only when maximising throughput)."""
    mip_gap: float | None = None
    seconds: float = 0.0
    """Wall time of the scenario: build, solve and verify."""
    reason: str | None = None
    """Why there is no fleet, for infeasible, no_solution and error rows."""

    @property
    def solved(self) -> bool:
        return self.status in ("optimal", "feasible")


@dataclass(frozen=True)
class Result:
    scenario: Scenario
    outcome: Outcome


Progress = Callable[[int, int, Result], None]
"""Called as each scenario finishes: (finished so far, total, its result)."""


def solve_scenario(instance: Instance, options: SolveOptions) -> Outcome:
    """Plan one scenario. No fleet is an answer (a row of the table), not an error. A plan that
    fails verification is a bug: it becomes an `error` row, so one bad scenario does not throw
    away the rest of the grid, and the command exits 4 after printing them. Ctrl-C stops the
    whole run (`plan_variant`)."""
    from fleetopt.pipeline import plan_variant

    start = time.perf_counter()
    try:
        plan = plan_variant(instance, options)
    except InfeasibleError as exc:
        return Outcome("infeasible", seconds=time.perf_counter() - start, reason=str(exc))
    except VerificationError as exc:
        return Outcome("error", seconds=time.perf_counter() - start, reason=str(exc))
    except NoPlanInTime as exc:
        return Outcome("no_solution", seconds=time.perf_counter() - start, reason=str(exc))
    return Outcome(
        status=plan.status,
        cost_per_hour=plan.cost_per_hour,
        gpus={gpu: n for gpu, n in plan.gpus.items() if n},
        prefill_tokens_per_s=plan.prefill_tokens_per_s,
        decode_tokens_per_s=plan.decode_tokens_per_s,
        cost_per_million_output_tokens=plan.cost_per_million_output_tokens,
        demand_scale=plan.demand_scale,
        mip_gap=plan.mip_gap,
        seconds=time.perf_counter() - start,
    )


def run_scenarios(
    scenarios: list[Scenario],
    options: SolveOptions,
    jobs: int | None = None,
    progress: Progress | None = None,
) -> list[Result]:
    """Solve every scenario, `jobs` at a time (default: one per core; 1 solves in this process),
    and return the results in scenario order."""
    options = dataclasses.replace(options, threads=1, jobs=1)
    jobs = min(jobs or default_jobs(), len(scenarios))
    results: dict[int, Result] = {}

    def finish(scenario: Scenario, outcome: Outcome) -> None:
        result = Result(scenario, outcome)
        results[scenario.index] = result
        if progress is not None:
            progress(len(results), len(scenarios), result)

    if jobs <= 1:
        for scenario in scenarios:
            finish(scenario, solve_scenario(scenario.instance, options))
    else:
        with worker_pool(jobs, ctrl_c_to_parent=False) as pool:
            pending = {pool.submit(solve_scenario, s.instance, options): s for s in scenarios}
            for future in as_completed(pending):
                finish(pending[future], future.result())
    return [results[s.index] for s in scenarios]
