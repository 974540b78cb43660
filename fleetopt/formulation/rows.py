"""Rows straight from coefficient arrays: the lean way to build a Pyomo model.

A row is `(lower, body, upper)` with a linear body made from its coefficients and variables, so
Pyomo never walks a Python sum of terms and hands a ready linear form to HiGHS
(../shared/SOLVER-NOTES.md, "Build speed"; docs/benchmarks.md measures the effect).
"""

from __future__ import annotations

import pyomo.core as pyo
from pyomo.core.expr.numeric_expr import LinearExpression


def linear(coefs: list[float], variables: list) -> LinearExpression:
    return LinearExpression(linear_coefs=coefs, linear_vars=variables)


Row = tuple[float | None, LinearExpression, float | None]


def add_rows(m: pyo.ConcreteModel, name: str, rows: dict) -> None:
    """m.<name>[i] = rows[i] for every index i (a tuple, or a single key); nothing if empty."""
    if rows:
        m.add_component(
            name, pyo.Constraint(list(rows), rule=lambda _, *i: rows[i if len(i) > 1 else i[0]])
        )
