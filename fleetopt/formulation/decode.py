"""§3 decode concurrency, KV memory and step time."""

from __future__ import annotations

import pyomo.core as pyo

from fleetopt.formulation.data import ProgramData
from fleetopt.formulation.resources import add_resource_rows
from fleetopt.perf.operating_point import BATCH, DECODE_STEP, HOST, KV, LONGEST_STEP


def add_decode_capacity(m: pyo.ConcreteModel, data: ProgramData) -> None:
    """With n_c = r[c,k]·O_c·τ_k sequences in flight (Little's law), per config k:
    batch slots Σ n_c ≤ x·B; KV memory Σ n_c·ctx_c·κ ≤ x·M_kv; the mean step, prompts of a
    colocated replica included, stays within τ_k; and where a colocated point holds a TPOT, its
    batch with a full chunk within the longest step: linear at the fixed step budgets; where the
    host has a time per token, the tokens it decodes within its time."""
    resources = (BATCH, KV, DECODE_STEP, LONGEST_STEP, HOST)
    add_resource_rows(m, data, "decode_capacity", resources)
