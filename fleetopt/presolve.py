"""Prove configs out of the program before HiGHS sees it, from an incumbent and the LP relaxation.

HiGHS spends most of a fleet solve on configs that cannot be in any plan cheaper than a good
one, and on pooling curves whose LP relaxation — the chord from 0 to the replica bound X, and
the hull over a config's classes (docs/formulation.md §2) — credits small pools with part of a
large pool's rate. Both yield to one incumbent, found first:

1. the LP relaxation (`build_model(relaxed=True)`, by the primal simplex): its bound z and the
   reduced cost d of every x[k,t];
2. the incumbent, of objective U: the program restricted to the configs the LP uses and —
   because pooling rewards one large pool where the LP spreads demand over many small ones — to
   the configs that carry each class, and all classes together, most cheaply alone: a dozen or
   two configs, solved in a fraction of a second (short of time, or dearer than the plan the
   arithmetic bound prices, solved again from that plan's replicas);
3. every plan whose objective is at most U then has, for each config,
   x[k,t] ≤ (U − z)/d[k,t]   (LP duality: objective ≥ z + d·x), and
   x[k,t] ≤ U / (tp·p·w_t)   (its own GPUs, at their cheapest weight w_t in the objective),
   so those bounds hold for the optimum: configs bounded at 0 in every period are dropped, and
   the pooling chords of the rest are drawn to their smaller X;
4. the program left has a tighter LP (lower chords, fewer configs), whose reduced costs (by the
   dual simplex, which prices the dear configs out furthest) bound the replicas again with the
   same U: repeated until nothing moves, at most MAX_ROUNDS times. That LP is the first one,
   held in HiGHS and changed in place (`HeldRelaxation`), not built again.

The program left holds the incumbent and every plan no dearer, so its optimum is the program's
and its bound a bound of the program: exact, not a heuristic. The incumbent's replicas are
HiGHS's start on the program left (`incumbent_start`), so its answer is never dearer; should
its solve stop (time limit) without any plan, the incumbent is the answer (pipeline.solve_block).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import pyomo.core as pyo
from pyomo.common.collections import ComponentMap

from fleetopt.formulation import build_model
from fleetopt.formulation.data import GPU_COUNT_TIE_BREAK, ProgramData
from fleetopt.formulation.model import (
    model_columns,
    replica_bound_array,
    stated_bound,
)
from fleetopt.formulation.prefill import broken_hull_orders, chord_coefficient, pool_hull_rows
from fleetopt.formulation.sizing import (
    Columns,
    cheapest_per_request,
    columns,
    gpu_prices,
    pooled,
    price_weights,
    replica_prices,
    replicas_alone_each,
)
from fleetopt.formulation.tiers import cheapest_tiers
from fleetopt.handoff import INF
from fleetopt.scaled_bound import scale_bound
from fleetopt.solve import (
    USED,
    HeldRelaxation,
    Outcome,
    SolveOptions,
    builds_in_time,
    run_highs,
    time_left,
    time_share,
    time_spent,
)

RESTRICTED_TIME_SHARE = 0.1
"""Of the time limit, what the program restricted to a few configs may take."""
BOUND_TIME_SHARE = 0.25
"""Of the time limit, what throughput mode's bound by LP may take (`scaled_bound.scale_bound`:
each round at the scale the last one found tightens it)."""
START_SECONDS = 1.0
"""The least time HiGHS gets on the restricted program started from the arithmetic plan where
the block's time allows it: it completes that plan (and improves on it within the time)."""
COMPLETE_SECONDS = 0.01
"""The least time limit of HiGHS on the restricted program started from the arithmetic plan,
where the block's time leaves less than START_SECONDS (a late block, up to the deadline): it
completes the plan's routes (within 1 ms on the scale benchmark's large blocks) and stops;
START_SECONDS where that brings no plan back."""
MAX_ROUNDS = 5
"""Rounds of reduced-cost bounds, each from the LP of the program the last one left."""


@dataclass(frozen=True)
class Incumbent:
    """The restricted program, solved: a plan of the whole program."""

    model: pyo.ConcreteModel
    configs: list[int]
    """Index in the given program of each of its configs."""
    outcome: Outcome


@dataclass
class ModelSeconds:
    """What the presolve spent building its Pyomo models and handing them to HiGHS and back (its
    LP, its restricted programs): model-building time as much as the last program's
    (pipeline.Stats)."""

    build: float = 0.0
    handoff: float = 0.0


@dataclass(frozen=True)
class Presolved:
    data: ProgramData
    """The program left: the configs kept, with the bounds the incumbent proves."""
    kept: list[int]
    """Index in the given program of each kept config."""
    incumbent: Incumbent | None = None
    bound: float | None = None
    """No plan is better: the LP relaxation's objective, below every plan's cost; in throughput
    mode a scale no plan reaches (`_scale_bound`)."""
    spent: ModelSeconds = dataclasses.field(default_factory=ModelSeconds)


