"""A Pyomo model handed to HiGHS as arrays, in one pass over its rows.

Pyomo's persistent HiGHS interface (pyomo.contrib.solver) walks every row twice — for its linear
form and for the variables it watches for later changes — and passes rows to HiGHS one call
each. fleetopt builds each model once and solves it once, so it needs none of that bookkeeping:
each row's body goes through Pyomo's LinearRepnVisitor (the linear walker of its LP and NL
writers) and the whole matrix reaches HiGHS in one call, about 3x sooner than `set_instance`
(docs/benchmarks.md). Pyomo stays the modelling layer; only the hand-off is ours.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import highspy
import numpy as np
import pyomo.core as pyo
from pyomo.core.base.constraint import ConstraintData
from pyomo.core.base.var import VarData
from pyomo.repn import generate_standard_repn
from pyomo.repn.linear import LinearRepnVisitor

INF = highspy.kHighsInf


@dataclass(frozen=True)
class Loaded:
    """A HiGHS object holding a model, and which Pyomo variable and row each index is."""

    highs: highspy.Highs
    columns: list[VarData]
    rows: list[ConstraintData]

    def column_index(self, variables) -> np.ndarray:
        return _positions(self.columns, variables)

    def row_index(self, rows) -> np.ndarray:
        return _positions(self.rows, rows)

    def load_values(self) -> None:
        """HiGHS's solution into the model's variables."""
        for var, value in zip(self.columns, self.highs.getSolution().col_value, strict=True):
            if not var.fixed:
                var.set_value(value, skip_validation=True)


def hand_off(model: pyo.ConcreteModel) -> Loaded:
    """A quiet HiGHS object holding `model` (linear rows and objective; fixed variables enter
    as constants, as in Pyomo's writers).

    Columns are numbered in the order the rows first name them, then the objective, then the
    variables nothing names — Pyomo's persistent interface's order, so HiGHS gets the model it
    got before, bit for bit (tests/test_handoff.py); its branch and bound depends on the order
    (docs/benchmarks.md)."""
    variables = {id(var): var for var in model.component_data_objects(pyo.Var, descend_into=True)}
    where: dict[int, int] = {}
    visitor = LinearRepnVisitor({})
    rows = list(model.component_data_objects(pyo.Constraint, active=True, descend_into=True))
    starts, index, value = np.zeros(len(rows), dtype=np.int32), [], []
    lower, upper = np.empty(len(rows)), np.empty(len(rows))
    for i, row in enumerate(rows):
        starts[i] = len(index)
        low, body, high = row.to_bounded_expression(evaluate_bounds=True)
        terms, constant = _linear(visitor, body, row)
        index += [where.setdefault(key, len(where)) for key in terms]
        value += terms.values()
        lower[i] = -INF if low is None else low - constant
        upper[i] = INF if high is None else high - constant
    objective = next(model.component_data_objects(pyo.Objective, active=True, descend_into=True))
    # Pyomo's standard form, as its persistent interface read it: the linear walker sums the
    # objective's named expressions in another order, which moved coefficients by their last
    # bit and HiGHS's path with them.
    repn = generate_standard_repn(objective.expr, quadratic=False)
    if repn.nonlinear_expr is not None:
        raise ValueError(f"{objective.name} is not linear: HiGHS takes linear programs only")
    terms = {id(var): coef for var, coef in zip(repn.linear_vars, repn.linear_coefs, strict=True)}
    offset = repn.constant
    costed = [where.setdefault(key, len(where)) for key in terms]
    for key in variables:
        where.setdefault(key, len(where))
    columns = [variables[key] for key in where]  # dicts keep insertion order: column j is j-th
    cost = np.zeros(len(columns))
    cost[costed] = list(terms.values())

    low, high = np.array([_bounds(var) for var in columns], dtype=float).reshape(-1, 2).T
    matrix = (starts, np.array(index, dtype=np.int32), np.array(value))
    highs = matrix_highs(cost, (low, high), (lower, upper), matrix)
    integral = np.array([j for j, v in enumerate(columns) if v.is_integer()], dtype=np.int32)
    if len(integral):
        kind = np.full(len(integral), highspy.HighsVarType.kInteger)
        highs.changeColsIntegrality(len(integral), integral, kind)
    highs.changeObjectiveOffset(offset)
    if objective.sense == pyo.maximize:
        highs.changeObjectiveSense(highspy.ObjSense.kMaximize)
    return Loaded(highs, columns, rows)


def matrix_highs(
    cost: np.ndarray,
    columns: tuple[np.ndarray, np.ndarray],
    rows: tuple[np.ndarray, np.ndarray],
    matrix: tuple[np.ndarray, np.ndarray, np.ndarray],
) -> highspy.Highs:
    """A HiGHS object that writes nothing (its banner, written by the first one of a process,
    included), holding min cost·v over columns' (lower, upper) bounds, with rows' lower ≤ A·v ≤
    upper, A by rows: (starts, column indices, values). Bounds at ±INF are free."""
    with _stdout_to_devnull():
        highs = highspy.Highs()
    highs.setOptionValue("output_flag", False)
    (low, high), (lower, upper), (starts, index, value) = columns, rows, matrix
    empty = np.array([], dtype=np.int32)
    highs.addCols(len(cost), cost, low, high, 0, empty, empty, np.array([]))
    highs.addRows(len(lower), lower, upper, len(index), starts, index, value)
    return highs


def _positions(items: list, wanted) -> np.ndarray:
    """Index in `items` of each of `wanted` (Pyomo components, matched by identity)."""
    where = {id(item): i for i, item in enumerate(items)}
    return np.array([where[id(item)] for item in wanted], dtype=np.int32)


@contextmanager
def _stdout_to_devnull() -> Iterator[None]:
    """File descriptor 1 pointed at /dev/null: HiGHS writes from C++, past sys.stdout."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 1)
            yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def _bounds(var: VarData) -> tuple[float, float]:
    if var.fixed:
        return var.value, var.value
    return (-INF if var.lb is None else var.lb), (INF if var.ub is None else var.ub)


def _linear(
    visitor: LinearRepnVisitor, expr, row: ConstraintData
) -> tuple[dict[int, float], float]:
    """{id(var): coefficient} (zeros left out) and the constant of a row's linear body (the
    row is named only in the error: names cost as much as the walk)."""
    repn = visitor.walk_expression(expr)
    if repn.nonlinear is not None:
        raise ValueError(f"{row.name} is not linear: HiGHS takes linear programs only")
    scale = repn.multiplier
    terms = {var: scale * coef for var, coef in repn.linear.items() if coef}
    return terms, scale * repn.constant
