"""Every call to HiGHS lives here: options, status, gap, time limit (../shared/SOLVER-NOTES.md)."""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

import highspy
import numpy as np
import pyomo.environ as pyo
from pyomo.common.collections import ComponentMap
from pyomo.contrib.solver.common.factory import SolverFactory
from pyomo.contrib.solver.common.results import SolutionStatus, TerminationCondition
from pyomo.core.base.constraint import ConstraintData
from pyomo.core.base.var import VarData

from fleetopt.errors import Interrupted


def default_jobs() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


@dataclass(frozen=True)
class SolveOptions:
    time_limit: float | None = None
    mip_gap: float = 1e-4
    threads: int = 1
    """HiGHS threads; 1 keeps the answer reproducible (parallel runs may pick another of
    several equal-cost plans)."""
    verbose: bool = False
    seed: int = 0
    jobs: int = 1
    """Independent blocks of the program solved at once, one process each
    (pipeline.solve_program); the answer is the same for any number."""


@dataclass(frozen=True)
class Outcome:
    status: str  # optimal | feasible | infeasible | no_solution
    objective: float | None
    bound: float | None
    gap: float | None
    seconds: float
    interrupted: bool = False
    """Ctrl-C stopped the solve: the incumbent is returned as `feasible` with its gap."""
    highs_seconds: float | None = None
    """HiGHS's own run time; `seconds` less this is Pyomo handing the model over."""


MIP_SEARCH = {
    "mip_heuristic_run_rins": False,
    "mip_heuristic_run_rens": False,
    "mip_allow_restart": False,
}
"""HiGHS's branch and bound as these programs need it. The presolve hands HiGHS a plan within
a few percent of the optimum (fleetopt/presolve.py), and what is left is proving the bound: the
RINS and RENS sub-MIPs, which look for plans, took 60-80% of HiGHS's time on the shipped and
benchmark programs, and the root restarts (after fixing inactive columns) repeat the cut loop
without raising the bound. Without them the same plans are proved 1.5-3x sooner
(docs/benchmarks.md)."""


def run_highs(
    model: pyo.ConcreteModel, options: SolveOptions, start: Mapping[VarData, float] | None = None
) -> Outcome:
    """Solve with HiGHS and load the incumbent, if any, into the model's variables.

    `start` gives values of some integer variables of a known plan: HiGHS completes it (a MIP
    over the rest) and starts from it, so its answer is never dearer than that plan; without
    it, a solve stopped at the gap may return a plan dearer than one already in hand."""
    solver = SolverFactory("highs")
    if start:
        _set_start(solver, model, start)
    kwargs = {
        "tee": options.verbose,
        "rel_gap": options.mip_gap,
        "load_solutions": False,
        "raise_exception_on_nonoptimal_result": False,
        "solver_options": {
            "random_seed": options.seed,
            "output_flag": options.verbose,
            **MIP_SEARCH,
        },
    }
    if options.time_limit is not None:
        kwargs["time_limit"] = options.time_limit
    kwargs["threads"] = options.threads
    # HiGHS keeps one thread scheduler per process; a solve asking for another thread count
    # than the last one fails unless the scheduler is reset first.
    highspy.Highs.resetGlobalScheduler(True)
    start = time.perf_counter()
    with _cancel_on_interrupt(solver) as interrupted:
        result = solver.solve(model, **kwargs)
    seconds = time.perf_counter() - start
    term = result.termination_condition
    if term in (TerminationCondition.provenInfeasible, TerminationCondition.infeasibleOrUnbounded):
        return Outcome("infeasible", None, None, None, seconds)
    if result.solution_status not in (SolutionStatus.optimal, SolutionStatus.feasible):
        if interrupted:
            raise Interrupted("interrupted before the solver found any plan")
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
        bool(interrupted),
        result.timing_info.highs_time,
    )


def _set_start(solver, model: pyo.ConcreteModel, start: Mapping[VarData, float]) -> None:
    solver.set_instance(model)  # the solve that follows finds it loaded and only updates it
    columns = solver._pyomo_var_to_solver_var_map
    index = np.array([columns[id(var)] for var in start], dtype=np.int32)
    values = np.array([start[var] for var in start], dtype=float)
    solver._solver_model.setSolution(len(index), index, values)


@dataclass(frozen=True)
class Relaxation:
    objective: float
    reduced_costs: ComponentMap
    """Reduced cost of every variable at the LP optimum (its values are loaded in the model)."""