@dataclass(frozen=True)
class AlonePlan:
    """`_alone_plan`: its objective, and its replicas of config k in period t."""

    objective: float
    replicas: dict[tuple[int, int], int]


def presolve(
    data: ProgramData,
    options: SolveOptions,
    late: bool = False,
    cols: Columns | None = None,
    scaled: frozenset[int] = frozenset(),
) -> Presolved:
    """The program reduced by an incumbent; unchanged where neither the arithmetic plan nor
    the restricted program gives one, or where the objective is throughput (which still gets
    an incumbent: `_throughput_incumbent`). `late` (the time
    limit was spent before the block started), or the first LP out of time: the arithmetic
    plan, completed by HiGHS, is the incumbent, the program is cut by its cost alone, and the
    bound is `_arithmetic_bound`. `cols`: `columns(data)`, where the caller has it (the period
    blocks of one model share it). `scaled`: the configs its group's scaled LP uses at the
    block's level (fleetopt/scaled_bound.py), where known: the restricted program consolidates
    on them too."""
    spent = ModelSeconds()
    return dataclasses.replace(_presolve(data, options, late, cols, scaled, spent), spent=spent)


def _presolve(
    data: ProgramData,
    options: SolveOptions,
    late: bool,
    cols: Columns | None,
    scaled: frozenset[int],
    spent: ModelSeconds,
) -> Presolved:
    began = time.perf_counter()
    cols = columns(data) if cols is None else cols
    if data.maximize_throughput:
        return _throughput_incumbent(data, options, cols, spent, began)
    cheapest = _cheapest_by_period(data, cols)
    alone = _alone_plan(data, cheapest)
    upper = None if alone is None else alone.objective
    costs = _replica_costs(data, cols)
    bounds = replica_bound_array(data, cols)
    first = _cut(data, bounds if upper is None else np.minimum(bounds, _cost_caps(costs, upper)))
    consolidating = _consolidating(cheapest[0], first.kept, scaled)
    if late or not builds_in_time(model_columns(first.data, relaxed=True), options, began):
        return _arithmetic_only(first, alone, options, consolidating, cols, spent)
    built = time.perf_counter()
    lp = build_model(first.data, relaxed=True)
    handed = time.perf_counter()
    held = HeldRelaxation(lp, options, began)
    spent.build += handed - built
    spent.handoff += time.perf_counter() - handed
    # Building and handing over a large LP can spend the block's time by itself: it is then
    # not solved (HiGHS would take its least time on top) and the presolve answers as if out
    # of time.
    relaxation = None if time_spent(options, began) else held.solve(primal=True)
    if relaxation is None:  # infeasible (then there is no arithmetic plan) or out of time
        return _arithmetic_only(first, alone, options, consolidating, cols, spent)
    program = _with_broken_orders(first.data, lp, held)
    if alone is None:
        incumbent = _restricted(program, lp, options, consolidating, spent)
        if incumbent is None:  # availability caps break every arithmetic plan
            mixing = consolidating | _on_each_gpu(data, cols, first.kept)
            incumbent = _restricted(program, lp, options, mixing, spent)
    else:
        start = _alone_start(alone, first.kept)
        incumbent = _restricted(program, lp, options, consolidating, spent, start)
    if incumbent is None:
        return Presolved(program, first.kept, bound=relaxation.objective)
    used = {
        (incumbent.configs[i], t): round(var.value)
        for (i, t), var in incumbent.model.x.items()
        if round(var.value or 0.0)
    }
    incumbent = _in_given_indices(incumbent, first.kept)
    if incumbent.outcome.interrupted:  # Ctrl-C: the incumbent is the answer (pipeline)
        return Presolved(program, first.kept, incumbent, relaxation.objective)
    upper = incumbent.outcome.objective
    # Each round's bounds hold every plan no dearer than the incumbent, so the LP under them
    # prices configs for the next: smaller bounds lower the chords (§2), which raises the LP's
    # objective and reduced costs. The LP is changed in place (`HeldRelaxation`): a config
    # bounded at 0 stays in it, fixed. Stop at a fixed point or after MAX_ROUNDS.
    bounds, bound = dict(lp.replica_bound), relaxation.objective
    caps = _cost_caps(costs[first.kept], upper)
    for round_ in range(MAX_ROUNDS):
        tighten = _reduced_cost_bound(lp, relaxation, upper, used, caps)
        tighter = {(k, t): tighten(k, t, b) for (k, t), b in bounds.items()}
        moved = {key: b for key, b in tighter.items() if b != bounds[key]}
        bounds = tighter
        if not moved or round_ + 1 == MAX_ROUNDS or time_spent(options, began):
            break
        _bound_replicas(held, lp, program, moved)
        relaxation = held.solve()
        if relaxation is None:  # out of time: the bounds so far hold
            break
        program = _with_broken_orders(program, lp, held)
        bound = max(bound, relaxation.objective)
    shape = (len(program.configs), len(program.periods))
    cut = _cut(program, np.array([bounds[key] for key in np.ndindex(shape)]).reshape(shape))
    return Presolved(cut.data, [first.kept[k] for k in cut.kept], incumbent, bound)


