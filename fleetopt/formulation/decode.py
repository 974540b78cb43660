"""§3 decode concurrency, KV memory and step time."""

from __future__ import annotations

import pyomo.core as pyo

from fleetopt.formulation.data import ProgramData
from fleetopt.formulation.resources import add_resource_rows
from fleetopt.formulation.rows import add_rows, linear
from fleetopt.perf.operating_point import BATCH, DECODE_STEP, HOST, KV, LONGEST_STEP


def add_decode_capacity(m: pyo.ConcreteModel, data: ProgramData) -> None:
    """With n_c = r[c,k]·O_c·τ_k sequences in flight (Little's law), per config k:
    batch slots Σ n_c ≤ x·B; KV memory Σ n_c·ctx_c·κ ≤ x·M_kv; the mean step, prompts of a
    colocated replica included, stays within τ_k; and where a colocated point holds a TPOT, its
    batch with a full chunk within the longest step: linear at the fixed step budgets; where the
    host has a time per token, the tokens it decodes within its time."""
    resources = (BATCH, KV, DECODE_STEP, LONGEST_STEP, HOST)
    add_resource_rows(m, data, "decode_capacity", resources)
    add_pool_sizes(m, data)


def add_pool_sizes(m: pyo.ConcreteModel, data: ProgramData) -> None:
    """A config whose admission headroom is sized for a pool of m_k replicas
    (`Config.min_replicas` > 1) has none or at least m_k:

        x[k,t] ≥ m_k·open[k,t],   x[k,t] ≤ X_k,t·open[k,t],   open[k,t] binary

    with X_k,t the replica bound."""
    pooled = [k for k, config in enumerate(data.configs) if config.min_replicas > 1]
    if not pooled:
        return
    m.open = pyo.Var(pooled, m.T, domain=pyo.Binary)
    least, most = {}, {}
    for k in pooled:
        for t in m.T:
            pair = [m.x[k, t], m.open[k, t]]
            least[k, t] = (0.0, linear([1.0, -float(data.configs[k].min_replicas)], pair), None)
            most[k, t] = (None, linear([1.0, -float(m.replica_bound[k, t])], pair), 0.0)
    add_rows(m, "pool_least", least)
    add_rows(m, "pool_most", most)
