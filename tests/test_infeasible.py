"""Infeasibility in words: the pre-solve check per class and target, and after the solve the
limits in conflict and the classes they block (a deletion filter over the instance's limits),
with the fix that sizes them."""

from __future__ import annotations

import copy
import time

import pyomo.core as pyo
import pytest
import yaml
from click.testing import CliRunner

from fleetopt.catalog import resolve
from fleetopt.cli import main
from fleetopt.configs import enumerate_configs
from fleetopt.errors import InfeasibleError
from fleetopt.instance import parse_instance
from fleetopt.pipeline import plan_fleet
from fleetopt.solve import HeldFeasibility, SolveOptions
from tests.helpers import analytic_instance, cost_or_inf, solve


def _message(data: dict) -> str:
    with pytest.raises(InfeasibleError) as caught:
        solve(data)
    return str(caught.value)


def test_ttft_below_the_fastest_prefill():
    text = _message(analytic_instance(["l40s"], input_tokens=32000, ttft_ms=200))
    assert "chat: TTFT p99 200 ms is below the fastest prefill of a 32,000-token prompt" in text
    assert "raise workloads[chat].slo.ttft_ms" in text


def test_tpot_below_the_fastest_step():
    text = _message(analytic_instance(["l40s"], tpot_ms=3))
    assert "chat: TPOT 3.0 ms is below the fastest decode step" in text
    assert "raise workloads[chat].slo.tpot_ms" in text


def test_sequence_longer_than_any_kv_cache():
    data = analytic_instance(["l40s"], input_tokens=100000, output_tokens=1000, ttft_ms=None)
    data["serving"]["gpu_memory_utilization"] = 0.5
    text = _message(data)
    assert "its longest sequence, 101,000 tokens, needs more KV cache" in text
    assert "kv_dtype: fp8" in text


def test_model_too_big_for_the_gpus():
    text = _message(analytic_instance(["l40s"], model="llama-3.1-70b"))
    assert "llama-3.1-70b fits on no GPU type and tp allowed" in text
    assert "allow serving.tensor_parallel above 1" in text
    assert "kv_dtype" not in text  # the weights fill the memory: a smaller KV frees none


def test_profile_that_covers_nothing():
    data = analytic_instance(["l40s"])
    row = {"input_tokens": 100, "output_tokens": 50, "max_requests_per_s": 5}
    data["profiles"] = [{"model": "llama-3.1-8b", "gpu": "l40s", "table": [row]}]
    text = _message(data)
    assert "measured profiles cover no config" in text and "profiles[].table" in text


def _capped(**gpu) -> dict:
    data = analytic_instance(["h100-sxm"], requests_per_s=40, model="llama-3.1-8b")
    data["gpus"] = [{"type": "h100-sxm", **gpu}]
    return data


def test_cap_in_conflict_and_its_fix():
    text = _message(_capped(max_gpus=1))
    assert "the cap of 1 h100-sxm GPUs (gpus[h100-sxm].max_gpus)" in text
    assert "raise gpus[h100-sxm].max_gpus from 1 to" in text
    need = solve(_capped()).gpus["h100-sxm"]
    assert f"from 1 to {need} (+{need - 1} GPUs)" in text


def _h100s_beside_l40s(h100: int | None) -> dict:
    """100 requests/s with at most `h100` H100s (None: no cap) and 20 L40S."""
    data = analytic_instance(["h100-sxm", "l40s"], requests_per_s=100)
    data["gpus"] = [{"type": "h100-sxm", "max_gpus": h100}, {"type": "l40s", "max_gpus": 20}]
    if h100 is None:
        del data["gpus"][0]["max_gpus"]
    return data


def test_a_cap_is_raised_only_as_far_as_any_fleet_needs():
    """100 requests/s with at most 2 H100s and 20 L40S: the cheapest fleet without the H100 cap
    runs H100s alone; one with more L40S needs fewer H100s. The fix names the fewest (with the
    cap there, a fleet exists; one GPU less, none does) and what the cheapest fleet uses."""
    capped = _h100s_beside_l40s
    text = _message(capped(2))
    cheapest = solve(capped(None))
    most = cheapest.gpus["h100-sxm"]
    least = next(n for n in range(2, most + 1) if cost_or_inf(capped(n)) < float("inf"))
    assert least < most
    assert (
        f"raise gpus[h100-sxm].max_gpus from 2 to {least} (+{least - 2} GPUs, the fewest any "
        f"fleet needs; the cheapest fleet without the cap, {cheapest.cost_per_hour:,.2f} $/h, "
        f"uses {most})"
    ) in text