SCALE_STEPS = 12
"""Bisection steps on a scale of the demand once it is bracketed within a factor of 2 (`_edge`):
the largest the arithmetic plan affords, the bound on the scale, each within 2⁻¹² of it."""
SCALE_RANGE = 2.0**40
"""The scales the bracket looks through, from 1/SCALE_RANGE up to SCALE_RANGE (or the supported
limit, `ProgramData.demand_scale_limit`): a budget that affords no arithmetic plan at the
smallest (whole replicas for a trickle of every class) is left to HiGHS, which says whether it
buys any fleet."""


def _throughput_incumbent(
    data: ProgramData, options: SolveOptions, cols: Columns, spent: ModelSeconds, began: float
) -> Presolved:
    """Throughput mode: the program as it is, with an incumbent and a bound on the scale. No
    bound on the scale prunes configs as a cost bound does, but HiGHS on the whole program,
    from no plan, could end a time limit with a smaller scale than arithmetic affords, or with
    none (fuzz instances of one block over many periods: docs/benchmarks.md). The incumbent is
    the program restricted to the arithmetic plan at the largest scale the budget affords
    (`_affordable`) and to the configs that carry each class, and all classes together, most
    cheaply alone there, solved from that plan: HiGHS completes it with the scale its replicas
    carry, and improves on it. The bound: the scaled LP's at twice that scale
    (`scaled_bound.scale_bound`), narrowed by arithmetic where it can (`_scale_bound`)."""

    def out_of_time() -> bool:
        return time_spent(options, began)

    everything = list(range(len(data.configs)))
    affordable = _affordable(data, cols, out_of_time)
    if affordable is None:
        return Presolved(data, everything)
    scale, cheapest, alone = affordable
    high = min(2 * scale, data.demand_scale_limit or math.inf)
    by_lp = None if out_of_time() else scale_bound(data, high, _bound_time(options, began))
    if by_lp is not None:  # the LP's tolerances, where the arithmetic plan is the optimum
        by_lp = max(by_lp, scale)
    bound = _scale_bound(data, cols, scale, out_of_time, by_lp)
    if not out_of_time():
        scale, alone = _merged_affordable(data, cols, scale, cheapest, alone, out_of_time)
    consolidating = _consolidating(cheapest[0], everything, frozenset())
    incumbent = _restricted(data, None, options, consolidating, spent, alone.replicas)
    return Presolved(data, everything, incumbent, bound)


def _bound_time(options: SolveOptions, began: float) -> SolveOptions:
    """The options for the scale's bound by LP: what is left of the limit, at most
    BOUND_TIME_SHARE of it (the plan's stages after it need the rest)."""
    left = time_left(options, began)
    if options.time_limit is None:
        return left
    share = time_share(options, BOUND_TIME_SHARE).time_limit
    return dataclasses.replace(left, time_limit=min(left.time_limit, share))


def _affordable(
    data: ProgramData, cols: Columns, out_of_time: Callable[[], bool]
) -> tuple[float, list[Cheapest], AlonePlan] | None:
    """The largest scale of the demand, up to the supported limit, whose arithmetic plan the
    budget affords at its cheapest tiers (`tiers.cheapest_tiers`), with that plan
    (`_alone_plan`) and the cheapest configs it is made of; None where it affords none. An
    arithmetic plan's cost never falls as the demand grows (each class's replicas alone do
    not): from 1, halved until the budget affords it, then `_edge` (from the last scale halved,
    where one was)."""

    def plan_at(scale: float) -> tuple[float, list[Cheapest], AlonePlan] | None:
        return _affordable_plan(data, cols, scale)

    limit = min(data.demand_scale_limit or SCALE_RANGE, SCALE_RANGE)
    low, above = min(1.0, limit), None
    found = plan_at(low)
    if found is None and plan_at(1 / SCALE_RANGE) is None:
        return None  # not even a trickle of the demand: halving would find nothing
    while found is None and low >= 1 / SCALE_RANGE:
        above, low = low, low / 2
        found = plan_at(low)
    return None if found is None else _edge(plan_at, low, found, limit, out_of_time, above)[2]


def _affordable_plan(
    data: ProgramData, cols: Columns, scale: float, partition: list[tuple[str, ...]] | None = None
) -> tuple[float, list[Cheapest], AlonePlan] | None:
    """The arithmetic plan at this scale of the demand, with the cheapest configs it is made
    of, where the budget affords it at its cheapest tiers (`tiers.cheapest_tiers`); on the
    groups of `partition` alone where given."""
    program = dataclasses.replace(data.at_scale(scale), budget_per_hour=None)
    cheapest = _cheapest_by_period(program, cols, groups=partition)
    alone = _alone_plan(program, cheapest, None if partition is None else [partition])
    if alone is None:
        return None
    if cheapest_tiers(program, alone.replicas).cost_per_hour > data.budget_per_hour * (1 + 1e-9):
        return None
    return scale, cheapest, alone


