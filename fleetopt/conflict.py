"""Why a solved program has no fleet, in the instance's words, and the limits raised that fix it.

Runs after HiGHS proves the program infeasible, which the pre-solve check (`diagnose.py`) leaves to
the limits: availability caps, whole nodes and the budget. A deletion filter names the ones in
conflict: each limit (its rows in every period: `gpu_cap[h100-sxm, t]`, `whole_nodes[...]`,
`budget`, docs/formulation.md) set free in turn, and left free where the program stays
infeasible without it; then each class's demand (`coverage_prefill[chat, t]`, ...) the same way.
What is left cannot hold together and holds without any one of its parts: an irreducible
conflict at the level of the instance's fields, asked of the LP relaxation, or of the program
itself where the relaxation holds (whole nodes). HiGHS's own IIS filters row by row, tens of
thousands of rows, and ignores the time limit. The fix of each limit is sized by the cheapest
fleet without it, which the pipeline's own solve finds: its cost for the budget, its most GPUs
in a period for a cap, first for each limit alone, then for all of them together; a cap alone
is raised only as far as the fleet with the fewest GPUs of its type needs. (HiGHS's
feasibility relaxation sized caps until 2026-12-06: it is the whole MIP without the presolve,
ran out of time on instances the solve answers in a second, and on one of 119,000 rows asked
for 588 H100s where the cheapest fleet without the cap uses 89.) The time limit left is shared
among these solves.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass

import pyomo.core as pyo
from pyomo.core.base.constraint import ConstraintData

from fleetopt.formulation.blocks import Solution
from fleetopt.formulation.data import ProgramData
from fleetopt.solve import HeldFeasibility, SolveOptions, time_left, time_spent

RELAXABLE = ("gpu_cap", "budget")
"""Limit families a fix may loosen; whole nodes and the demand stay as stated."""

SIZING_GAP = 0.01
"""The gap to which the cheapest fleet without the limits is solved to size their fix."""


@dataclass(frozen=True)
class Limit:
    """One limit of the instance, named by its family of rows and its field's key."""

    family: str
    key: str | None  # the GPU type, or None for the budget


SolveWithout = Callable[[ProgramData, SolveOptions], Solution | None]
"""The pipeline's solve of a program (the limits' instance less some of them): its plan, or None
where it finds none in the time given."""


def explain_conflict(
    data: ProgramData,
    build: Callable[[], pyo.ConcreteModel],
    options: SolveOptions,
    began: float,
    solve: SolveWithout,
) -> str:
    """One line: the limits in conflict, the demand they block, and the fix with its size. The
    time limit counts from `began`, the solve's start: once it is spent nothing more is asked,
    nor the program built (`build`, seconds on a large one) to ask it, and the limits not yet
    set free stay named."""
    every, classes = _limits(data), [c.name for c in data.classes]
    limits_needed: list[bool | None] = [None] * len(every)  # None: not asked in time
    classes_needed: list[bool | None] = [None] * len(classes)
    if not time_spent(options, began):
        model = build()
        held = HeldFeasibility(model)
        # Where the LP relaxation holds, the conflict is the integers' (whole nodes, a cap
        # below one replica's GPUs) and each question is a MIP.
        integer = held.feasible(False, time_left(options, began)) is not False
        limit_rows = [_rows(model, (limit.family,), limit.key) for limit in every]
        limits_needed = _needed(held, limit_rows, integer, options, began)
        coverage = ("coverage_prefill", "coverage_decode")
        demand_rows = [_rows(model, coverage, name) for name in classes]
        classes_needed = _needed(held, demand_rows, integer, options, began)
    named = [limit for limit, need in zip(every, limits_needed, strict=True) if need is not False]
    blocked = [name for name, need in zip(classes, classes_needed, strict=True) if need]
    words = " and ".join(_describe(limit, data) for limit in named) or "the limits"
    demand = ", ".join(blocked) if None not in classes_needed else "the demand"
    fixes = suggest(data, named, every, options, began, solve)
    if fixes:
        fix = "; fix: " + ", or ".join(fixes)
    elif time_spent(options, began):
        fix = (
            "; fix: loosen the limits named (the time limit ran out before they were narrowed "
            "and sized: raise --time-limit)"
        )
    else:
        fix = "; fix: loosen the limits named"
    return f"infeasible within the limits: no fleet for {demand} fits {words}{fix}"


