"""A solution's routes put back on the replicas it buys, before it becomes a plan.

HiGHS accepts a plan whose rows hold within its absolute tolerance (1e-6). A class whose
usage per request/s is small (a short prompt: ~0.008 s of prefill) can then put 1e-4 req/s on
a config with no replica, Σ u·r ≤ cap·0 holding to that tolerance; the plan drops the route
with the pool it would need, and verify refuses the plan (fuzz seed 173 in throughput mode,
stopped by the time limit: 13% of a 0.0011 req/s class on two configs with none). Such a
solution is solved again as an LP, every integer fixed at its rounded value: a simplex vertex
meets the rows far closer than a heuristic's plan, so the routes move onto the pools bought.
"""

from __future__ import annotations

import dataclasses

import pyomo.core as pyo

from fleetopt.extract import ROUTE_EPS
from fleetopt.solve import Outcome, SolveOptions, relative_gap, run_highs


def routes_without_replicas(model: pyo.ConcreteModel) -> bool:
    """Some class is routed to a config in a period where the config has no replica."""
    return any(
        (var.value or 0.0) > ROUTE_EPS and round(model.x[k, t].value or 0.0) == 0
        for (_, k, t), var in model.r.items()
    )


def polished(model: pyo.ConcreteModel, outcome: Outcome, options: SolveOptions) -> Outcome:
    """The outcome of the model's solution, its routes solved again with every integer fixed
    where some sit on configs with no replica (the values loaded into the model). The fleet
    stays as it is, so the cost does; in throughput mode the scale is the LP's, and the status
    `optimal` only while that stays within the gap asked for. Where the LP finds no routing,
    the solution is left as it was (and verify will say what it lacks)."""
    if outcome.objective is None or not routes_without_replicas(model):
        return outcome
    integers = [var for var in model.component_data_objects(pyo.Var) if var.is_integer()]
    for var in integers:
        var.fix(round(var.value or 0.0))
    again = run_highs(model, options)
    for var in integers:
        var.unfix()
    if again.objective is None:
        return outcome
    objective, bound = again.objective, outcome.bound
    gap = None if bound is None else relative_gap(objective, bound)
    proven = outcome.status == "optimal" and gap is not None and gap <= options.mip_gap
    return dataclasses.replace(
        outcome,
        status="optimal" if proven else "feasible",
        objective=objective,
        gap=gap,
        seconds=outcome.seconds + again.seconds,
    )
