"""Efficiency factors: the share of datasheet peaks an engine reaches, and its per-step overhead.

DEFAULT was fitted to the max-load throughput rows of fleetopt/catalog/calibration.csv by
`python benchmarks/fit_efficiency.py` (docs/cost-model.md has the fit and its error table). A GPU
type may carry its own factors (`efficiency:` in its spec) from `fleetopt calibrate` or a catalog
entry; otherwise the default applies to every GPU type, which is the largest source of error for
GPUs without measurements.
"""

from __future__ import annotations

from fleetopt.catalog import Gpu
from fleetopt.instance import Efficiency

DEFAULT = Efficiency(compute=0.5, memory=0.6, interconnect=0.7, step_overhead_ms=4.0)


def efficiency_for(gpu: Gpu) -> Efficiency:
    return gpu.spec.efficiency or DEFAULT
