"""The shipped efficiency factors are what benchmarks/fidelity.py fits, and they meet the
fidelity target on the held-out rows of fleetopt/catalog/calibration.csv."""

from __future__ import annotations

import functools
import importlib.util
import statistics
from pathlib import Path

import pytest

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
    default, per_gpu = fidelity.fit_factors(fidelity.split(usable)[0])
    assert default == DEFAULT
    for gpu, eff in per_gpu.items():
        assert gpu_catalog()[gpu].efficiency == eff


@functools.cache
def _errors(part: str) -> list[float]:
    """|predicted / measured − 1| of each fitted or held-out row, with the shipped factors."""
    fitted, held_out = fidelity.split(fidelity.load_rows()[0])
    return [
        abs(
            predict(o, gpu_catalog()[o.gpu].efficiency or DEFAULT) / o.output_tokens_per_s_per_gpu
            - 1
        )
        for o in (fitted if part == "fitted" else held_out)
    ]


@pytest.mark.parametrize("part", ["fitted", "held out"])
def test_median_error_meets_the_target(part):
    assert statistics.median(_errors(part)) <= 0.15


@pytest.mark.parametrize("part", ["fitted", "held out"])
def test_no_row_is_off_by_more_than_35_percent(part):
    assert max(_errors(part)) <= 0.35


def test_the_mi325x_runs_on_the_mi300x_factors():
    """No MI325X rows to fit: the same CDNA 3 dies and ROCm stack as the MI300X, whose factors
    it takes (catalog/gpus.yaml), not the NVIDIA default."""
    assert gpu_catalog()["mi325x"].efficiency == gpu_catalog()["mi300x"].efficiency
