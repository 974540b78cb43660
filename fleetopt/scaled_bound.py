"""One LP that bounds every period of a group of models: what a period's block answers by
arithmetic (short of time) otherwise bounds only by arithmetic, 10-25% below its LP.

Without price tiers, a budget or the throughput objective, a group of models is one block per
period (formulation/blocks.py), and the blocks differ only in their demand multiplier m_t.
Their LP relaxation, less what depends on the demand — the replica bounds on x, the pooling
hull rows and the GPU caps, all dropped — with every pooling chord drawn to the replica bound of
the busiest period, is a relaxation of every period's block (the chord's slope g(X)/X never
falls as X grows, and X grows with the demand). Every row left is homogeneous in (r, x) and the
demand enters only the coverage rows, so its optimum at multiplier m is m·V₁, with V₁ its
optimum at multiplier 1: one LP, and m_t·V₁ bounds period t's block (docs/formulation.md,
Independent blocks). With the chords drawn to a quieter period's replica bounds instead, the
same LP bounds every period at or below that one, more tightly: it is solved again at a few
such levels (`LEVEL_RATIO`), and each period takes the tightest.

The LP is assembled from the coefficient arrays the presolve's arithmetic reads
(`sizing.columns`: every capacity row is Σ_c u_kcρ·r[c,k] ≤ cap_kρ·x[k]), not built in Pyomo:
on the large benchmark instance's 7,459-config model, building and handing it off took 3 s,
and HiGHS 2 s. It is solved on the configs that may pay at its duals (`GeneratedLp`; the same
model's LP: 4.7 s whole, 0.25 s so). tests/test_scaled_bound.py checks it against
`build_model(relaxed=True)` so reduced.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

import numpy as np

from fleetopt.formulation.blocks import cut_block
from fleetopt.formulation.data import GPU_COUNT_TIE_BREAK, ProgramData
from fleetopt.formulation.prefill import HULL_TOLERANCE, chord_coefficient, hull_rows
from fleetopt.formulation.sizing import (
    Columns,
    columns,
    cost_per_request,
    price_weights,
    replica_prices,
    replicas_alone,
)
from fleetopt.generated_lp import Entries, GeneratedLp
from fleetopt.perf.operating_point import PREFILL
from fleetopt.perf.queueing import NO_QUEUEING
from fleetopt.solve import USED, SolveOptions

HULL_ROUNDS = 5
"""Rounds of pooling hull rows each level of the scaled LP gets (`_hull_cuts`), each from the
last solution, while a round raises its optimum by at least HULL_GAIN of it."""
HULL_GAIN = 1e-3
"""The least share of a level's optimum a round of hull rows must add for another to follow."""
SCALE_BOUND_STEP = 0.005
"""`scale_bound` tries again at the scale it found while the last try took its bound down by
more than this share of it."""
LEVEL_RATIO = 0.85
"""A new level of chords wherever a period's demand falls below this share of the last level's
(periods taken busiest first). On the scale benchmark's large instance (24 periods, 0.30-0.98
of the peak): 6 levels a model, and the bounds of the 138 blocks answering by arithmetic 11.6%
below their plans, against 13.4% with one level and 11.3% with a level per period; each level
after the first a warm re-solve of hundredths of a second (docs/benchmarks.md)."""


@dataclass(frozen=True)
class Level:
    """The LP with every chord drawn to the replica bounds of one period's demand."""

    multiplier: float
    """That period's: the level bounds every period at or below it."""
    per_multiplier: float
    """V₁ at these chords: m·V₁ bounds a period of multiplier m ≤ `multiplier`."""
    used: frozenset[int]
    """Configs with x > 0 (the same at every multiplier the level bounds): a block started
    once they are known consolidates on them (`presolve._consolidating`)."""


@dataclass(frozen=True)
class ScaledLp:
    """The levels solved within the time limit, the busiest first."""

    levels: tuple[Level, ...]

    def at(self, multiplier: float) -> Level:
        """The tightest level that bounds a period of this multiplier: the last one at or
        above it (the busiest bounds every period)."""
        return [level for level in self.levels if level.multiplier >= multiplier][-1]


