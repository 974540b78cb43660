"""The hand-off to HiGHS (fleetopt/handoff.py) gives HiGHS the very model Pyomo's persistent
interface gave it: same columns in the same order, same rows, same coefficients to the last bit
(HiGHS's branch and bound depends on all three), on shipped programs and on a model written
with Python sums, a ConstraintList and a maximised objective."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyomo.core as pyo
import pytest
from pyomo.contrib.solver.solvers.highs import Highs

from fleetopt.catalog import resolve
from fleetopt.configs import enumerate_configs
from fleetopt.formulation import build_model
from fleetopt.handoff import hand_off
from fleetopt.instance import load_instance
from fleetopt.pipeline import program_data
from fleetopt.solve import MatrixLp, SolveOptions
from tests.test_interrupt import market_split

INSTANCES = Path(__file__).resolve().parent.parent / "instances"


def _mps(highs, path: Path) -> str:
    highs.setOptionValue("output_flag", False)
    highs.writeModel(str(path))
    return path.read_text()


def _same_as_pyomo(model: pyo.ConcreteModel, tmp_path: Path) -> None:
    pyomo = Highs()
    pyomo.set_instance(model)
    expected = _mps(pyomo._solver_model, tmp_path / "pyomo.mps")
    assert _mps(hand_off(model).highs, tmp_path / "fleetopt.mps") == expected


@pytest.mark.parametrize("name", ["chatbot-8b", "diurnal-chat-70b", "two-model-fleet"])
@pytest.mark.parametrize("relaxed", [False, True])
def test_shipped_programs_reach_highs_as_pyomo_handed_them(name, relaxed, tmp_path):
    resolved = resolve(load_instance(INSTANCES / f"{name}.yaml"))
    data = program_data(resolved, enumerate_configs(resolved))
    _same_as_pyomo(build_model(data, relaxed=relaxed), tmp_path)


def test_a_model_of_python_sums_and_a_maximised_objective(tmp_path):
    model = market_split(3, slack=True)
    model.deviation.deactivate()
    model.most = pyo.Objective(expr=sum(model.x.values()) + 2.5, sense=pyo.maximize)
    _same_as_pyomo(model, tmp_path)


def test_values_and_rows_map_back_to_the_pyomo_model():
    model = pyo.ConcreteModel()
    model.x = pyo.Var([0, 1], domain=pyo.NonNegativeIntegers, bounds=(0, 10))
    model.y = pyo.Var(domain=pyo.NonNegativeReals)
    model.cover = pyo.Constraint(expr=2 * model.x[0] + 3 * model.x[1] + model.y >= 7.5)
    model.cost = pyo.Objective(expr=4 * model.x[0] + 5 * model.x[1] + 2.1 * model.y)
    loaded = hand_off(model)
    loaded.highs.run()
    loaded.load_values()
    # Per unit of cover x1 costs 5/3, x0 2 and y 2.1: x1 = 2 (10, covers 6) and y = 1.5 (3.15)
    # make 13.15; x1 = 3 costs 15, x1 = 2 and x0 = 1 14, x1 = 1, x0 = 2 and y = 0.5 14.05.
    assert pyo.value(model.cost) == pytest.approx(13.15)
    assert (model.x[0].value, model.x[1].value) == (0, 2)
    assert loaded.rows == [model.cover]
    assert list(loaded.row_index([model.cover])) == [0]


def test_a_held_lp_solved_again_gets_its_whole_time_limit():
    """HiGHS counts `time_limit` on a clock that runs on over every solve of the same object:
    a held LP solved again is given what that clock has run so far plus the limit asked for,
    so its second solve is not cut short by the first one's seconds."""
    rng = np.random.default_rng(0)
    rows, columns = 300, 400
    entries = (
        rng.integers(0, rows, 6000),
        rng.integers(0, columns, 6000),
        rng.uniform(0.1, 1.0, 6000),
    )
    lp = MatrixLp(rng.uniform(1, 2, columns), np.ones(rows), np.full(rows, np.inf), entries)
    first = lp.solve(SolveOptions())
    ran = lp.highs.getRunTime()
    assert first is not None and ran > 0
    second = lp.solve(SolveOptions(time_limit=5.0))
    assert lp.highs.getOptionValue("time_limit")[1] == pytest.approx(ran + 5.0, abs=0.05)
    assert second is not None and second[0] == pytest.approx(first[0], rel=1e-9)
