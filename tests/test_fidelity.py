"""The shipped efficiency factors are what benchmarks/fidelity.py fits, and they meet the
fidelity target on the held-out rows of fleetopt/catalog/calibration.csv."""

from __future__ import annotations

import importlib.util
import statistics
from pathlib import Path

from fleetopt.calibrate.observation import predict
from fleetopt.catalog import gpu_catalog
from fleetopt.perf.efficiency import DEFAULT

_SPEC = importlib.util.spec_from_file_location(
    "fidelity", Path(__file__).parents[1] / "benchmarks" / "fidelity.py"
)
fidelity = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(fidelity)


def test_shipped_factors_are_the_fit():
    usable, _ = fidelity.load_rows()
    default, per_gpu = fidelity.fit_factors(usable[::2])
    assert default == DEFAULT
    for gpu, eff in per_gpu.items():
        assert gpu_catalog()[gpu].efficiency == eff


def test_held_out_rows_meet_the_target():
    usable, _ = fidelity.load_rows()
    errors = [
        abs(
            predict(o, gpu_catalog()[o.gpu].efficiency or DEFAULT) / o.output_tokens_per_s_per_gpu
            - 1
        )
        for o in usable[1::2]
    ]
    assert statistics.median(errors) <= 0.15
    assert max(errors) <= 0.35