def _merged_affordable(
    data: ProgramData,
    cols: Columns,
    scale: float,
    cheapest: list[Cheapest],
    alone: AlonePlan,
    out_of_time: Callable[[], bool],
) -> tuple[float, AlonePlan]:
    """The affordable scale and its arithmetic plan, again on each model's classes merged
    greedily at `scale` (`_merged_partition`), where that affords more: a model of three or
    more classes has ways to pool them that `_partitions` does not weigh (0.846 → 0.891 of
    the demand for the same budget on the large benchmark instance). Once the partition is
    fixed each scale sizes only its groups, a fraction of the first search's."""
    partition = _merged_partition(data.at_scale(scale), cols, cheapest)
    found = None if partition is None else _affordable_plan(data, cols, scale, partition)
    if found is None:
        return scale, alone
    limit = min(data.demand_scale_limit or SCALE_RANGE, SCALE_RANGE)
    more, _, (_, _, merged) = _edge(
        lambda s: _affordable_plan(data, cols, s, partition), scale, found, limit, out_of_time
    )
    return (more, merged) if more > scale else (scale, alone)


def _merged_partition(
    data: ProgramData, cols: Columns, cheapest: list[Cheapest]
) -> list[tuple[str, ...]] | None:
    """Each model's classes in groups merged greedily: from every class alone, the two groups
    whose merging saves most (the hour-weighted $/h of each group on its cheapest option,
    before whole nodes), until none saves; the model's classes all together where that is
    cheaper still. None where no model has three classes (`_partitions` weighs every way of
    two). `cheapest`: `_cheapest_by_period` of `data`, extended here (a copy) with each merged
    group, sized in every period at once."""
    models = _groups(data)[1]
    if all(len(model) < 3 for model in models):
        return None
    cheapest = [dict(by_group) for by_group in cheapest]
    weights = np.array([p.hours for p in data.periods]) / data.total_hours

    def cost(group: tuple[str, ...]) -> float:
        options = [_cheapest_option(by_group[group]) for by_group in cheapest]
        if any(option is None for option in options):
            return math.inf
        priced = zip(weights, options, strict=True)
        return float(sum(w * sum(c for c, _, _ in option) for w, option in priced))

    partition: list[tuple[str, ...]] = []
    for model in models:
        groups = [(name,) for name in model]
        while len(groups) > 1:
            pairs = {
                tuple(sorted(a + b, key=cols.classes.__getitem__)): (a, b)
                for a, b in itertools.combinations(groups, 2)
            }
            new = [group for group in pairs if group not in cheapest[0]]
            sized = _cheapest_by_period(data, cols, groups=new)
            for by_group, more in zip(cheapest, sized, strict=True):
                by_group.update(more)
            saving, merged = max(
                ((cost(a) + cost(b) - cost(g), g) for g, (a, b) in pairs.items()),
                key=lambda pair: pair[0],
            )
            if not saving > 0:
                break
            groups = [g for g in groups if g not in pairs[merged]] + [merged]
        if cost(model) < sum(cost(group) for group in groups):
            groups = [model]
        partition += groups
    return partition


def _scale_bound(
    data: ProgramData,
    cols: Columns,
    affordable: float,
    out_of_time: Callable[[], bool],
    below: float | None = None,
) -> float | None:
    """A scale of the demand no fleet within the budget serves, above `affordable` (one whose
    arithmetic plan the budget affords): one where `_arithmetic_bound`, below the cost of every
    fleet that serves it, passes the budget. A fleet that serves a scale serves every smaller
    one (its routes scaled down), so none serves a larger one either. `below`: such a scale
    known already (the scaled LP's), which the search starts under: that one where arithmetic
    proves no smaller. Else the supported limit where the bound stays within the budget up to
    it; None where it cannot say (a class no config carries, or no limit)."""
    budget = data.budget_per_hour * (1 + 1e-9)

    def within(scale: float) -> bool | None:  # None: a fleet within the budget is ruled out
        bound = _arithmetic_bound(data.at_scale(scale), cols)
        return True if bound is None or bound <= budget else None

    if below is None and _arithmetic_bound(data.at_scale(affordable), cols) is None:
        return None
    limit = data.demand_scale_limit if below is None else below
    _, high, _ = _edge(within, affordable, True, limit or SCALE_RANGE, out_of_time)
    if high is None:
        return below
    return None if limit is None and high >= SCALE_RANGE else high


Found = TypeVar("Found")