def test_the_fewest_is_not_asked_once_the_time_limit_is_spent():
    """The cheapest fleet's solve spends the limit: the fix is what that fleet uses, and no
    second solve starts for the fewest."""
    from fleetopt.conflict import Limit, suggest
    from fleetopt.pipeline import program_data, solve_program

    resolved = resolve(parse_instance(_h100s_beside_l40s(2)))
    data = program_data(resolved, enumerate_configs(resolved))
    fleets = []

    def solve(loosened, _share):
        fleets.append(solve_program(loosened, SolveOptions()).solution)
        time.sleep(0.6)
        return fleets[-1]

    cap = Limit("gpu_cap", "h100-sxm")
    fixes = suggest(data, [cap], [cap], SolveOptions(time_limit=0.5), time.perf_counter(), solve)
    most = round(max(n for (g, _), n in fleets[0].gpus.items() if g == "h100-sxm"))
    assert len(fleets) == 1
    assert fixes == [f"raise gpus[h100-sxm].max_gpus from 2 to {most} (+{most - 2} GPUs)"]


def test_whole_nodes_and_cap():
    text = _message(_capped(max_gpus=4, gpus_per_node=8))
    assert "whole 8-GPU nodes of h100-sxm" in text
    assert "raise gpus[h100-sxm].max_gpus from 4 to 8" in text


def test_budget_shortfall_is_sized():
    data = _capped()
    cheapest = solve(data).cost_per_hour
    data["objective"] = {"minimize": "cost", "budget_per_hour": 1.0}
    text = _message(data)
    assert "the budget of 1.00 $/h (objective.budget_per_hour)" in text
    assert f"to {cheapest:,.2f} $/h" in text


def test_budget_and_cap_together():
    """The budget alone is sized by the cheapest fleet without it, which the cap of 1 GPU
    leaves none: both are loosened together, to the fleet of 3 GPUs and its cost."""
    data = _capped(max_gpus=1)
    cheapest = solve(_capped())
    data["objective"] = {"minimize": "cost", "budget_per_hour": 1.0}
    text = _message(data)
    need = cheapest.gpus["h100-sxm"]
    assert f"raise gpus[h100-sxm].max_gpus from 1 to {need} (+{need - 1} GPUs) and" in text
    assert f"raise objective.budget_per_hour from 1.00 to {cheapest.cost_per_hour:,.2f}" in text


def test_only_the_limits_and_classes_in_conflict_are_named():
    """One h100 cannot carry chat's 40 requests/s, and carries `small`'s alone; the budget is
    generous. The deletion filter leaves the cap and chat: the budget and `small` are not
    needed for the conflict, and are not named."""
    data = _capped(max_gpus=1)
    small = {**data["workloads"][0], "name": "small", "requests_per_s": 0.5}
    data["workloads"].append(small)
    data["objective"] = {"minimize": "cost", "budget_per_hour": 1000.0}
    text = _message(data)
    assert "no fleet for chat fits the cap of 1 h100-sxm GPUs (gpus[h100-sxm].max_gpus);" in text
    assert "budget" not in text


def test_held_rows_set_free_and_held_again():
    """The filter's questions: x + y ≥ 3 with x ≤ 1 and y ≤ 1 cannot hold; with either cap free
    it can; held again, it cannot. In integers, 2z = 1 cannot hold where its LP can."""
    model = pyo.ConcreteModel()
    model.x = pyo.Var(domain=pyo.NonNegativeReals)
    model.y = pyo.Var(domain=pyo.NonNegativeReals)
    model.z = pyo.Var(domain=pyo.NonNegativeIntegers)
    model.need = pyo.Constraint(expr=model.x + model.y >= 3)
    model.cap_x = pyo.Constraint(expr=model.x <= 1)
    model.cap_y = pyo.Constraint(expr=model.y <= 1)
    model.half = pyo.Constraint(expr=2 * model.z == 1)
    model.cost = pyo.Objective(expr=model.x + model.y)
    held, options = HeldFeasibility(model), SolveOptions()
    assert held.feasible(False, options) is False
    held.hold((model.cap_x,), False)
    assert held.feasible(False, options) is True
    assert held.feasible(True, options) is False
    held.hold((model.half,), False)
    assert held.feasible(True, options) is True
    held.hold((model.cap_x,), True)
    assert held.feasible(True, options) is False


def test_the_nearest_miss_is_named_and_the_step_grid_is_not():
    """Colocated 70B at tp2, TTFT 150 ms on 1,500-token prompts and a TPOT of 200 ms: the
    TTFT binds. The explanation names the nearest TTFT miss of all the points (not the first
    in text order), and no longer the step budgets the grid offers below the TPOT to shorten
    chunk steps ('a step budget of 0.9 ms leaves nothing after ... 13.5 ms'), which some
    point of the same replica had room beside."""
    data = analytic_instance(
        ["h100-sxm"],
        1,
        1500,
        100,
        ttft_ms=150,
        tpot_ms=200,
        model="llama-3.1-70b",
        tensor_parallel=(2,),
        weight_dtype="fp8",
    )
    text = _message(data)
    resolved = resolve(parse_instance(copy.deepcopy(data)))
    misses = [
        float(r.reason.split()[1].replace(",", ""))
        for r in enumerate_configs(resolved).rejections["chat"]
        if r.kind == "ttft" and r.reason.startswith("TTFT ")
    ]
    assert len(misses) > 1
    nearest = f"(ttft: TTFT {min(misses):,.0f} ms > target 150 ms); fix: raise workloads[chat]"
    assert nearest in text, text


