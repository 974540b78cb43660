"""Every call to HiGHS lives here: options, status, gap, time limit (../shared/SOLVER-NOTES.md)."""

from __future__ import annotations

import dataclasses
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import highspy
import numpy as np
import pyomo.core as pyo
from pyomo.common.collections import ComponentMap
from pyomo.core.base.constraint import ConstraintData
from pyomo.core.base.var import VarData

from fleetopt.errors import Interrupted
from fleetopt.handoff import INF, hand_off, matrix_highs


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


def time_spent(options: SolveOptions, began: float) -> bool:
    """The time limit is used up, counted from `began` (`time.perf_counter`)."""
    return options.time_limit is not None and time.perf_counter() - began >= options.time_limit


def seconds_left(options: SolveOptions, began: float) -> float | None:
    """What is left of the time limit since `began` (negative once spent; None: no limit)."""
    if options.time_limit is None:
        return None
    return options.time_limit - (time.perf_counter() - began)


def time_left(options: SolveOptions, began: float) -> SolveOptions:
    """The options with what is left of the time limit since `began`, at least a second."""
    left = seconds_left(options, began)
    if left is None:
        return options
    return dataclasses.replace(options, time_limit=max(left, 1.0))


def time_share(options: SolveOptions, share: float) -> SolveOptions:
    """The options with this share of their time limit."""
    if options.time_limit is None:
        return options
    return dataclasses.replace(options, time_limit=share * options.time_limit)


USED = 1e-7
"""Replicas above which an LP solution uses a config (the presolve's restricted program, the
scaled LP's consolidating configs)."""

BUILD_SECONDS_PER_COLUMN = 6e-5
"""Building a model in Pyomo and handing it to HiGHS, per column `model_columns` counts:
35-85 µs for LP relaxations, 10-40 µs for programs (whose count overstates their pooling
columns), from typical blocks to 600,000 columns (docs/benchmarks.md)."""


PRESOLVE_SECONDS_PER_COLUMN = 8e-5
"""HiGHS's own presolve of a MIP, per column `model_columns` counts, which HiGHS's time limit
does not interrupt: 40 µs on a typical instance's last program (964 columns), 76 µs on the
whole throughput program of the medium benchmark instance (571,885 columns, 43.6 s;
docs/benchmarks.md)."""


def builds_in_time(
    columns: int, options: SolveOptions, began: float, presolved: bool = False
) -> bool:
    """A model of this many columns (`formulation.model_columns`) is built and handed over —
    and, where `presolved`, presolved by HiGHS — within what is left of the time limit since
    `began`, or the second a solve always gets: one block of every config and period
    (throughput mode on the large benchmark instance) took minutes to build, then ran out of
    memory, under a limit of 20 s; on the medium one, under a limit of 60 s, it was built and
    handed over, and HiGHS's presolve took 38 s of a 41-s share before it could stop."""
    left = time_left(options, began).time_limit
    per_column = BUILD_SECONDS_PER_COLUMN + (PRESOLVE_SECONDS_PER_COLUMN if presolved else 0.0)
    return left is None or columns * per_column <= left


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
    """HiGHS's own run time; `seconds` less this is the model handed over and back."""


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


@dataclass
class Watched:
    """How far the solve under way in this process has come, for a display that reads it from
    another thread (`fleetopt solve` at a terminal): the program's independent blocks done of
    how many, and the gap of the block's branch and bound now (None before it has a plan and a
    bound, and between programs). Ctrl-C keeps the plan that gap is of."""

    blocks: tuple[int, int] | None = None
    gap: float | None = None


WATCHED = Watched()


HIGHS_SECONDS = 1.0
"""The least of a time limit HiGHS keeps after the model is handed over (`run_highs`): the
restricted programs of the scale benchmark's throughput solves complete their starts in it."""

FEASIBLE = 2
"""HiGHS's `primal_solution_status` of a feasible point (0: none, 1: infeasible)."""