def solve_relaxation(model: pyo.ConcreteModel, options: SolveOptions) -> Relaxation | None:
    """Solve a model without integer variables; None if it is infeasible or HiGHS gives up.
    Ctrl-C stops it with Interrupted: an LP has no incumbent to keep."""
    solver = SolverFactory("highs")
    kwargs = {
        "load_solutions": False,
        "raise_exception_on_nonoptimal_result": False,
        "threads": options.threads,
        # The default dual simplex: its reduced costs prove 2-5x more configs out than the
        # primal simplex's or the interior point's, which solve these LPs faster
        # (docs/benchmarks.md).
        "solver_options": {"random_seed": options.seed, "output_flag": False},
    }
    if options.time_limit is not None:
        kwargs["time_limit"] = options.time_limit
    highspy.Highs.resetGlobalScheduler(True)
    with _cancel_on_interrupt(solver) as interrupted:
        result = solver.solve(model, **kwargs)
    if interrupted:
        raise Interrupted("interrupted before the solver found any plan")
    if result.termination_condition != TerminationCondition.convergenceCriteriaSatisfied:
        return None
    result.solution_loader.load_vars()
    return Relaxation(result.incumbent_objective, result.solution_loader.get_reduced_costs())


class _QuietInterrupt(logging.Filter):
    """Pyomo 6.10 maps no HiGHS status for an interrupted solve and warns of it; run_highs
    handles it (the solution status still says whether there is an incumbent)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "kInterrupt" not in record.getMessage()


logging.getLogger("pyomo.contrib.solver.solvers.highs").addFilter(_QuietInterrupt())


@contextmanager
def _cancel_on_interrupt(solver) -> Iterator[list[int]]:
    """Ctrl-C during the solve asks HiGHS to stop at its next callback, keeping its incumbent,
    instead of raising KeyboardInterrupt through the C++ solve (which loses it). Yields the
    signals received. Signal handlers can only be set from the main thread; elsewhere (sweep
    workers) Ctrl-C keeps its default."""
    received: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return

    def cancel(signum, _frame) -> None:
        received.append(signum)
        highs = getattr(solver, "_solver_model", None)
        if highs is None:  # HiGHS has not started: nothing to keep
            raise KeyboardInterrupt
        highs.cancelSolve()

    previous = signal.signal(signal.SIGINT, cancel)
    try:
        yield received
    finally:
        signal.signal(signal.SIGINT, previous)


def _native_gap(solver) -> float | None:
    highs = getattr(solver, "_solver_model", None)
    if highs is None:
        return None
    gap = highs.getInfo().mip_gap
    return gap if gap < 1e30 else None


@dataclass(frozen=True)
class Conflict:
    """Rows of an infeasible model that cannot all hold. `irreducible` is False when HiGHS could
    not reduce the set (an infeasibility of the integers alone, where the LP relaxation is
    feasible): the rows are then the whole model, not a minimal conflict."""

    rows: list[ConstraintData]
    irreducible: bool


def irreducible_conflict(model: pyo.ConcreteModel) -> Conflict:
    """An irreducible infeasible subset (IIS) of the model's rows, from HiGHS.

    The default IIS strategy returned an empty set on real conflicts (../shared/SOLVER-NOTES.md),
    so this asks for the irreducible one."""
    solver, highs = _loaded(model)
    highs.setOptionValue("iis_strategy", int(highspy.IisStrategy.kIisStrategyIrreducible))
    _, iis = highs.getIis()
    rows = solver._solver_con_to_pyomo_con_map
    return Conflict([rows[i] for i in iis.row_index_], bool(iis.valid_))


def relax_rows(
    model: pyo.ConcreteModel, penalties: dict[ConstraintData, float], options: SolveOptions
) -> dict[ConstraintData, float] | None:
    """HiGHS's feasibility relaxation: the least penalty-weighted excess over their upper bounds
    of the given `≤` rows that makes the model feasible, every other row and bound held.
    Returns each row's excess, or None when relaxing these rows cannot restore feasibility."""
    solver, highs = _loaded(model)
    index = solver._pyomo_con_to_solver_con_map
    penalty = np.full(highs.getNumRow(), -1.0)  # negative: the row may not be relaxed
    for con, weight in penalties.items():
        penalty[index[con]] = weight
    highs.setOptionValue("random_seed", options.seed)
    highs.setOptionValue("threads", options.threads)
    if options.time_limit is not None:
        highs.setOptionValue("time_limit", options.time_limit)
    highs.feasibilityRelaxation(-1.0, -1.0, -1.0, None, None, penalty)
    if not highs.getSolution().value_valid:
        return None
    values, upper = highs.getSolution().row_value, highs.getLp().row_upper_
    return {con: max(0.0, values[index[con]] - upper[index[con]]) for con in penalties}


def _loaded(model: pyo.ConcreteModel):
    """A HiGHS object holding the model, quiet, and the Pyomo solver that maps its rows."""
    solver = SolverFactory("highs")
    solver.set_instance(model)
    highs = solver._solver_model
    highs.setOptionValue("output_flag", False)
    return solver, highs
