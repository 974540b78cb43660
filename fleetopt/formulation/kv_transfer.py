"""§5 KV transfer between disaggregated prefill and decode pools."""

from __future__ import annotations

import pyomo.core as pyo

from fleetopt.formulation.data import ProgramData
from fleetopt.formulation.resources import add_resource_rows
from fleetopt.perf.operating_point import KV_IN, KV_OUT


def add_kv_transfer(m: pyo.ConcreteModel, data: ProgramData) -> None:
    """Σ_c r[c,k]·L_c·κ ≤ x[k]·tp·N_net on the sending prefill side and the receiving decode side."""
    add_resource_rows(m, data, "kv_transfer", (KV_OUT, KV_IN))
