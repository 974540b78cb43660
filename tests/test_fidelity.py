"""The shipped efficiency factors are what benchmarks/fidelity.py fits, and they meet the
fidelity target on the held-out rows of fleetopt/catalog/calibration.csv; an engine fitted on its
own ships its fit as an overlay and meets the target too."""

from __future__ import annotations

import functools
import importlib.util
import statistics
from pathlib import Path

import pytest

from fleetopt.calibrate.observation import predict
from fleetopt.calibrate.overlay import read_overlay
from fleetopt.catalog import gpu_catalog
from fleetopt.perf.efficiency import DEFAULT

_SPEC = importlib.util.spec_from_file_location(
    "fidelity", Path(__file__).parents[1] / "benchmarks" / "fidelity.py"
)
fidelity = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(fidelity)


def test_shipped_factors_are_the_fit():
    usable, _ = fidelity.load_rows()
    default, per_gpu = fidelity.fit_factors(fidelity.split(fidelity.catalog_rows(usable))[0])
    assert default == DEFAULT
    for gpu, eff in per_gpu.items():
        assert gpu_catalog()[gpu].efficiency == eff


@functools.cache
def _errors(part: str) -> list[float]:
    """|predicted / measured − 1| of each fitted or held-out row, with the shipped factors."""
    fitted, held_out = fidelity.split(fidelity.catalog_rows(fidelity.load_rows()[0]))
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


def _own(engine: str) -> tuple[list, list, dict]:
    fitted, held_out = fidelity.split(fidelity.engine_rows(fidelity.load_rows()[0], engine))
    return fitted, held_out, read_overlay(fidelity.OWN_FACTORS[engine])


@pytest.mark.parametrize("engine", list(fidelity.OWN_FACTORS))
def test_an_engine_fitted_on_its_own_ships_its_fit(engine):
    """The overlay is what the fit gives from the catalog's factors, on the fitted half."""
    fitted, _, overlay = _own(engine)
    start = {o.gpu: gpu_catalog()[o.gpu].efficiency or DEFAULT for o in fitted}
    assert fidelity.fit_own_factors(fitted, start) == overlay


@pytest.mark.parametrize("part", ["fitted", "held out"])
@pytest.mark.parametrize("engine", list(fidelity.OWN_FACTORS))
def test_an_engine_fitted_on_its_own_meets_the_target(engine, part):
    """Closed-loop sweeps from one request in flight to hundreds: median ≤ 15% and no row off
    by more than 35%, fitted and held out."""
    fitted, held_out, overlay = _own(engine)
    rows = fitted if part == "fitted" else held_out
    errors = [abs(predict(o, overlay[o.gpu]) / o.output_tokens_per_s_per_gpu - 1) for o in rows]
    assert statistics.median(errors) <= 0.15
    assert max(errors) <= 0.35