def scaled_lp(
    data: ProgramData, cols: Columns, options: SolveOptions, tie_break: bool = True
) -> ScaledLp | None:
    """The LP for every period of `data` (a group's block) at multiplier 1, its chords drawn
    at each level in turn (`level_multipliers`), on the configs that may pay (`_earns`), then
    each level again with the pooling hull's rows it breaks (`_hull_cuts`); the levels solved
    before the time limit, or None where not even the busiest is. Priced as the cost
    objective, GPU_COUNT_TIE_BREAK included, or without it (`tie_break`): the cost a budget
    holds.

    Columns: x[k] for every config, then r[c,k] for every pair that may carry (`carries`).
    Rows: coverage (prefill then decode, one per class, = λ_c), then one per (k, ρ) that a
    class uses: Σ_c u_kcρ·r[c,k] − cap_kρ·x[k] ≤ 0."""
    deadline = None if options.time_limit is None else time.monotonic() + options.time_limit
    count, classes = len(data.configs), len(data.classes)
    routes = np.argwhere(cols.carries)  # (k, c) of each r column, in order
    route = np.full(cols.carries.shape, -1, dtype=np.int64)
    route[routes[:, 0], routes[:, 1]] = count + np.arange(len(routes))
    rates = np.array([c.requests_per_s for c in data.classes], dtype=float)
    multipliers = level_multipliers([period.multiplier for period in data.periods])
    capacity = cols.capacity.copy()
    pooled = _pooled(data, cols)
    first_chords = np.zeros(0)
    if len(pooled):
        first_chords = _chords(data, cols, pooled, multipliers[0] * rates)
        capacity[pooled, cols.prefill] = -first_chords
    else:  # no chord: one level, the same at every demand
        multipliers = multipliers[:1]
    covering = _coverage(data, routes, route)
    limiting, row = _capacity(cols, capacity, route, 2 * classes)
    entries = tuple(np.concatenate(pair) for pair in zip(covering, limiting, strict=True))
    tp = cols.tp.astype(float)
    price = replica_prices(data, cols)
    if tie_break:
        price += GPU_COUNT_TIE_BREAK * (tp + 1.0)
    demand = np.tile(rates, 2)  # the prefill rows, then the decode rows
    rows = int((row >= 0).sum())
    if len(pooled):
        held = row[pooled, cols.prefill] >= 0  # those whose row a class uses
        pooled, first_chords = pooled[held], first_chords[held]
    sides = np.array([[c.op.does_prefill, c.op.does_decode] for c in data.configs], dtype=float)

    def pays(duals: np.ndarray) -> np.ndarray:
        worth = sides @ np.maximum(duals.reshape(2, classes), 0.0)  # [k, c]
        return _earns(cols, capacity, worth) > price * (1 + 1e-9)

    lp = GeneratedLp(
        np.concatenate([price, np.zeros(len(routes))]),
        np.concatenate([demand, np.full(rows, -np.inf)]),
        np.concatenate([demand, np.zeros(rows)]),
        entries,
        np.concatenate([np.arange(count), routes[:, 0]]),
        2 * classes,
        pays,
        _cheapest_alone(cols, capacity, price, sides),
    )

    drawn = {multipliers[0]: first_chords}

    def draw_chords(multiplier: float) -> None:
        if multiplier not in drawn:
            drawn[multiplier] = _chords(data, cols, pooled, multiplier * rates)
        chords = drawn[multiplier]
        capacity[pooled, cols.prefill] = -chords
        lp.set_coefficients(row[pooled, cols.prefill], pooled, chords)

    def solve() -> tuple[float, np.ndarray] | None:
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            return None
        return lp.solve(dataclasses.replace(options, time_limit=left))

    levels: list[Level] = []
    for multiplier in multipliers:
        if levels:
            draw_chords(multiplier)
        if (optimum := solve()) is None:
            break
        objective, values = optimum
        used = frozenset(np.flatnonzero(values[:count] > USED).tolist())
        levels.append(Level(multiplier, objective, used))
    # Each level again with the pooling hull's rows its solution breaks: a higher bound, the
    # configs used kept from the LP without them (blocks consolidating on the configs of an LP
    # with them did worse: docs/benchmarks.md, 2026-12-06).
    for i, level in enumerate(levels if len(pooled) else []):
        draw_chords(level.multiplier)
        objective = level.per_multiplier
        for round_ in range(HULL_ROUNDS):
            if (optimum := solve()) is None:
                break
            raised = optimum[0] >= objective * (1 + HULL_GAIN)
            objective = max(objective, optimum[0])
            cuts = _hull_cuts(data, cols, optimum[1], route, rates, level.multiplier)
            if cuts is None or (round_ and not raised):
                break
            lp.add_rows(*cuts)
        levels[i] = dataclasses.replace(level, per_multiplier=objective)
    return ScaledLp(tuple(levels)) if levels else None


