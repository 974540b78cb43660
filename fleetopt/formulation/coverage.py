"""§1 coverage: every class's demand is routed, through prefill-capable and decode-capable configs."""

from __future__ import annotations

import pyomo.core as pyo

from fleetopt.formulation.data import ProgramData
from fleetopt.formulation.rows import add_rows, linear


def add_coverage(m: pyo.ConcreteModel, data: ProgramData) -> None:
    """Σ_{k does prefill} r[c,k,t] = alpha·m_t·λ_c  and  Σ_{k does decode} r[c,k,t] = alpha·m_t·λ_c.

    A colocated config does both, so its routing counts in both rows. When minimising cost
    alpha is the constant 1 and the demand is the row's bound."""
    scaled = isinstance(m.alpha, pyo.Var)
    for phase in ("prefill", "decode"):
        serving = {cls.name: [] for cls in data.classes}
        for c, k in m.E:
            if getattr(data.configs[k].op, f"does_{phase}"):
                serving[c].append(k)
        rows = {}
        for cls in data.classes:
            ks = serving[cls.name]
            for t, period in enumerate(data.periods):
                demand = period.multiplier * cls.requests_per_s
                terms = [m.r[cls.name, k, t] for k in ks]
                if scaled:
                    body = linear([1.0] * len(ks) + [-demand], [*terms, m.alpha])
                    rows[cls.name, t] = (0.0, body, 0.0)
                else:
                    rows[cls.name, t] = (demand, linear([1.0] * len(ks), terms), demand)
        add_rows(m, f"coverage_{phase}", rows)
