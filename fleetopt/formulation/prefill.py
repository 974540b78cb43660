"""§2 prefill capacity, with the pooling curve where queueing bites (and measured capacity)."""

from __future__ import annotations

import pyomo.core as pyo

from fleetopt.formulation.data import ProgramData
from fleetopt.formulation.resources import add_resource_rows
from fleetopt.formulation.rows import add_rows, linear
from fleetopt.perf.operating_point import PREFILL, PROFILE
from fleetopt.perf.queueing import NO_QUEUEING


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
            bound = m.replica_bound[k, t]
            slope = config.queue.load(bound) / bound if bound else 1.0
            coefs = [u for _, u in users] + [-config.capacity[PREFILL] * slope]
            chord[k, t] = (None, linear(coefs, [*(m.r[c, k, t] for c, _ in users), m.x[k, t]]), 0.0)
    add_rows(m, "pool_chord", chord)
    expanded = [k for k in configs if not data.configs[k].queue.linear]
    if expanded and expand:
        _add_expansion(m, data, expanded)


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