def scale_bound(data: ProgramData, high: float, options: SolveOptions) -> float | None:
    """Throughput mode: a scale of the demand no fleet within the budget serves, by the scaled
    LP of each model at `high` times the demand (`_bound_at`); None where it proves none below
    `high` or is not solved in time. Then again at each scale it finds, while that takes the
    bound down by more than SCALE_BOUND_STEP: its chords drawn to the replica bounds of less
    demand and its hull rows to less load, the LP there costs more a unit of demand (the large
    benchmark instance, from twice the affordable scale: 1.082, 1.060, 1.058 of its demand
    without the hull rows, 0.7 s a round; 1.034 with them, about 2.4 s a round)."""
    deadline = None if options.time_limit is None else time.monotonic() + options.time_limit
    bound = None
    while (found := _bound_at(data, high, options, deadline)) is not None:
        bound, high, last = found, found, high
        if found > last * (1 - SCALE_BOUND_STEP):
            break
    return bound


def _bound_at(
    data: ProgramData, high: float, options: SolveOptions, deadline: float | None
) -> float | None:
    """A scale below `high` that no fleet within the budget serves, or None.

    Within the LP's reach a fleet that serves scale α ≤ high at least cost has, on each config,
    no more replicas than carry all its eligible demand at `high` alone (fewer carry its
    routes), so each model's scaled LP at `high`·λ bounds it: a period of multiplier m costs at
    least (α/high)·m·V₁ at its level: its routes and replicas times high/α meet the LP at
    high, its hull rows too (h(high·D)/high ≤ h(α·D)/α, h concave with h(0) = 0). Its GPUs are
    priced on demand and weighed by `price_weights` summed over periods, so cost(α) ≥
    (α/high)·Σ_t y_t·m_t·V₁(t) — linear in α, and past the budget above
    high·B / Σ_t y_t·m_t·V₁(t); a fleet that serves more than `high` serves `high` too (its
    routes scaled down). Models apart: one LP of all six models of the
    large benchmark instance took 27 s to solve, the six alone 7 s in all (0.7 s each
    generated from the configs that pay, `GeneratedLp`)."""
    program = data.at_scale(high)
    multipliers = [period.multiplier for period in program.periods]
    periods = list(range(len(multipliers)))
    per_period = np.zeros(len(multipliers))
    for model in dict.fromkeys(c.model for c in program.classes):
        block = cut_block(program, frozenset({model}), periods).data
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            return None
        lp = scaled_lp(
            block, columns(block), dataclasses.replace(options, time_limit=left), tie_break=False
        )
        if lp is None:
            return None
        per_period += [m * lp.at(m).per_multiplier for m in multipliers]
    at_high = float(price_weights(program, summed=True) @ per_period)
    budget = data.budget_per_hour
    return high * budget / at_high if at_high > budget else None


def level_multipliers(multipliers: list[float]) -> list[float]:
    """The busiest period's multiplier, then, going down, each period's that falls below
    LEVEL_RATIO of the last taken."""
    levels: list[float] = []
    for multiplier in sorted(set(multipliers), reverse=True):
        if not levels or multiplier < LEVEL_RATIO * levels[-1]:
            levels.append(multiplier)
    return levels


def _pooled(data: ProgramData, cols: Columns) -> np.ndarray:
    """The configs whose prefill pools (queueing bites): those with a chord."""
    if cols.prefill is None:
        return np.array([], dtype=np.int64)
    pooled = [
        k
        for k, config in enumerate(data.configs)
        if config.queue != NO_QUEUEING and PREFILL in config.capacity
    ]
    return np.array(pooled, dtype=np.int64)


def _chords(data: ProgramData, cols: Columns, pooled: np.ndarray, rates: np.ndarray) -> np.ndarray:
    """The coefficient of x in each pooled config's prefill row at the chord to its replica
    bound at these requests/s (`chord_coefficient`, as `pool_chord`): −(what one replica
    carries)."""
    bounds = replicas_alone(
        cols, {c.name: rate for c, rate in zip(data.classes, rates, strict=True)}
    )
    chords = [chord_coefficient(data.configs[k], int(bounds[k])) for k in pooled.tolist()]
    return np.array(chords, dtype=float)


def _coverage(data: ProgramData, routes: np.ndarray, route: np.ndarray) -> Entries:
    """Σ_{k does prefill} r[c,k] and Σ_{k does decode} r[c,k]: rows c and C + c."""
    classes = len(data.classes)
    k, c = routes[:, 0], routes[:, 1]
    prefills = np.array([config.op.does_prefill for config in data.configs])[k]
    decodes = np.array([config.op.does_decode for config in data.configs])[k]
    rows = np.concatenate([c[prefills], classes + c[decodes]])
    columns = np.concatenate([route[k, c][prefills], route[k, c][decodes]])
    return rows, columns, np.ones(len(rows))