def run_highs(
    model: pyo.ConcreteModel,
    options: SolveOptions,
    start: Mapping[VarData, float] | None = None,
    watched: bool = False,
    bound: float | None = None,
) -> Outcome:
    """Solve with HiGHS and load the incumbent, if any, into the model's variables; `watched`:
    its gap in `WATCHED` as it runs (the block's program, not the presolve's steps), against
    HiGHS's bound or `bound` (known before), whichever proves more, as the outcome's is.

    `start` gives values of some integer variables of a known plan: HiGHS completes it (a MIP
    over the rest) and starts from it, so its answer is never dearer than that plan; without
    it, a solve stopped at the gap may return a plan dearer than one already in hand.

    The time limit covers the hand-off too, HiGHS keeping at least HIGHS_SECONDS of it: a
    throughput program of every config and period of the medium benchmark instance took 6.4 s
    to hand over, and HiGHS then ran its whole 48-s share."""
    began = time.perf_counter()
    loaded = hand_off(model)
    highs = loaded.highs
    if options.time_limit is not None:
        handed = time.perf_counter() - began
        floor = min(options.time_limit, HIGHS_SECONDS)
        options = dataclasses.replace(options, time_limit=max(options.time_limit - handed, floor))
    _configure(highs, options, {"mip_rel_gap": options.mip_gap, **MIP_SEARCH})
    if start:
        values = np.array(list(start.values()), dtype=float)
        highs.setSolution(len(values), loaded.column_index(start), values)
    if watched:  # HiGHS calls it every ~25 ms of branch and bound
        maximize = highs.getObjectiveSense()[1] == highspy.ObjSense.kMaximize
        highs.cbMipInterrupt += _watcher(bound, maximize)
    try:
        ran, interrupted = _run(highs)
    finally:
        WATCHED.gap = None
    status, info = highs.getModelStatus(), highs.getInfo()
    proven = status == highspy.HighsModelStatus.kOptimal
    if info.mip_node_count >= 0:  # a MIP (-1: no integer variables, an LP)
        bound, gap = _finite(info.mip_dual_bound), _finite(info.mip_gap)
    else:
        bound, gap = (info.objective_function_value, 0.0) if proven else (None, None)
    if status in (
        highspy.HighsModelStatus.kInfeasible,
        highspy.HighsModelStatus.kUnboundedOrInfeasible,
    ):
        return Outcome(
            "infeasible", None, None, None, time.perf_counter() - began, highs_seconds=ran
        )
    if info.primal_solution_status != FEASIBLE:
        if interrupted:
            raise Interrupted("interrupted before the solver found any plan")
        return Outcome(
            "no_solution", None, bound, None, time.perf_counter() - began, highs_seconds=ran
        )
    loaded.load_values()
    return Outcome(
        "optimal" if proven else "feasible",
        info.objective_function_value,
        bound,
        gap,
        time.perf_counter() - began,
        bool(interrupted),
        ran,
    )


PRIMAL_SIMPLEX = 4
"""HiGHS's `simplex_strategy` for the primal simplex."""
DUAL_SIMPLEX = 1
"""HiGHS's `simplex_strategy` for the dual simplex (its default for LPs)."""


@dataclass(frozen=True)
class Relaxation:
    objective: float
    reduced_costs: ComponentMap
    """Reduced cost of every variable at the LP optimum (its values are loaded in the model)."""


class HeldRelaxation:
    """A model without integer variables, held in HiGHS so that it can be changed in place and
    solved again: the presolve's rounds (fleetopt/presolve.py) change bounds, coefficients and
    add rows, where building and handing off the model again each round made the presolve
    14–22% slower on the scale benchmark's instances (docs/benchmarks.md)."""

    def __init__(
        self, model: pyo.ConcreteModel, options: SolveOptions, began: float | None = None
    ) -> None:
        """Each solve gets what is left of the time limit since `began` (`time.perf_counter`;
        by default now), at least a second: the model's building counts, and so do the rounds
        before. Each solve had the whole limit: the presolve's first LP on the medium benchmark
        instance at a budget's scale, built in 7.4 s of a 16.9-s limit, then ran 19 s."""
        self.loaded = hand_off(model)
        self.options = dataclasses.replace(options, verbose=False)
        self.began = time.perf_counter() if began is None else began
        self._column = {id(var): j for j, var in enumerate(self.loaded.columns)}
        self._row = {id(row): i for i, row in enumerate(self.loaded.rows)}

    def solve(self, primal: bool = False) -> Relaxation | None:
        """Solve from scratch; None if the LP is infeasible or HiGHS gives up. Ctrl-C stops it
        with Interrupted: an LP has no incumbent to keep.

        The dual simplex by default: its reduced costs prove 2-5x more configs out than the
        primal simplex's or the interior point's, or than a warm start from the last solution
        (docs/benchmarks.md). `primal` asks for the primal simplex, up to 10x faster on the
        presolve's first LP of thousands of configs, whose later LPs then prune as far."""
        highs = self.loaded.highs
        highs.clearSolver()
        options = time_left(self.options, self.began)
        if not _optimal_lp(highs, options, PRIMAL_SIMPLEX if primal else DUAL_SIMPLEX):
            return None
        self.loaded.load_values()
        columns, duals = self.loaded.columns, highs.getSolution().col_dual
        reduced = ComponentMap(zip(columns, duals, strict=True))
        return Relaxation(highs.getInfo().objective_function_value, reduced)

    def set_upper_bound(self, var: VarData, upper: float) -> None:
        self.loaded.highs.changeColBounds(self._column[id(var)], 0.0, upper)

    def set_coefficient(self, row: ConstraintData, var: VarData, value: float) -> None:
        self.loaded.highs.changeCoeff(self._row[id(row)], self._column[id(var)], value)

    def add_row(self, coefs: list[float], variables: list[VarData], upper: float) -> None:
        """Σ coefs·variables ≤ upper."""
        index = np.array([self._column[id(var)] for var in variables], dtype=np.int32)
        self.loaded.highs.addRow(-INF, upper, len(index), index, np.array(coefs, dtype=float))


