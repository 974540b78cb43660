"""Every call to HiGHS lives here: options, status, gap, time limit (../shared/SOLVER-NOTES.md)."""

from __future__ import annotations

import time
from dataclasses import dataclass

import pyomo.environ as pyo
from pyomo.contrib.solver.common.factory import SolverFactory
from pyomo.contrib.solver.common.results import SolutionStatus, TerminationCondition


@dataclass(frozen=True)
class SolveOptions:
    time_limit: float | None = None
    mip_gap: float = 1e-4
    threads: int = 1
    """HiGHS threads; 1 keeps the answer reproducible (parallel runs may pick another of
    several equal-cost plans)."""
    verbose: bool = False
    seed: int = 0


@dataclass(frozen=True)
class Outcome:
    status: str  # optimal | feasible | infeasible | no_solution
    objective: float | None
    bound: float | None
    gap: float | None
    seconds: float


def run_highs(model: pyo.ConcreteModel, options: SolveOptions) -> Outcome:
    """Solve with HiGHS and load the incumbent, if any, into the model's variables."""
    solver = SolverFactory("highs")
    kwargs = {
        "tee": options.verbose,
        "rel_gap": options.mip_gap,
        "load_solutions": False,
        "raise_exception_on_nonoptimal_result": False,
        "solver_options": {"random_seed": options.seed, "output_flag": options.verbose},
    }
    if options.time_limit is not None:
        kwargs["time_limit"] = options.time_limit
    kwargs["threads"] = options.threads
    start = time.perf_counter()
    result = solver.solve(model, **kwargs)
    seconds = time.perf_counter() - start
    term = result.termination_condition
    if term in (TerminationCondition.provenInfeasible, TerminationCondition.infeasibleOrUnbounded):
        return Outcome("infeasible", None, None, None, seconds)
    if result.solution_status not in (SolutionStatus.optimal, SolutionStatus.feasible):
        return Outcome("no_solution", None, result.objective_bound, None, seconds)
    result.solution_loader.load_vars()
    gap = _native_gap(solver)
    proven = term == TerminationCondition.convergenceCriteriaSatisfied
    return Outcome(
        "optimal" if proven else "feasible",
        result.incumbent_objective,
        result.objective_bound,
        gap,
        seconds,
    )


def _native_gap(solver) -> float | None:
    highs = getattr(solver, "_solver_model", None)
    if highs is None:
        return None
    gap = highs.getInfo().mip_gap
    return gap if gap < 1e30 else None