def _needed(
    held: HeldFeasibility,
    groups: list[tuple[ConstraintData, ...]],
    integer: bool,
    options: SolveOptions,
    began: float,
) -> list[bool | None]:
    """A deletion filter over groups of rows: each set free in turn, and left free where the
    rows still held cannot all hold without it. Whether the conflict needs each group; None
    where HiGHS did not tell in time (the group stays held, as if needed)."""
    needed: list[bool | None] = []
    for rows in groups:
        held.hold(rows, False)
        spent = time_spent(options, began)
        feasible = None if spent else held.feasible(integer, time_left(options, began))
        if feasible is not False:
            held.hold(rows, True)
        needed.append(feasible)  # feasible without it: the conflict needs it
    return needed


def suggest(
    data: ProgramData,
    named: list[Limit],
    every: list[Limit],
    options: SolveOptions,
    began: float,
    solve: SolveWithout,
) -> list[str]:
    """Each limit in the conflict that alone can be loosened into a fleet, by how much; else
    every cap and the budget loosened together (the conflict is the LP relaxation's: once one
    limit gives way another may bind). Each of these solves gets an equal share of what is
    left of the time limit, and none starts once it is spent (building their models is not
    counted in it)."""
    relaxable = [limit for limit in named if limit.family in RELAXABLE]
    share = time_left(options, began)
    if share.time_limit is not None:  # each limit alone (a cap twice), then all together
        parts = sum(2 if _fewest_asked(limit, data) else 1 for limit in relaxable) + 1
        share = dataclasses.replace(share, time_limit=share.time_limit / parts)

    def loosen(limits: list[Limit]) -> str | None:
        if not limits or time_spent(options, began):  # whole nodes alone: nothing to loosen
            return None
        return _sized(data, limits, share, solve, lambda: time_spent(options, began))

    alone = [fix for limit in relaxable if (fix := loosen([limit]))]
    if alone:
        return alone
    together = loosen([limit for limit in every if limit.family in RELAXABLE])
    return [together] if together else []


def _sized(
    data: ProgramData,
    limits: list[Limit],
    options: SolveOptions,
    solve: SolveWithout,
    spent: Callable[[], bool],
) -> str | None:
    """The limits raised to what the cheapest fleet without them uses (solved within
    SIZING_GAP: any fleet's use is a fix): its cost for the budget, its most GPUs in a period
    for a cap. A cap loosened alone is also raised only as far as the fleet with the fewest
    GPUs of its type needs, where that is fewer (`_fewest`), unless the time limit is `spent`
    by then."""
    loose = {limit.key for limit in limits if limit.family == "gpu_cap"}
    budget = any(limit.family == "budget" for limit in limits)
    without = dataclasses.replace(
        data,
        gpus=[dataclasses.replace(g, max_gpus=None) if g.name in loose else g for g in data.gpus],
        budget_per_hour=None if budget else data.budget_per_hour,
    )
    sizing = dataclasses.replace(options, mip_gap=max(options.mip_gap, SIZING_GAP))
    fleet = solve(without, sizing)
    if fleet is None:
        return None
    raises = []
    for limit in limits:
        if limit.family == "budget":
            excess = fleet.cost_per_hour - data.budget_per_hour
            if excess > 1e-6:
                raises.append(_raise_budget(data, excess))
            continue
        most = _most(fleet, limit.key)
        if most <= _market(data, limit.key).max_gpus + 1e-6:
            continue
        fewest = None
        if len(limits) == 1 and _fewest_asked(limit, data) and not spent():
            fewest = solve(_fewest(without, limit.key, fleet.cost_per_hour), options)
        least = most if fewest is None else min(most, _most(fewest, limit.key))
        raises.append(_raise_cap(data, limit.key, least, most, fleet.cost_per_hour))
    return " and ".join(raises) or None