def _edge(
    fits: Callable[[float], Found | None],
    low: float,
    found: Found,
    limit: float,
    out_of_time: Callable[[], bool],
    above: float | None = None,
) -> tuple[float, float | None, Found]:
    """Where `fits` stops holding above `low`, where it holds (giving `found`): the scale
    doubled until it fails or reaches `limit` (or from `above`, a scale the caller found it
    fails at: each test of a throughput program of every config takes up to a second), then
    the bracket bisected SCALE_STEPS times.
    The last scale that fits, the first that does not (both the limit where it fits there),
    and what `fits` gave at the last that fits. `fits` holds up to some scale and no further
    (each caller's test is monotone in the scale). Once `out_of_time()`, the bracket so far:
    with None for the first that does not where none failed yet (each test on a program of
    every config and period, a throughput program's one block, takes up to a second)."""
    high = low if above is None else above
    while high < limit and above is None:
        if out_of_time():
            return low, None, found
        high = min(2 * high, limit)
        if (value := fits(high)) is None:
            break
        found, low = value, high
    if low >= limit:
        return low, limit, found
    for _ in range(SCALE_STEPS):
        if out_of_time():
            break
        middle = (low + high) / 2
        if (value := fits(middle)) is None:
            high = middle
        else:
            found, low = value, middle
    return low, high, found


def _arithmetic_only(
    first: Presolved,
    alone: AlonePlan | None,
    options: SolveOptions,
    consolidating: set[int],
    cols: Columns,
    spent: ModelSeconds,
) -> Presolved:
    """The program cut by the arithmetic plan's cost, with that plan (completed by HiGHS, no
    dearer) as the incumbent and the bound by arithmetic: the answer of a block with no time
    for its LP. Without an arithmetic plan, the program so cut and no incumbent (HiGHS will
    say why)."""
    if alone is None:
        return first
    start = _alone_start(alone, first.kept)
    incumbent = _restricted(first.data, None, options, consolidating, spent, start)
    if incumbent is None:
        return first
    incumbent = _in_given_indices(incumbent, first.kept)
    bound = _arithmetic_bound(first.data, cols.rows(first.kept))
    return Presolved(first.data, first.kept, incumbent, bound)


def _arithmetic_bound(data: ProgramData, cols: Columns) -> float | None:
    """A bound on the objective without the LP. The objective is at least Σ_t Σ_k c_kt·x[k,t]
    with c_kt a replica's price at weights that hold summed over periods (`_replica_costs`,
    `summed`), and every capacity row has the shape Σ_c u_kcρ·r[c,k,t] ≤ cap_kρ·x[k,t] — the
    pooled prefill's with cap·g(X)/X for cap too, X the replica bound: its load is at most
    cap·g(x), and g(x)/x never falls, so g(x) ≤ g(X)/X·x below the bound (the chord of §2). So
    for any one resource ρ of each config, each request/s of class c in period t costs at least
    its cheapest colocated config, or its cheapest prefill plus decode configs, priced at
    c_kt·u/cap. ρ is the resource the period's whole demand fills most on k (0 where k has
    none); (each class priced at its own bottleneck would be no bound: classes held by
    different resources share a replica). Which resource that is depends on the prefill's cap,
    and neither choice is always the higher bound, so each period takes the higher of the two.
    None where a class with demand has no configs to carry it. `cols`: `columns(data)`."""
    configs = np.arange(len(data.configs))
    role = cols.roles
    bounds = replica_bound_array(data, cols).astype(np.int64)
    costs = _replica_costs(data, cols, summed=True)
    bound = 0.0
    for t, period in enumerate(data.periods):
        rates = {c.name: c.requests_per_s * period.multiplier for c in data.classes}
        most = bounds[:, t]
        chord = cols.capacity.copy()
        if cols.prefill is not None:
            whole = np.maximum(most, 1)
            chord[:, cols.prefill] *= pooled(cols, configs, whole) / whole
        usable = cols.carries & (most > 0)[:, None]
        priced = [
            _priced(cols, role, rates, costs[:, t], cap, usable) for cap in (cols.capacity, chord)
        ]
        if any(p is None for p in priced):
            return None
        bound += max(priced)
    return bound


