"""Efficiency factors: the share of datasheet peaks an engine reaches, and its per-step overhead.

DEFAULT and the per-GPU `efficiency:` entries of fleetopt/catalog/gpus.yaml were fitted by
`python benchmarks/fidelity.py` to the fitted half of fleetopt/catalog/calibration.csv
(docs/cost-model.md has the fit and its error table, fitted and held out). A GPU type with its own
measurements carries its own factors; every other GPU type gets DEFAULT, which is the largest
source of error for GPUs without measurements. `fleetopt calibrate` fits factors to your own
benchmark results and an instance applies them with `calibration:`.
"""

from __future__ import annotations

from fleetopt.catalog import Gpu
from fleetopt.instance import Efficiency, GpuSpec

DEFAULT = Efficiency(
    compute=0.55,
    fp4_compute=0.4,
    memory=0.9,
    interconnect=0.7,
    step_overhead_ms=0.5,
    moe=0.9,
    moe_tp_loss=0.075,
)


def moe_share(efficiency: Efficiency, tp: int) -> float:
    """What an MoE replica of `tp` GPUs reaches of the dense factors: moe / (1 + loss·(tp − 1)).
    An empirical correction fitted to MoE rows (docs/cost-model.md): grouped expert GEMMs split
    over tp GPUs run further from the datasheet than dense ones, the more so the finer the split."""
    return factor(efficiency, "moe") / (1 + factor(efficiency, "moe_tp_loss") * (tp - 1))


UNSET_AS_ZERO = ("layer_overhead_us", "sequence_overhead_us", "attention_latency_ns")
"""Small-batch factors that are 0 where none is fitted: the max-load rows the catalog's factors
come from do not tell them from the bandwidth and compute shares; closed-loop runs do
(docs/cost-model.md)."""


def factor(efficiency: Efficiency, name: str) -> float:
    """One factor's value. An optional one left unset takes the default's (the MoE correction),
    decode attention's bandwidth share takes the memory share, and the small-batch times are 0
    (`UNSET_AS_ZERO`). (The all-reduce latency's unset value is its fabric's:
    `Replica.allreduce_latency_s`.)"""
    value = getattr(efficiency, name)
    if value is not None:
        return value
    if name == "attention_memory":
        return efficiency.memory
    if name in UNSET_AS_ZERO:
        return 0.0
    return getattr(DEFAULT, name)


def efficiency_for_spec(spec: GpuSpec | None) -> Efficiency:
    """A GPU spec's own factors, else the default."""
    return (spec.efficiency if spec is not None else None) or DEFAULT


def efficiency_for(gpu: Gpu) -> Efficiency:
    return efficiency_for_spec(gpu.spec)


def describe(efficiency: Efficiency) -> str:
    """The factors that are set, `name=value` — unset ones take the fallbacks of `factor`."""
    return " ".join(f"{k}={v:g}" for k, v in efficiency.model_dump(exclude_none=True).items())
