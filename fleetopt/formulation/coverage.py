"""§1 coverage: every class's demand is routed, through prefill-capable and decode-capable configs."""

from __future__ import annotations

import pyomo.environ as pyo

from fleetopt.formulation.data import ProgramData


def add_coverage(m: pyo.ConcreteModel, data: ProgramData) -> None:
    """Σ_{k does prefill} r[c,k] = alpha·λ_c  and  Σ_{k does decode} r[c,k] = alpha·λ_c.

    A colocated config does both, so its routing counts in both rows."""
    for phase in ("prefill", "decode"):
        rows = {}
        for cls in data.classes:
            routed = [
                m.r[c, k]
                for c, k in m.E
                if c == cls.name and getattr(data.configs[k].op, f"does_{phase}")
            ]
            rows[cls.name] = sum(routed) == m.alpha * cls.requests_per_s
        setattr(
            m, f"coverage_{phase}", pyo.Constraint(list(rows), rule=lambda _, c, rows=rows: rows[c])
        )