class MatrixLp:
    """min cost·v over v ≥ 0 with row_lower ≤ A·v ≤ row_upper, A given by its (row, column,
    value) entries, handed to HiGHS as arrays (fleetopt/generated_lp.py builds one per round)."""

    def __init__(
        self,
        cost: np.ndarray,
        row_lower: np.ndarray,
        row_upper: np.ndarray,
        entries: tuple[np.ndarray, np.ndarray, np.ndarray],
    ) -> None:
        rows, columns, values = entries
        order = np.lexsort((columns, rows))
        starts = np.searchsorted(rows[order], np.arange(len(row_lower))).astype(np.int32)
        matrix = (starts, columns[order].astype(np.int32), values[order].astype(float))
        bounds = (
            np.where(np.isfinite(row_lower), row_lower, -INF),
            np.where(np.isfinite(row_upper), row_upper, INF),
        )
        columns_bounds = (np.zeros(len(cost)), np.full(len(cost), INF))
        self.highs = matrix_highs(cost, columns_bounds, bounds, matrix)

    def solve(self, options: SolveOptions) -> tuple[float, np.ndarray, np.ndarray] | None:
        """The optimum, v and the rows' duals, by the primal simplex (as the presolve's first
        LP), or None where HiGHS does not prove one in time. Ctrl-C stops it with Interrupted."""
        highs = self.highs
        if not _optimal_lp(highs, dataclasses.replace(options, verbose=False), PRIMAL_SIMPLEX):
            return None
        solution = highs.getSolution()
        return (
            highs.getInfo().objective_function_value,
            np.array(solution.col_value),
            np.array(solution.row_dual),
        )


def _optimal_lp(highs: highspy.Highs, options: SolveOptions, strategy: int) -> bool:
    """Solve the LP HiGHS holds by this simplex: whether it proved an optimum (not where it is
    infeasible or out of time). Ctrl-C stops it with Interrupted: an LP has no incumbent to
    keep."""
    _configure(highs, options, {"simplex_strategy": strategy})
    _, interrupted = _run(highs)
    if interrupted:
        raise Interrupted("interrupted before the solver found any plan")
    return highs.getModelStatus() == highspy.HighsModelStatus.kOptimal


def _configure(highs: highspy.Highs, options: SolveOptions, extra: dict) -> None:
    settings = {
        "output_flag": options.verbose,
        "random_seed": options.seed,
        "threads": options.threads,
        **extra,
    }
    if options.time_limit is not None:
        # HiGHS counts its limit on a clock that runs on over every solve of the same object
        # (a held LP solved again): the limit is what it has run so far plus ours.
        settings["time_limit"] = highs.getRunTime() + float(options.time_limit)
    for name, value in settings.items():
        highs.setOptionValue(name, value)


def _run(highs: highspy.Highs) -> tuple[float, list[int]]:
    """HiGHS's run, with Ctrl-C asking it to stop: its seconds and the signals received. Every
    solve goes through here."""
    # HiGHS keeps one thread scheduler per process; a solve asking for another thread count
    # than the last one fails unless the scheduler is reset first (blocks solved in worker
    # processes leave this one with none).
    highspy.Highs.resetGlobalScheduler(True)
    began = time.perf_counter()
    with _cancel_on_interrupt(highs) as interrupted:
        highs.run()
    return time.perf_counter() - began, interrupted