def _noded(**gpu) -> dict:
    """Two mistral-7b classes on 8-GPU a10g nodes over four periods (a fuzz instance, f024)."""
    data = analytic_instance(["a10g"], model="mistral-7b", modes=("colocated", "disaggregated"))
    data["gpus"] = [{"type": "a10g", "gpus_per_node": 8, **gpu}]
    data["serving"]["tensor_parallel"] = [1, 2]
    shapes = [(3.41, 4442, 13326, 765, 1530, 6440, 120), (47.37, 893, 2679, 785, 1570, 923, 80)]
    data["workloads"] = [
        {
            "name": f"w{i}",
            "model": "mistral-7b",
            "requests_per_s": rate,
            "input_tokens": {"mean": mean_in, "p99": p99_in},
            "output_tokens": {"mean": mean_out, "p99": p99_out},
            "slo": {"ttft_ms": ttft, "tpot_ms": tpot},
        }
        for i, (rate, mean_in, p99_in, mean_out, p99_out, ttft, tpot) in enumerate(shapes)
    ]
    data["models"].append({"name": "llama-3.1-8b", "weight_dtype": "fp8"})  # no workload
    data["demand_profile"] = {"period_hours": 1, "multipliers": [1, 0.25, 0.5, 1]}
    return data


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_cap_is_sized_whatever_process_solved_the_blocks(jobs):
    """With the periods' blocks solved in worker processes (`--jobs 2`, the default on two
    cores), HiGHS's feasibility relaxation ran in a process whose thread scheduler no solve had
    set up and failed at once: 'fix: loosen the limits named'. Sized either way, to the fleet
    without the cap (560 a10g), and the fix is feasible."""
    need = max(solve(_noded()).gpus.values())
    with pytest.raises(InfeasibleError) as caught:
        plan_fleet(parse_instance(_noded(max_gpus=4)), SolveOptions(jobs=jobs))
    assert f"raise gpus[a10g].max_gpus from 4 to {need} (+{need - 4} GPUs)" in str(caught.value)
    assert solve(_noded(max_gpus=need)).gpus["a10g"] <= need


def test_cli_exit_3_one_line(tmp_path):
    path = tmp_path / "capped.yaml"
    path.write_text(yaml.safe_dump(copy.deepcopy(_capped(max_gpus=1))))
    result = CliRunner().invoke(main, ["solve", str(path)])
    assert result.exit_code == 3
    assert len(result.stderr.strip().splitlines()) == 1
    assert result.stderr.startswith("error: infeasible within the limits")


def test_every_kind_of_blocker_is_named():
    """A TTFT the tail prompt misses on one GPU type (h100) and a TPOT no step leaves room for
    on another (l4, whose step with the smallest chunk takes 122 ms): the explanation names
    both kinds, not the first three reasons of one."""
    data = analytic_instance(["h100-sxm", "l4"], ttft_ms=120, tpot_ms=30)
    data["workloads"][0]["input_tokens"] = {"mean": 900, "p50": 600, "p90": 2000, "p99": 3000}
    text = _message(data)
    assert "chat: no config can prefill it within its targets" in text
    assert "tpot: a step with a 256-token prefill chunk takes at least" in text
    assert "more than the 30.0 ms TPOT" in text and "ttft: TTFT" in text


def test_nothing_is_asked_once_the_time_limit_is_spent():
    """Fuzz seed 83 (four capped GPU types, seven periods, price tiers): `--time-limit 1` took
    23 s, the explanation asking and sizing after the solve had spent the limit (each stage
    granted at least a second of its own), and then 12.6 s, building the whole program (3.6 s)
    to ask nothing. Counted from the solve's start, a spent limit leaves every limit named, no
    fix sized and the program unbuilt, and says so."""
    from fleetopt.conflict import explain_conflict
    from fleetopt.pipeline import program_data

    resolved = resolve(parse_instance(_capped(max_gpus=1)))
    data = program_data(resolved, enumerate_configs(resolved))

    def solve(*_):
        raise AssertionError("a fix was sized after the time limit was spent")

    def build():
        raise AssertionError("the program was built after the time limit was spent")

    spent = time.perf_counter() - 2.0
    text = explain_conflict(data, build, SolveOptions(time_limit=1.0), spent, solve)
    assert text.startswith("infeasible within the limits: no fleet for the demand fits the cap")
    assert "the cap of 1 h100-sxm GPUs (gpus[h100-sxm].max_gpus)" in text
    assert text.endswith(
        "(the time limit ran out before they were narrowed and sized: raise --time-limit)"
    )
