"""§3 decode concurrency, KV memory and step time."""

from __future__ import annotations

import pyomo.environ as pyo

from fleetopt.formulation.data import ProgramData
from fleetopt.formulation.resources import add_resource_rows
from fleetopt.perf.operating_point import BATCH, DECODE_COMPUTE, DECODE_MEMORY, KV


def add_decode_capacity(m: pyo.ConcreteModel, data: ProgramData) -> None:
    """With n_c = r[c,k]·O_c·τ_k sequences in flight (Little's law), per config k:
    batch slots Σ n_c ≤ x·B; KV memory Σ n_c·ctx_c·κ ≤ x·M_kv; and the step stays within τ_k on
    both sides of the roofline (compute and HBM bandwidth), linear at the fixed step budget."""
    add_resource_rows(m, data, "decode_capacity", (BATCH, KV, DECODE_COMPUTE, DECODE_MEMORY))