def _capacity(
    cols: Columns, capacity: np.ndarray, route: np.ndarray, first: int
) -> tuple[Entries, np.ndarray]:
    """Σ_c u_kcρ·r[c,k] − cap_kρ·x[k] ≤ 0 for every (k, ρ) that a class uses, numbered from
    `first`; and the row of each (k, ρ) (−1 where none)."""
    used = cols.carries[:, :, None] & np.isfinite(capacity)[:, None, :] & (cols.usage != 0)
    held = used.any(axis=1)
    row = np.full(held.shape, -1, dtype=np.int64)
    row[held] = first + np.arange(int(held.sum()))
    k, c, resource = np.nonzero(used)
    held_k, held_resource = np.nonzero(held)
    entries = (
        np.concatenate([row[k, resource], row[held_k, held_resource]]),
        np.concatenate([route[k, c], held_k]),
        np.concatenate([cols.usage[k, c, resource], -capacity[held_k, held_resource]]),
    )
    return entries, row


def _hull_cuts(
    data: ProgramData,
    cols: Columns,
    values: np.ndarray,
    route: np.ndarray,
    rates: np.ndarray,
    multiplier: float,
) -> tuple[np.ndarray, Entries] | None:
    """The pooling hull's rows (docs/formulation.md §2) that the solution `values` breaks, drawn
    at this level's multiplier M: for each config of a curved pool that carries some load, the
    row of its classes ordered by share routed (the order that attains the Lovász extension),
    where x falls short of it. In the LP's units (demand at multiplier 1, a period of
    multiplier m ≤ M scaled by 1/m) the row of period m, divided by m, reads
    x ≥ Σ_i (h(m·D_{S_i}) − h(m·D_{S_{i−1}}))/m · r[π_i]/λ_{π_i}; h is concave with h(0) = 0, so
    h(M·D)/M ≤ h(m·D)/m for every set, and the Lovász extension with the values at M is below
    the one at m: the row at M holds at every period it bounds. As (upper, entries) for
    `GeneratedLp.add_rows`, or None where none is broken."""
    if multiplier <= 0:  # no demand at this level: no pool to pay for
        return None
    routed = ((route >= 0) & (values[route] > USED)).any(axis=1)
    rows, columns, coefs, upper = [], [], [], []
    for k in np.flatnonzero(routed).tolist():
        config = data.configs[k]
        if config.queue == NO_QUEUEING or PREFILL not in config.capacity or config.queue.linear:
            continue
        index = {name: cols.classes[name] for name in config.usage}
        share = {name: values[route[k, c]] / rates[c] for name, c in index.items() if rates[c]}
        loads = {
            name: multiplier * rates[c] * config.usage[name][PREFILL] / config.capacity[PREFILL]
            for name, c in index.items()
        }
        order = tuple(sorted(loads, key=lambda name: -share.get(name, 0.0)))
        ((_, rises),) = hull_rows(config.queue, loads, [order])
        need = sum(
            a / multiplier * share.get(name, 0.0) for name, a in zip(order, rises, strict=True)
        )
        if need <= values[k] + HULL_TOLERANCE * max(1.0, need):
            continue
        row = len(upper)
        upper.append(0.0)
        for name, a in zip(order, rises, strict=True):
            if name in share:
                rows.append(row)
                columns.append(route[k, index[name]])
                coefs.append(a / (multiplier * rates[index[name]]))
        rows.append(row)
        columns.append(k)
        coefs.append(-1.0)
    if not rows:
        return None
    return np.array(upper), (np.array(rows), np.array(columns), np.array(coefs))


def _earns(cols: Columns, capacity: np.ndarray, worth: np.ndarray) -> np.ndarray:
    """[k]: at most what one replica of each config earns, routes worth `worth[k, c]` a
    request/s (the coverage rows' duals): the least over its resources ρ of cap_kρ·max_c
    worth_kc/u_kcρ, what ρ alone would let it carry of the classes it may carry. The dual of
    that one row (π_ρ = max_c worth/u, the others 0) prices every route at least at its worth,
    so the config lowers the objective only where this passes its price."""
    worth = np.where(cols.carries, worth, 0.0)[:, :, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        per_unit = np.where(cols.usage > 0, worth / cols.usage, np.where(worth > 0, np.inf, 0.0))
        earned = per_unit.max(axis=1) * capacity  # inf where ρ is not a resource of k
    return np.where(np.isnan(earned), np.inf, earned).min(axis=1)


def _cheapest_alone(
    cols: Columns, capacity: np.ndarray, price: np.ndarray, sides: np.ndarray
) -> np.ndarray:
    """The configs the generated LP starts from: for each class and side (prefill, decode), the
    one that carries it alone most cheaply a request/s (where any does)."""
    per_request = cost_per_request(cols, price, capacity)
    start = np.zeros(len(price), dtype=bool)
    for side in sides.T.astype(bool):
        costs = np.where(side[:, None], per_request, np.inf)
        cheapest = costs.argmin(axis=0)
        start[cheapest[np.isfinite(costs.min(axis=0))]] = True
    return start