def _watcher(bound: float | None, maximize: bool) -> Callable[[Any], None]:
    better = min if maximize else max

    def watch(event) -> None:
        found, proved = (
            _finite(event.data_out.mip_primal_bound),
            _finite(event.data_out.mip_dual_bound),
        )
        if bound is not None:
            proved = bound if proved is None else better(proved, bound)
        WATCHED.gap = None if found is None or proved is None else relative_gap(found, proved)

    return watch


def relative_gap(found: float, bound: float) -> float:
    """How far a plan's objective may be from the optimum, as a share of it."""
    return abs(found - bound) / max(abs(found), 1e-12)


def _finite(value: float) -> float | None:
    """None for HiGHS's infinity (no bound or gap known)."""
    return value if abs(value) < INF else None


@contextmanager
def _cancel_on_interrupt(highs: highspy.Highs) -> Iterator[list[int]]:
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
        highs.cancelSolve()

    # HiGHS's interrupt callbacks call into Python, where the handler runs, and stop the solve
    # once cancelSolve has been asked for.
    highs.HandleUserInterrupt = True
    previous = signal.signal(signal.SIGINT, cancel)
    try:
        yield received
    finally:
        signal.signal(signal.SIGINT, previous)


class HeldFeasibility:
    """A model's rows held in HiGHS without its objective, to ask again and again whether they
    can all hold with some of them set free: conflict.py's deletion filter asks once per limit
    and once per class. HiGHS's own IIS (`getIis`) filters row by row, ignores the time limit and
    holds the GIL: minutes on a program of 20,000 rows (docs/benchmarks.md)."""

    def __init__(self, model: pyo.ConcreteModel) -> None:
        self.loaded = hand_off(model)
        highs = self.loaded.highs
        columns = np.arange(highs.getNumCol(), dtype=np.int32)
        highs.changeColsCost(len(columns), columns, np.zeros(len(columns)))
        lp = highs.getLp()
        self._lower, self._upper = np.array(lp.row_lower_), np.array(lp.row_upper_)
        self._integrality = np.array(lp.integrality_)  # empty where no column is integer
        self._columns = columns[: len(self._integrality)]
        self._row = {id(row): i for i, row in enumerate(self.loaded.rows)}

    def hold(self, rows: tuple[ConstraintData, ...], held: bool) -> None:
        """These rows held to their bounds again, or set free."""
        for row in rows:
            i = self._row[id(row)]
            lower, upper = (self._lower[i], self._upper[i]) if held else (-INF, INF)
            self.loaded.highs.changeRowBounds(i, lower, upper)

    def feasible(self, integer: bool, options: SolveOptions) -> bool | None:
        """Whether the rows held can all hold, in integers or in the LP relaxation; None where
        HiGHS does not tell within the time limit. Ctrl-C stops it with Interrupted."""
        highs = self.loaded.highs
        if len(self._columns):
            kinds = (
                self._integrality
                if integer
                else np.full(len(self._columns), highspy.HighsVarType.kContinuous)
            )
            highs.changeColsIntegrality(len(self._columns), self._columns, kinds)
        # Each question from scratch, with presolve: from the last one's basis without it, a
        # question took 0.01-0.2 s instead of 0.4-0.8 s on a program of 23,000 rows, but 7-9 s
        # instead of 0.5 s on one of 119,000 (docs/benchmarks.md). Where HiGHS ends unknown
        # (fuzz f025: the dual simplex, with presolve or without), the primal simplex, then the
        # interior point, are asked (each choice stated: HiGHS keeps options between runs).
        for extra in (
            {"solver": "choose", "simplex_strategy": DUAL_SIMPLEX},
            {"solver": "choose", "simplex_strategy": PRIMAL_SIMPLEX},
            {"solver": "ipm"},
        ):
            highs.clearSolver()
            _configure(highs, dataclasses.replace(options, verbose=False), extra)
            _, interrupted = _run(highs)
            if interrupted:
                raise Interrupted("interrupted while naming the limits in conflict")
            status = highs.getModelStatus()
            if status in (
                highspy.HighsModelStatus.kInfeasible,
                highspy.HighsModelStatus.kUnboundedOrInfeasible,  # no objective: not unbounded
            ):
                return False
            if status == highspy.HighsModelStatus.kOptimal:
                return True
            if status == highspy.HighsModelStatus.kTimeLimit:
                return None
        return None
