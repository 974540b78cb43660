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
Independent blocks).

The LP is assembled from the coefficient arrays the presolve's arithmetic reads
(`sizing.columns`: every capacity row is Σ_c u_kcρ·r[c,k] ≤ cap_kρ·x[k]), not built in Pyomo:
on the large benchmark instance's 7,459-config model, building and handing it off took 3 s,
and HiGHS 2 s. tests/test_scaled_bound.py checks it against `build_model(relaxed=True)` so reduced.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fleetopt.formulation.data import GPU_COUNT_TIE_BREAK, ProgramData
from fleetopt.formulation.prefill import chord_coefficient
from fleetopt.formulation.sizing import Columns, replica_prices, replicas_alone
from fleetopt.perf.operating_point import PREFILL
from fleetopt.perf.queueing import NO_QUEUEING
from fleetopt.presolve import USED
from fleetopt.solve import SolveOptions, solve_lp

Entries = tuple[np.ndarray, np.ndarray, np.ndarray]
"""A sparse matrix's (row, column, value) triplets."""


@dataclass(frozen=True)
class ScaledLp:
    """The LP's optimum at multiplier 1, and the configs its solution uses."""

    per_multiplier: float
    """V₁: m_t·V₁ bounds period t's block."""
    used: frozenset[int]
    """Configs with x > 0 (the same at every multiplier): a block started once they are known
    consolidates on them (`presolve._consolidating`)."""


def scaled_lp(data: ProgramData, cols: Columns, options: SolveOptions) -> ScaledLp | None:
    """The LP for every period of `data` (a group's block; its periods' multipliers set the
    busiest), at multiplier 1. None where HiGHS does not prove its optimum within the time
    limit.

    Columns: x[k] for every config, then r[c,k] for every pair that may carry (`carries`).
    Rows: coverage (prefill then decode, one per class, = λ_c), then one per (k, ρ) that a
    class uses: Σ_c u_kcρ·r[c,k] − cap_kρ·x[k] ≤ 0."""
    count, classes = len(data.configs), len(data.classes)
    routes = np.argwhere(cols.carries)  # (k, c) of each r column, in order
    route = np.full(cols.carries.shape, -1, dtype=np.int64)
    route[routes[:, 0], routes[:, 1]] = count + np.arange(len(routes))
    rates = np.array([c.requests_per_s for c in data.classes], dtype=float)
    busiest = max(period.multiplier for period in data.periods)
    capacity = _chord_capacities(data, cols, busiest * rates)
    covering = _coverage(data, routes, route)
    limiting, rows = _capacity(cols, capacity, route, 2 * classes)
    entries = tuple(np.concatenate(pair) for pair in zip(covering, limiting, strict=True))
    tp = np.array([config.tp for config in data.configs], dtype=float)
    cost = np.zeros(count + len(routes))
    cost[:count] = replica_prices(data) + GPU_COUNT_TIE_BREAK * (tp + 1.0)
    demand = np.tile(rates, 2)  # the prefill rows, then the decode rows
    lower = np.concatenate([demand, np.full(rows, -np.inf)])
    upper = np.concatenate([demand, np.zeros(rows)])
    optimum = solve_lp(cost, lower, upper, entries, options)
    if optimum is None:
        return None
    objective, values = optimum
    return ScaledLp(objective, frozenset(np.flatnonzero(values[:count] > USED).tolist()))


def _chord_capacities(data: ProgramData, cols: Columns, rates: np.ndarray) -> np.ndarray:
    """[k, ρ]: each replica's capacities, the pooled prefill's at the chord to the replica
    bound at these requests/s (`chord_coefficient`, as `pool_chord`)."""
    capacity = cols.capacity.copy()
    if cols.prefill is None:
        return capacity
    bounds = replicas_alone(
        cols, {c.name: rate for c, rate in zip(data.classes, rates, strict=True)}
    )
    for k, config in enumerate(data.configs):
        if config.queue != NO_QUEUEING and PREFILL in config.capacity:
            capacity[k, cols.prefill] = -chord_coefficient(config, int(bounds[k]))
    return capacity


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
) -> tuple[Entries, int]:
    """Σ_c u_kcρ·r[c,k] − cap_kρ·x[k] ≤ 0 for every (k, ρ) that a class uses, numbered from
    `first`; and how many."""
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
    return entries, int(held.sum())
