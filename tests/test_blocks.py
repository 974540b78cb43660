"""Independent blocks (formulation/blocks.py): the program splits by period and by model only
where nothing links them, and solving the blocks one by one gives the whole program's optimum.

The reference is the whole program built as one model and solved by HiGHS (no splitting), on
seeded measured-profile instances with two models, two GPU types and several demand levels.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from helpers import measured_instance

from fleetopt import pipeline
from fleetopt.catalog import resolve
from fleetopt.configs import enumerate_configs
from fleetopt.formulation import build_model
from fleetopt.formulation.blocks import block_parts, cut_block, independent_blocks, worth_first
from fleetopt.formulation.sizing import columns
from fleetopt.instance import parse_instance
from fleetopt.pipeline import plan_fleet, program_data, solve_program
from fleetopt.solve import SolveOptions, run_highs
from fleetopt.verify import verify

EXACT = SolveOptions(mip_gap=1e-9)


def _data(seed: int, cap: int | None = None, extra: dict | None = None) -> dict:
    rng = random.Random(seed)
    gpus = [
        {"type": "a10g", "price_per_gpu_hour": 1.0},
        {"type": "a100-80gb", "price_per_gpu_hour": round(rng.uniform(2.0, 4.0), 2)},
    ]
    if cap is not None:
        gpus[0]["max_gpus"] = cap
    workloads = [
        ("a", "llama-2-7b", 500, 200, round(rng.uniform(3, 12), 1)),
        ("b", "llama-2-7b", 900, 250, round(rng.uniform(3, 12), 1)),
        ("c", "mistral-7b", 1000, 300, round(rng.uniform(3, 12), 1)),
    ]
    capacity: dict = {}
    for name, model, *_ in workloads:
        for gpu, scale in (("a10g", 1.0), ("a100-80gb", 3.0)):
            rate = round(rng.uniform(0.5, 2.0) * scale, 2)
            capacity.setdefault((model, gpu, "colocated"), {})[name] = rate
    data = measured_instance(gpus, workloads, capacity)
    levels = [round(rng.uniform(0.3, 1.0), 2) for _ in range(3)]
    data["demand_profile"] = {"period_hours": 1, "multipliers": [*levels, 1.0, levels[0]]}
    data.update(extra or {})
    return data


def _program(data: dict):
    resolved = resolve(parse_instance(data))
    return program_data(resolved, enumerate_configs(resolved))


@pytest.mark.parametrize(
    ("cap", "extra", "blocks"),
    [
        (None, {}, 2 * 4),  # two models × four distinct demand levels
        (50, {}, 4),  # a capped GPU type both models may use joins them, per period
        (
            None,
            {"objective": {"minimize": "cost", "budget_per_hour": 1000.0}},
            1,
        ),  # the budget spans the horizon
        (
            None,
            {"pricing": {"reserved_price_factor": 0.6, "spot_price_factor": 0.4}},
            1,  # reserved GPUs are paid in every period
        ),
    ],
)
def test_blocks_split_only_where_nothing_links(cap, extra, blocks):
    data = _program(_data(0, cap, extra))
    split = independent_blocks(data)
    assert len(split) == blocks
    covered = sorted((k, t) for b in split for k in b.configs for t in b.periods)
    assert covered == [(k, t) for k in range(len(data.configs)) for t in range(len(data.periods))]


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("cap", [None, 6])
def test_blocks_reach_the_whole_programs_optimum(seed, cap):
    data = _program(_data(seed, cap))
    whole = run_highs(build_model(data), EXACT)
    split = solve_program(data, EXACT)
    assert whole.status == split.outcome.status == "optimal"
    assert split.outcome.objective == pytest.approx(whole.objective, rel=1e-7)
    assert split.solution.cost_per_hour == pytest.approx(whole.objective, rel=1e-3)


@pytest.mark.parametrize("seed", range(2))
def test_split_plans_pass_verification(seed):
    instance = parse_instance(_data(seed))
    plan = plan_fleet(instance)
    assert plan.status == "optimal"
    assert verify(plan, resolve(instance)) == []
    assert len(plan.periods) == 5


def test_blocks_solved_in_worker_processes_give_the_same_plan():
    """With `jobs` > 1 each worker holds the program once and cuts each block it is given from
    it (`cut_block`): the same blocks, so the same values, as solved one by one here."""
    data = _program(_data(1))
    here, workers = (solve_program(data, SolveOptions(mip_gap=1e-9, jobs=jobs)) for jobs in (1, 2))
    assert here.outcome.status == workers.outcome.status == "optimal"
    assert workers.solution.x == here.solution.x
    assert workers.solution.r == here.solution.r
    assert workers.outcome.objective == here.outcome.objective


def test_blocks_worth_more_per_second_go_first():
    """`worth_first`: of one model's blocks (the same configs and classes), the one with more
    demand-hours is worth more and goes first; every block once."""
    data = _program(_data(0))
    parts = block_parts(data)
    order = worth_first(data, parts)
    assert sorted(order) == list(range(len(parts)))
    for model in {c.model for c in data.classes}:
        mine = [i for i in order if model in parts[i][0]]
        demand = [
            sum(data.periods[t].multiplier * data.periods[t].hours for t in parts[i][1])
            for i in mine
        ]
        assert demand == sorted(demand, reverse=True)


def test_a_time_limit_reorders_the_blocks_not_their_answers():
    """Under a time limit blocks start in `worth_first` order and merge in block order: with
    time enough for every block, the same values as without a limit (the scaled LPs' configs,
    which the limit also offers each block's restricted program, change its incumbent, not its
    optimum, unique here)."""
    data = _program(_data(2))
    free = solve_program(data, EXACT)
    limited = solve_program(data, SolveOptions(mip_gap=1e-9, time_limit=600))
    assert worth_first(data, block_parts(data)) != list(range(len(block_parts(data))))
    assert limited.outcome.status == free.outcome.status == "optimal"
    assert limited.solution.x == free.solution.x
    assert limited.solution.r == free.solution.r
    assert limited.outcome.objective == free.outcome.objective


def test_the_period_blocks_of_one_model_share_its_columns():
    """Blocks solved in one process (or one worker) build each group of models' columns and
    sift its configs once: every period's block has the same configs and classes, so the block
    and the columns it is given are the ones it would build."""
    data = _program(_data(0))
    known = {}
    for models, periods in block_parts(data):
        block, cols = pipeline._cut(known, data, models, periods)
        alone = cut_block(data, models, periods)
        assert (block.data, block.configs, block.periods) == (
            alone.data,
            alone.configs,
            alone.periods,
        )
        fresh = columns(block.data)
        for name in ("usage", "capacity", "carries", "heads", "size", "tail"):
            assert np.array_equal(getattr(cols, name), getattr(fresh, name)), name
        assert (cols.classes, cols.prefill) == (fresh.classes, fresh.prefill)
    assert len(known) == 2  # one per model
