"""§1 coverage: every class's demand is routed, through prefill-capable and decode-capable configs."""

from __future__ import annotations

import pyomo.environ as pyo

from fleetopt.formulation.data import ProgramData


def add_coverage(m: pyo.ConcreteModel, data: ProgramData) -> None:
    """Σ_{k does prefill} r[c,k,t] = alpha·m_t·λ_c  and  Σ_{k does decode} r[c,k,t] = alpha·m_t·λ_c.

    A colocated config does both, so its routing counts in both rows."""
    for phase in ("prefill", "decode"):
        serving = {cls.name: [] for cls in data.classes}
        for c, k in m.E:
            if getattr(data.configs[k].op, f"does_{phase}"):
                serving[c].append(k)
        rows = {
            (cls.name, t): sum(m.r[cls.name, k, t] for k in serving[cls.name])
            == m.alpha * period.multiplier * cls.requests_per_s
            for cls in data.classes
            for t, period in enumerate(data.periods)
        }
        setattr(
            m,
            f"coverage_{phase}",
            pyo.Constraint(list(rows), rule=lambda _, c, t, rows=rows: rows[c, t]),
        )
