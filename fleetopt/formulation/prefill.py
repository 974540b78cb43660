"""§2 prefill capacity (and measured capacity tables)."""

from __future__ import annotations

import pyomo.environ as pyo

from fleetopt.formulation.data import ProgramData
from fleetopt.formulation.resources import add_resource_rows
from fleetopt.perf.operating_point import PREFILL, PROFILE


def add_prefill_capacity(m: pyo.ConcreteModel, data: ProgramData) -> None:
    """Σ_c r[c,k]·L_c·p_k(L_c) ≤ x[k]·u·R_k/τ_k — prompt compute fits the reserved chunk at the
    utilisation cap u; and Σ_c r[c,k]/μ_kc ≤ x[k] for configs sized by a measured table."""
    add_resource_rows(m, data, "prefill_capacity", (PREFILL, PROFILE))