FEWEST_WEIGHT = 1000.0
"""A GPU of the capped type is charged this many times the cheapest fleet's whole cost on top
of its price, so that the fleet with the fewest of them wins (any fleet found is a fix)."""


def _fewest_asked(limit: Limit, data: ProgramData) -> bool:
    """A cap alone is sized by a second fleet, the fewest GPUs of its type, where the prices
    may be changed to find it: not under a budget (priced in the same dollars) or when
    maximising throughput (which has no cost objective to change)."""
    return (
        limit.family == "gpu_cap" and data.budget_per_hour is None and not data.maximize_throughput
    )


def _fewest(data: ProgramData, key: str | None, cheapest: float) -> ProgramData:
    """The program with each GPU of type `key` charged FEWEST_WEIGHT × `cheapest` more: its
    cheapest fleet uses the fewest of them (ties broken by cost)."""
    surcharge = FEWEST_WEIGHT * max(cheapest, 1.0)
    return dataclasses.replace(
        data,
        gpus=[
            dataclasses.replace(g, price_per_gpu_hour=g.price_per_gpu_hour + surcharge)
            if g.name == key
            else g
            for g in data.gpus
        ],
    )


def _most(fleet: Solution, key: str | None) -> float:
    """The most GPUs of type `key` the fleet runs in a period."""
    return max((n for (g, _), n in fleet.gpus.items() if g == key), default=0.0)


def _raise_budget(data: ProgramData, excess: float) -> str:
    budget = data.budget_per_hour
    enough = math.ceil((budget + excess) * 100 - 1e-6) / 100  # shown in cents: round up
    return (
        f"raise objective.budget_per_hour from {budget:,.2f} to {enough:,.2f} $/h "
        f"(+{enough - budget:,.2f})"
    )


def _raise_cap(data: ProgramData, key: str | None, least: float, most: float, cost: float) -> str:
    """The cap raised to `least` GPUs; where the cheapest fleet needs more (`most`), said so."""
    cap = _market(data, key).max_gpus
    more, cheapest = math.ceil(least - cap - 1e-6), math.ceil(most - 1e-6)
    if cap + more >= cheapest:
        return f"raise gpus[{key}].max_gpus from {cap} to {cap + more} (+{more} GPUs)"
    return (
        f"raise gpus[{key}].max_gpus from {cap} to {cap + more} (+{more} GPUs, the fewest any "
        f"fleet needs; the cheapest fleet without the cap, {cost:,.2f} $/h, uses {cheapest})"
    )


def _describe(limit: Limit, data: ProgramData) -> str:
    if limit.family == "budget":
        return f"the budget of {data.budget_per_hour:,.2f} $/h (objective.budget_per_hour)"
    market = _market(data, limit.key)
    if limit.family == "gpu_cap":
        return f"the cap of {market.max_gpus} {limit.key} GPUs (gpus[{limit.key}].max_gpus)"
    return (
        f"whole {market.gpus_per_node}-GPU nodes of {limit.key} (gpus[{limit.key}].gpus_per_node)"
    )


def _limits(data: ProgramData) -> list[Limit]:
    """Every cap, whole-node rule and budget of the program (`add_gpu_supply`, `add_budget`)."""
    caps = [Limit("gpu_cap", g.name) for g in data.gpus if g.max_gpus is not None]
    nodes = [Limit("whole_nodes", g.name) for g in data.gpus if g.gpus_per_node]
    budget = [Limit("budget", None)] if data.budget_per_hour is not None else []
    return caps + nodes + budget


def _rows(
    model: pyo.ConcreteModel, families: tuple[str, ...], key: str | None
) -> tuple[ConstraintData, ...]:
    """The rows of these families named by `key` (a GPU type, a class, None for the budget),
    every period's."""
    components = [getattr(model, family) for family in families if hasattr(model, family)]
    return tuple(row for rows in components for row in rows.values() if _key(row) == key)


def _key(row: ConstraintData) -> str | None:
    """The named part of a row's index: the GPU type or class (the period and config are not)."""
    index = row.index()
    if index is None:
        return None
    return str(index[0] if isinstance(index, tuple) else index)


def _market(data: ProgramData, name: str | None):
    return next(g for g in data.gpus if g.name == name)
