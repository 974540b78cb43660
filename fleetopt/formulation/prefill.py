"""§2 prefill capacity, with the pooling curve where queueing bites (and measured capacity)."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator

import pyomo.core as pyo

from fleetopt.configs import Config
from fleetopt.formulation.data import ProgramData
from fleetopt.formulation.resources import add_resource_rows
from fleetopt.formulation.rows import add_rows, linear
from fleetopt.perf.operating_point import PREFILL, PROFILE
from fleetopt.perf.queueing import NO_QUEUEING, PoolCurve

HULL_MAX_CLASSES = 4
"""Configs carrying at most this many classes get every order's `pool_hull` row (C! of them);
those carrying more, the orders an LP solution broke (`broken_hull_orders`)."""
HULL_TOLERANCE = 1e-6
"""How far, relative, a solution must fall below a hull row for its order to be added."""


def add_prefill_capacity(m: pyo.ConcreteModel, data: ProgramData, expand: bool = True) -> None:
    """Σ_c r[c,k,t]·L_c·p_k(L_c) ≤ (u·R_k/τ_k)·g_k(x[k,t]) — prompt compute fits the chunk
    reserve at the ceiling u, scaled by the pooling curve g_k (g(n) = n where queueing does not
    bite); and Σ_c r[c,k,t]/μ_kc ≤ x[k,t] for configs sized by a measured table. Without
    `expand`, the pooling curves are held by their chords only (the LP relaxation)."""
    plain = [k for k, config in enumerate(data.configs) if config.queue == NO_QUEUEING]
    add_resource_rows(m, data, "prefill_capacity", (PREFILL, PROFILE), configs=plain)
    add_pooling(m, data, [k for k in m.K if k not in set(plain)], expand)


def add_pooling(
    m: pyo.ConcreteModel, data: ProgramData, configs: list[int], expand: bool = True
) -> None:
    """The chord of g_k for the configs where queueing bites, and the incremental expansion
    (DESIGN §6.2) for those whose curve is not linear:

        load[k,t] ≤ (u·R_k/τ_k)·(g(X_k)/X_k)·x[k,t],
        x[k,t] = Σ_{j≤N} fill[k,j,t] + beyond[k,t],  fill[k,j,t] ≥ fill[k,j+1,t],
        beyond[k,t] ≤ (X_k − N)·fill[k,N,t],
        load[k,t] ≤ (u·R_k/τ_k)·(Σ_j Δ_j·fill[k,j,t] + Δ_N·beyond[k,t])

    with Δ_j = f(j)/u − f(j−1)/u: the j-th replica counts only once the first j−1 do, and
    replicas beyond N at the last marginal rate, no more than they add since f is convex. The
    first row is the chord of g = min(n, f/u) over [0, X_k]: it holds the ceiling g(n) ≤ n, and
    since g(n)/n never falls it cuts no integer point while bounding the LP relaxation; where g
    is linear (g(n) = Δ_1·n) it is exact alone. N is the smallest size from which the tail stays
    within 1% of g (perf/queueing.py), at most the replica bound X_k (so `beyond` is then 0)."""
    if not configs:
        return
    chord = {}
    for k in configs:
        config = data.configs[k]
        users = [(c, use[PREFILL]) for c, use in config.usage.items()]
        for t in m.T:
            coefs = [u for _, u in users] + [chord_coefficient(config, m.replica_bound[k, t])]
            chord[k, t] = (None, linear(coefs, [*(m.r[c, k, t] for c, _ in users), m.x[k, t]]), 0.0)
    add_rows(m, "pool_chord", chord)
    expanded = [k for k in configs if not data.configs[k].queue.linear]
    add_pool_hull(m, data, expanded)
    if expanded and expand:
        _add_expansion(m, data, expanded)


def chord_coefficient(config: Config, bound: int) -> float:
    """The coefficient of x[k,t] in `pool_chord`: −(u·R_k/τ_k)·g(X)/X, with X the replica
    bound (any slope for X = 0, where x is 0)."""
    slope = config.queue.load(bound) / bound if bound else 1.0
    return -config.capacity[PREFILL] * slope


def _add_expansion(m: pyo.ConcreteModel, data: ProgramData, configs: list[int]) -> None:
    """The fill/beyond variables and the last four rows of add_pooling."""
    steps = {}
    for k in configs:
        bound = max(m.replica_bound[k, t] for t in m.T)
        steps[k] = max(1, min(len(data.configs[k].queue.increments), bound))
    fills = [(k, j, t) for k in configs for j in range(1, steps[k] + 1) for t in m.T]
    m.fill = pyo.Var(fills, domain=pyo.Binary)
    m.beyond = pyo.Var(configs, m.T, domain=pyo.NonNegativeIntegers)
    split, order, beyond, pooled = {}, {}, {}, {}
    for k in configs:
        config, n = data.configs[k], steps[k]
        users = [(c, use[PREFILL]) for c, use in config.usage.items()]
        cap, curve = config.capacity[PREFILL], config.queue
        load = [u for _, u in users]
        carried = [-cap * curve.increments[j - 1] for j in range(1, n + 1)] + [
            -cap * curve.tail_rate
        ]
        for t in m.T:
            fill = [m.fill[k, j, t] for j in range(1, n + 1)]
            split[k, t] = (
                0.0,
                linear([1.0] + [-1.0] * (n + 1), [m.x[k, t], *fill, m.beyond[k, t]]),
                0.0,
            )
            for j in range(1, n):
                order[k, j, t] = (0.0, linear([1.0, -1.0], [fill[j - 1], fill[j]]), None)
            bound = m.replica_bound[k, t]
            beyond[k, t] = (
                None,
                linear([1.0, -float(max(0, bound - n))], [m.beyond[k, t], fill[-1]]),
                0.0,
            )
            routed = [m.r[c, k, t] for c, _ in users]
            pooled[k, t] = (None, linear(load + carried, [*routed, *fill, m.beyond[k, t]]), 0.0)
    add_rows(m, "pool_split", split)
    add_rows(m, "pool_order", order)
    add_rows(m, "pool_beyond", beyond)
    add_rows(m, "prefill_pooled", pooled)


def add_pool_hull(m: pyo.ConcreteModel, data: ProgramData, configs: list[int]) -> None:
    """The pooling curve's hull over the classes a config carries, one row per order π of them:

        x[k,t] ≥ Σ_i (h(D_{S_i}) − h(D_{S_{i−1}})) · r[π_i,k,t] / (m_t·λ_{π_i})

    (`hull_rows`): every order where the config carries at most HULL_MAX_CLASSES classes, else
    the orders in `data.hull_orders`. Where the chord lets the LP credit part of a class with
    the pool of all its classes' demand, these rows charge what a pool of the demand actually
    routed needs. Cost mode only: throughput mode scales the demand by alpha, and a routed
    share may pass 1."""
    if data.maximize_throughput:
        return
    rows = {}
    for k in configs:
        for t in m.T:
            for i, (coefs, variables) in enumerate(
                pool_hull_rows(m, data, k, t, _orders(data, k, t))
            ):
                rows[k, t, i] = (None, linear(coefs, variables), 0.0)
    add_rows(m, "pool_hull", rows)


def pool_hull_rows(
    m: pyo.ConcreteModel, data: ProgramData, k: int, t: int, orders: list[tuple[str, ...]]
) -> list[tuple[list[float], list]]:
    """The `pool_hull` rows of config k in period t for these orders, as (coefficients,
    variables) of Σ_i a_i·r[π_i,k,t]/(m_t·λ_{π_i}) − x[k,t] ≤ 0."""
    if not orders:
        return []
    demand, loads = _hull_loads(data, k, t)
    rows = []
    for order, shares in hull_rows(data.configs[k].queue, loads, orders):
        coefs = [
            s / demand[c] if demand[c] > 0 else 0.0 for c, s in zip(order, shares, strict=True)
        ]
        rows.append(([*coefs, -1.0], [*(m.r[c, k, t] for c in order), m.x[k, t]]))
    return rows


def broken_hull_orders(m: pyo.ConcreteModel, data: ProgramData) -> dict[tuple[int, int], tuple]:
    """For each config of too many classes for every order's row, the order whose row the
    solution in `m` breaks most, where it breaks one: the classes by share routed, largest
    first (the greedy order attains the Lovász extension), if not among the rows already."""
    if data.maximize_throughput:
        return {}
    found = {}
    for k, config in enumerate(data.configs):
        if config.queue.linear or len(config.usage) <= HULL_MAX_CLASSES:
            continue
        for t in m.T:
            demand, loads = _hull_loads(data, k, t)
            share = {c: m.r[c, k, t].value / demand[c] if demand[c] > 0 else 0.0 for c in loads}
            order = tuple(sorted(loads, key=lambda c: -share[c]))
            if order in data.hull_orders.get((k, t), ()):
                continue
            ((_, coefs),) = hull_rows(config.queue, loads, [order])
            need = sum(a * share[c] for c, a in zip(order, coefs, strict=True))
            if need > m.x[k, t].value + HULL_TOLERANCE * max(1.0, need):
                found[k, t] = order
    return found


def _orders(data: ProgramData, k: int, t: int) -> list[tuple[str, ...]]:
    """The orders whose hull rows config k gets in period t."""
    classes = list(data.configs[k].usage)
    if len(classes) <= HULL_MAX_CLASSES:
        return list(itertools.permutations(classes))
    return list(data.hull_orders.get((k, t), ()))


def _hull_loads(data: ProgramData, k: int, t: int) -> tuple[dict, dict]:
    """Each class's requests/s in period t, and its whole prefill load on config k in replicas
    at the ceiling (D_c)."""
    config = data.configs[k]
    scale = data.periods[t].multiplier
    demand = {c.name: c.requests_per_s * scale for c in data.classes if c.name in config.usage}
    cap = config.capacity[PREFILL]
    return demand, {c: demand[c] * use[PREFILL] / cap for c, use in config.usage.items()}


def hull_rows(
    curve: PoolCurve, loads: dict[str, float], orders: Iterable[tuple[str, ...]]
) -> Iterator[tuple[tuple[str, ...], list[float]]]:
    """For each order π of the classes, the coefficients a of x ≥ Σ_i a_i·y_{π_i}, y_c ≤ 1 the
    share of class c's whole load D_c (in replicas at the ceiling) routed to the pool:
    a_i = h(D_{S_i}) − h(D_{S_{i−1}}), S_i the first i classes of π, h the concave lower bound
    of the replicas that carry a load (`PoolCurve.replicas_at_least`).

    Their maximum over every π is the Lovász extension of the submodular S ↦ h(D_S) (concave
    of a sum), whose epigraph is the convex hull of the points (1_S, h(D_S)); every row holds
    at every plan since h is concave with h(0) = 0 (docs/formulation.md §2)."""
    for order in orders:
        shares, load, before = [], 0.0, 0.0
        for c in order:
            load += loads[c]
            after = curve.replicas_at_least(load)
            shares.append(after - before)
            before = after
        yield order, shares
