"""Routes on configs without replicas (fleetopt/polish.py): a solution whose rows hold only to
HiGHS's tolerance can route a sliver of a class to a config it buys no replica of; solved again
with its integers fixed, the routes move onto the pools bought, at the same cost (and scale).

The leak is made by hand on an optimal solution, since the case that showed it (fuzz seed 173,
stopped by the time limit) depends on the machine's speed.
"""

from __future__ import annotations

import pytest
from helpers import analytic_instance

from fleetopt.catalog import resolve
from fleetopt.configs import enumerate_configs
from fleetopt.formulation import build_model
from fleetopt.instance import parse_instance
from fleetopt.pipeline import program_data
from fleetopt.polish import polished, routes_without_replicas
from fleetopt.solve import SolveOptions, run_highs

EXACT = SolveOptions(mip_gap=1e-9)


def _solved(objective: dict | None):
    data = analytic_instance(
        ["h100-sxm", "l4"], 20, 1000, 200, modes=("colocated", "disaggregated")
    )
    if objective is not None:
        data["objective"] = objective
    resolved = resolve(parse_instance(data))
    program = program_data(resolved, enumerate_configs(resolved))
    model = build_model(program)
    return program, model, run_highs(model, EXACT)


def _role(program, k: int) -> tuple[bool, bool]:
    return program.configs[k].op.does_prefill, program.configs[k].op.does_decode


def _served(program, model, c: str, t: int) -> float:
    """Requests/s of class c routed to prefill in period t."""
    return sum(
        var.value
        for (cc, k, tt), var in model.r.items()
        if (cc, tt) == (c, t) and _role(program, k)[0]
    )


@pytest.mark.parametrize(
    "objective", [None, {"maximize": "throughput", "budget_per_hour": 40.0}], ids=["cost", "scale"]
)
def test_a_sliver_routed_without_replicas_moves_onto_the_pools_bought(objective):
    program, model, outcome = _solved(objective)
    assert outcome.status == "optimal" and not routes_without_replicas(model)
    (c, k, t), carried = max(
        ((key, var.value) for key, var in model.r.items()), key=lambda item: item[1]
    )
    empty = next(
        kk
        for (cc, kk, tt) in model.r
        if (cc, tt) == (c, t)
        and round(model.x[kk, t].value) == 0
        and _role(program, kk) == _role(program, k)
    )
    served = _served(program, model, c, t)
    sliver = 1e-4 * carried
    model.r[c, k, t].value = carried - sliver
    model.r[c, empty, t].value = sliver
    assert routes_without_replicas(model)

    after = polished(model, outcome, EXACT)

    assert not routes_without_replicas(model)
    assert after.objective == pytest.approx(outcome.objective, rel=1e-7)
    assert after.status == "optimal"
    assert _served(program, model, c, t) == pytest.approx(served, rel=1e-7)