def _priced(
    cols: Columns,
    role: np.ndarray,
    rates: dict[str, float],
    costs: np.ndarray,
    capacity: np.ndarray,
    usable: np.ndarray,
) -> float | None:
    """`_arithmetic_bound` of one period, at these capacities and replica costs (`role`: each
    config's)."""
    configs = np.arange(len(role))
    held = np.isfinite(capacity) & (capacity > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        fills = np.where(held, cols.loads(rates) / capacity, -np.inf)
        resource = fills.argmax(axis=1)
        price = np.where(held.any(axis=1), costs / capacity[configs, resource], 0.0)
    cost = np.where(usable, price[:, None] * cols.usage[configs, :, resource], np.inf)
    per_request = cheapest_per_request(cost, role)
    bound = 0.0
    for name, least in zip(rates, per_request, strict=True):
        if not rates[name]:  # a period without demand: no config need carry it
            continue
        if not np.isfinite(least):
            return None
        bound += rates[name] * float(least)
    return bound


def _in_given_indices(incumbent: Incumbent, kept: list[int]) -> Incumbent:
    """The incumbent with its configs indexed in the given program, not the one cut from it."""
    return dataclasses.replace(incumbent, configs=[kept[k] for k in incumbent.configs])


def _alone_start(alone: AlonePlan, kept: list[int]) -> dict[tuple[int, int], int]:
    """The arithmetic plan's replicas, indexed in the program cut by its cost (which keeps its
    configs: each costs no more than the plan)."""
    local = {k: i for i, k in enumerate(kept)}
    return {(local[k], t): n for (k, t), n in alone.replicas.items()}


def _with_broken_orders(data: ProgramData, lp, held: HeldRelaxation) -> ProgramData:
    """The program with the hull rows its LP solution breaks (of configs carrying too many
    classes for every order's row), those rows added to the held LP too: each LP the presolve
    solves anyway finds them, so no LP is solved twice for them."""
    found = broken_hull_orders(lp, data)
    for (k, t), order in found.items():
        for coefs, variables in pool_hull_rows(lp, data, k, t, [order]):
            held.add_row(coefs, variables, 0.0)
    return data.with_hull_orders(found)


def _bound_replicas(held: HeldRelaxation, lp, data: ProgramData, bounds: dict) -> None:
    """The held LP with x[k,t] ≤ these bounds, and the pooling chords drawn to them (§2)."""
    for (k, t), bound in bounds.items():
        upper = stated_bound(bound)
        held.set_upper_bound(lp.x[k, t], INF if upper is None else float(upper))
        if hasattr(lp, "pool_chord") and (k, t) in lp.pool_chord:
            coefficient = chord_coefficient(data.configs[k], bound)
            held.set_coefficient(lp.pool_chord[k, t], lp.x[k, t], coefficient)


def incumbent_start(presolved: Presolved, model: pyo.ConcreteModel) -> ComponentMap:
    """The incumbent's replicas as a start for `model`, the program the presolve left: every
    x[k,t] of it, 0 where the incumbent has none (HiGHS completes the rest)."""
    if presolved.incumbent is None:
        return ComponentMap()
    local = {k: j for j, k in enumerate(presolved.kept)}
    start = ComponentMap((var, 0.0) for var in model.x.values())
    incumbent = presolved.incumbent
    for (i, t), var in incumbent.model.x.items():
        if replicas := round(var.value or 0.0):  # the configs it leaves empty may be dropped
            start[model.x[local[incumbent.configs[i]], t]] = float(replicas)
    return start


def _reduced_cost_bound(lp, relaxation, upper: float, used: dict, caps: np.ndarray):
    """x[k,t] ≤ (U − z)/d[k,t] (LP duality), and the cost bound `caps` (`_cost_caps` of the
    LP's program at U); never below the incumbent's own replicas."""
    slack = upper - relaxation.objective + 1e-6 * max(1.0, abs(upper))

    def proven(k: int, t: int, bound: int) -> int:
        reduced_cost = relaxation.reduced_costs[lp.x[k, t]]
        if reduced_cost > 1e-9:
            bound = min(bound, math.floor(slack / reduced_cost))
        return max(min(bound, int(caps[k, t])), used.get((k, t), 0))

    return proven


def _cut(data: ProgramData, bounds: np.ndarray) -> Presolved:
    """The program with x[k,t] ≤ bounds[k, t] (whole numbers) and the configs bounded at 0 in
    every period dropped. As arrays: a late block of the large benchmark instance cut its
    thousands of configs in every period one by one (docs/benchmarks.md)."""
    kept = np.flatnonzero(bounds.any(axis=1))
    rows = bounds[kept].astype(np.int64).tolist()
    new = {(k, t): b for k, row in zip(kept.tolist(), rows, strict=True) for t, b in enumerate(row)}
    return Presolved(data.restricted(kept.tolist(), new), kept.tolist())


def _cost_caps(costs: np.ndarray, upper: float) -> np.ndarray:
    """[k, t]: x[k,t] ≤ U / (tp·p·w_t), whole: a plan of objective at most U pays at least that
    for them. `costs`: `_replica_costs` of the program."""
    return np.floor(upper * (1 + 1e-9) / costs)


def _restricted(
    data: ProgramData,
    lp: pyo.ConcreteModel | None,
    options: SolveOptions,
    consolidating: set[int],
    spent: ModelSeconds,
    start: dict[tuple[int, int], int] | None = None,
):
    """The program on the configs the LP uses (if it was solved) and the consolidating ones
    (`_consolidating`), solved; None if it has no plan in its share of the time. With `start`
    (the arithmetic plan's replicas), its configs too, and HiGHS starts from it: a plan in
    hand however short the time."""
    start = start or {}
    used = set() if lp is None else {k for (k, _), v in lp.x.items() if (v.value or 0.0) > USED}
    configs = sorted(used | consolidating | {k for k, _ in start})
    built = time.perf_counter()
    model = build_model(data.restricted(configs))
    spent.build += time.perf_counter() - built
    local = {k: i for i, k in enumerate(configs)}
    values = ComponentMap((var, 0.0) for var in model.x.values())
    for (k, t), n in start.items():  # more than the bound only where classes pool (`_alone_plan`)
        values[model.x[local[k], t]] = float(min(n, model.replica_bound[local[k], t]))
    limit = time_share(options, RESTRICTED_TIME_SHARE).time_limit
    limits = [limit]
    if start and limit is not None:  # the start completed, within what is left where it is less
        first = max(limit, min(START_SECONDS, options.time_limit), COMPLETE_SECONDS)
        limits = [first] if first >= START_SECONDS else [first, START_SECONDS]
    for limit in limits:
        solve = dataclasses.replace(options, time_limit=limit, verbose=False)
        outcome = run_highs(model, solve, values if start else None)
        spent.handoff += outcome.seconds - outcome.highs_seconds
        if outcome.objective is not None:
            return Incumbent(model, configs, outcome)
    return None


Cheapest = dict[tuple[str, ...], dict[str, tuple[float, int, int]]]
"""For each group of classes (all of them, each alone, and each model's where the block holds
several: `_groups`), for each role, the config that carries the group alone most cheaply: (its
GPUs' $/h, config index, replicas)."""


def _groups(data: ProgramData) -> tuple[tuple[str, ...], list[tuple[str, ...]]]:
    """All the classes, and each model's where the block holds several models (a config serves
    one model, so no config carries all of them): the groups one config may carry whole."""
    names = tuple(c.name for c in data.classes)
    by_model: dict[str, tuple[str, ...]] = {}
    for c in data.classes:
        by_model[c.model] = (*by_model.get(c.model, ()), c.name)
    return names, list(by_model.values()) if len(by_model) > 1 else [names]


def _cheapest_by_period(
    data: ProgramData,
    cols: Columns,
    on: str | None = None,
    groups: list[tuple[str, ...]] | None = None,
) -> list[Cheapest]:
    """`Cheapest` in each period: the arithmetic plan is made of these configs, and the
    restricted program consolidates on them; computed once for both, every config of the block
    at once (the larger share of a block's time where the LP is skipped). Of configs that cost
    the same, the first. `on`: of the configs on that GPU type only. `groups`: these groups
    only (each in the block's class order), not all, each alone and each model's."""
    if groups is None:
        names, models = _groups(data)
        groups = list(dict.fromkeys([names, *((n,) for n in names), *models]))
    tp, gpu_price, role = cols.tp, gpu_prices(data, cols), cols.roles
    within = np.full(len(role), True) if on is None else cols.gpus == on
    roles = {r: (role == r) & within for r in dict.fromkeys(role.tolist())}
    rates = [{c.name: c.requests_per_s * p.multiplier for c in data.classes} for p in data.periods]
    cheapest: list[Cheapest] = [{} for _ in data.periods]
    for group in groups:
        carriers = cols.carriers(group)
        configs = carriers.configs
        each = [{c: rate[c] for c in group} for rate in rates]
        for by_group, replicas in zip(
            cheapest, replicas_alone_each(carriers.cols, each), strict=True
        ):
            cost = replicas * tp[configs] * gpu_price[configs]
            best = by_group[group] = {}
            for name, mine in roles.items():
                options = np.flatnonzero(mine[configs])
                if options.size:
                    i = int(options[np.argmin(cost[options])])
                    best[name] = (float(cost[i]), int(configs[i]), int(replicas[i]))
    return cheapest


def _consolidating(cheapest: Cheapest, kept: list[int], scaled: frozenset[int]) -> set[int]:
    """The configs that carry each class, and all classes together, most cheaply alone in the
    first period, and those the group's scaled LP uses (its chords drawn to the pools of the
    period that sets the block's level), indexed in the program cut to `kept` (one the cut
    drops is in no plan the restricted program could want): pooling rewards one large pool
    where the block's LP spreads demand over many small ones. The scaled LP's alone make no
    better plan; with the cheapest alone, 2.3% cheaper ones where the block has no time for
    its LP (docs/benchmarks.md)."""
    local = {k: i for i, k in enumerate(kept)}
    found = {k for best in cheapest.values() for _, k, _ in best.values()} | scaled
    return {local[k] for k in found if k in local}


def _on_each_gpu(data: ProgramData, cols: Columns, kept: list[int]) -> set[int]:
    """`_consolidating`'s configs on each GPU type in turn. Where availability caps leave no
    arithmetic plan, the configs the LP uses may round to no plan within the caps either (the
    LP's fractions fit where whole replicas do not), and the restricted program needs configs
    of other GPU types to take what a capped type cannot hold. Of the first period, as
    `_consolidating` takes them: the others' are not computed."""
    first = dataclasses.replace(data, periods=data.periods[:1])
    picks = (_cheapest_by_period(first, cols, gpu.name)[0] for gpu in data.gpus)
    return set().union(*(_consolidating(pick, kept, frozenset()) for pick in picks))


def _alone_plan(
    data: ProgramData,
    cheapest: list[Cheapest] | None = None,
    partitions: list[list[tuple[str, ...]]] | None = None,
) -> AlonePlan | None:
    """A plan found by arithmetic alone: in every period, every class on the config that carries
    it alone most cheaply (colocated, or a prefill and a decode config), or each model's classes
    together on one such config or pair, or each model the cheaper of the two (`_partitions`),
    whichever is cheapest; paid on demand, in whole nodes. None where it breaks an availability
    cap or the budget (then it is no plan). Replicas of one config that carry several classes
    carry their sum: pooling only helps (g is superadditive). `cheapest`:
    `_cheapest_by_period`, where the caller has it; `partitions`: these ways of grouping the
    classes only (their groups in `cheapest`)."""
    if cheapest is None:
        cheapest = _cheapest_by_period(data, columns(data))
    models = _groups(data)[1]
    markets = {g.name: g for g in data.gpus}
    objective = 0.0
    replicas: dict[tuple[int, int], int] = {}
    for t, period in enumerate(data.periods):
        pick = {group: _cheapest_option(alone) for group, alone in cheapest[t].items()}
        best = None
        for groups in _partitions(models, pick) if partitions is None else partitions:
            if any(pick[group] is None for group in groups):
                continue
            plan: dict[int, int] = {}
            for group in groups:
                for _, k, n in pick[group]:
                    plan[k] = plan.get(k, 0) + n
            gpus: dict[str, int] = {}
            for k, n in plan.items():
                gpus[data.configs[k].gpu] = (
                    gpus.get(data.configs[k].gpu, 0) + n * data.configs[k].tp
                )
            for g, n in gpus.items():
                size = markets[g].gpus_per_node or 1
                gpus[g] = math.ceil(n / size) * size
                if markets[g].max_gpus is not None and gpus[g] > markets[g].max_gpus:
                    plan = None
            if plan is None:
                continue
            cost = sum(markets[g].price_per_gpu_hour * n for g, n in gpus.items())
            size = sum(gpus.values()) + sum(plan.values())
            value = cost + GPU_COUNT_TIE_BREAK * size
            if best is None or value < best[0]:
                best = (value, plan)
        if best is None:
            return None
        objective += period.hours * best[0] / data.total_hours
        replicas |= {(k, t): n for k, n in best[1].items() if n}  # none in a period of no demand
    if data.budget_per_hour is not None and objective > data.budget_per_hour:
        return None
    return AlonePlan(objective, replicas)


Option = list[tuple[float, int, int]]
"""A group's replicas in `_alone_plan`: one colocated config's, or a prefill and a decode
config's (each as in `Cheapest`)."""


def _cheapest_option(alone: dict[str, tuple[float, int, int]]) -> Option | None:
    """The group on its cheapest colocated config, or its cheapest prefill plus decode configs,
    whichever costs less; None where neither carries it."""
    pair = [alone[r] for r in ("prefill", "decode") if r in alone]
    options = ([[alone["colocated"]]] if "colocated" in alone else []) + (
        [pair] if len(pair) == 2 else []
    )
    return min(options, key=lambda o: sum(p[0] for p in o), default=None)


def _partitions(
    models: list[tuple[str, ...]], pick: dict[tuple[str, ...], Option | None]
) -> list[list[tuple[str, ...]]]:
    """The ways `_alone_plan` weighs of splitting the classes into groups, each on its cheapest
    option: each model's classes together (alone where no config carries them all), every
    class alone, and each model the cheaper of the two before whole nodes. Classes of one model
    share a config's pool; on a block of several models (throughput mode keeps them all in one)
    all classes together is no option, and each alone was the only plan: 0.72 against 0.85 of
    the demand for the same budget on the large benchmark instance (docs/benchmarks.md)."""

    def alone(model: tuple[str, ...]) -> list[tuple[str, ...]]:
        return [(name,) for name in model]

    def together(model: tuple[str, ...]) -> list[tuple[str, ...]]:
        return [model] if pick[model] is not None else alone(model)

    def cheaper(model: tuple[str, ...]) -> list[tuple[str, ...]]:
        ways = [w for w in (together(model), alone(model)) if all(pick[g] is not None for g in w)]
        return min(ways, key=lambda w: sum(p[0] for g in w for p in pick[g]), default=alone(model))

    return [
        [group for model in models for group in way(model)] for way in (together, alone, cheaper)
    ]


def _replica_costs(data: ProgramData, cols: Columns, summed: bool = False) -> np.ndarray:
    """[k, t]: the least a replica of config k in period t adds to the objective, its GPUs'
    price at `price_weights` (`summed`: weights that bound a fleet's cost summed over periods).
    Once per program, as an array: the cuts and the arithmetic bound weigh every config in
    every period."""
    return replica_prices(data, cols).reshape(-1, 1) * price_weights(data, summed)
