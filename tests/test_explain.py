"""`fleetopt explain`: tokens/s beside requests/s, GPU-seconds per GPU type, and the requests/s
rule's error, on the instances derived from the Azure 2023 traces."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from fleetopt import configs
from fleetopt.catalog import model_catalog
from fleetopt.cli import main
from fleetopt.explain import explain
from fleetopt.explain.sizing import average_workload
from fleetopt.instance import load_instance, parse_instance
from fleetopt.report.explain import to_table
from fleetopt.workers import worker_pool
from tests.helpers import analytic_instance

INSTANCES = Path(__file__).resolve().parent.parent / "instances"


@pytest.fixture(scope="module")
def both():
    return explain(load_instance(INSTANCES / "azure-conv-and-code-70b.yaml"))


def test_requests_per_s_hides_the_tokens(both):
    demand = {d.workload: d for d in both.demand}
    conv, code = demand["conversation"], demand["code"]
    assert conv.requests_per_s == pytest.approx(2.15 * code.requests_per_s, rel=0.01)
    assert conv.prefill_tokens_per_s == pytest.approx(6_390, rel=0.01)
    assert code.prefill_tokens_per_s == pytest.approx(5_260, rel=0.01)
    assert conv.decode_tokens_per_s == pytest.approx(1_170, rel=0.01)
    assert code.decode_tokens_per_s == pytest.approx(72, rel=0.01)


def test_gpu_seconds_follow_the_program_coefficients(both):
    needs = {(n.workload, n.gpu): n for n in both.needs}
    assert ("conversation", "h100-sxm") in needs and ("code", "h100-sxm") in needs
    for need in both.needs:
        assert need.gpu_seconds_per_s > 0
        assert need.path.startswith(need.gpu)


def test_the_rule_misplaces_gpus_per_class_and_phase(both):
    """The average request over-sizes conversation prefill and code decode, and under-sizes
    conversation decode and code prefill."""
    (rule,) = both.rules
    over = {(s.workload, s.pool.split()[-1]): s.over_gpus for s in rule.shares}
    if ("code", "decode") in over:
        assert over["conversation", "prefill"] > 0 > over["conversation", "decode"]
        assert over["code", "prefill"] < 0 < over["code", "decode"]
    assert rule.input_tokens == pytest.approx((5.53 * 1155 + 2.57 * 2048) / 8.1, rel=1e-6)
    assert both.over_gpus == both.rule_gpus - both.plan_gpus


def test_one_class_rule_matches_its_own_sizing():
    ex = explain(load_instance(INSTANCES / "azure-code-70b.yaml"))
    assert all(s.over_gpus == pytest.approx(0, abs=1e-9) for r in ex.rules for s in r.shares)


def test_the_average_request_fits_the_context():
    """One class has the longest prompts, another the longest outputs: together the two
    maxima exceed the model's context (an input error until 2026-12-04, though the instance
    solves), so the average request's output tail shrinks to fit, not below its mean."""
    documents = {"mean": 8000, "p50": 6000, "p90": 16000, "p99": 24000, "max": 30000}
    stories = {"mean": 1500, "p50": 1000, "p90": 3000, "p99": 6000, "max": 8000}
    data = analytic_instance(
        ["h100-sxm"], requests_per_s=2, ttft_ms=None, tpot_ms=None, model="mistral-7b"
    )
    data["workloads"][0].update(input_tokens=documents, output_tokens=200)
    data["workloads"].append({**data["workloads"][0], "name": "stories"})
    data["workloads"][1].update(input_tokens=200, output_tokens=stories)
    instance = parse_instance(data)
    context = model_catalog()["mistral-7b"].max_context
    assert 30000 + 8000 > context >= max(30000 + 200, 200 + 8000)
    average = average_workload("mistral-7b", instance, context)
    assert average.input.longest == 30000
    assert average.output.longest == context - 30000
    assert average.output.mean == pytest.approx((200 + 1500) / 2)
    (rule,) = explain(instance).rules
    assert rule.gpus > 0


def test_cli_table_and_json():
    path = str(INSTANCES / "azure-conv-70b.yaml")
    table = CliRunner().invoke(main, ["explain", path])
    assert table.exit_code == 0, table.output
    assert "prefill tok/s" in table.output and "GPU-s per s" in table.output
    data = json.loads(CliRunner().invoke(main, ["explain", path, "--format", "json"]).output)
    assert {"demand", "needs", "rules", "over_gpus", "plan_gpus"} <= set(data)


def test_cli_takes_the_solver_limits(both):
    """explain solves the instance: --time-limit and --mip-gap bound that solve as in `solve`,
    and a plan stopped short of its proof says so beside the rule it is compared with."""
    path = str(INSTANCES / "azure-conv-70b.yaml")
    args = ["explain", path, "--mip-gap", "0.05", "--time-limit", "60", "--format", "json"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["plan_status"] == "optimal" and data["plan_mip_gap"] <= 0.05
    assert "stopped" not in to_table(both)
    stopped = dataclasses.replace(both, plan_status="feasible", plan_mip_gap=0.031)
    assert "(feasible: the solver stopped before proving it, gap 3.10%)" in to_table(stopped)


def test_the_explanation_is_the_same_for_any_number_of_jobs(monkeypatch):
    """--jobs enumerates the configs (the instance's and each model's average request's) and
    solves the plan's blocks in worker processes, as `solve` does; here on two models, each
    part in a worker (the instance is below the sizes that would use them otherwise)."""
    monkeypatch.setattr(configs, "PARALLEL_FROM", 0)
    monkeypatch.setattr(configs, "FORKED_FROM", 0)
    pools = []

    def counted(jobs, forked):
        pools.append(jobs)
        return worker_pool(jobs, forked=forked)

    monkeypatch.setattr(configs, "worker_pool", counted)
    path = str(INSTANCES / "two-model-fleet.yaml")
    one, two = (
        CliRunner().invoke(main, ["explain", path, "--format", "json", "--jobs", jobs])
        for jobs in ("1", "2")
    )
    assert one.exit_code == 0 and two.exit_code == 0, one.output + two.output
    assert len(json.loads(one.output)["rules"]) == 2
    assert pools == [2, 2, 2]  # the instance's configs, then each model's average request's
    assert one.output == two.output


def test_a_profile_and_price_tiers_are_left_out_of_the_comparison():
    """The rule sizes for the stated rates at on-demand prices: the plan it is compared with is
    solved so too (the same plan as without them), and the report says what was left out."""
    tiered = load_instance(INSTANCES / "diurnal-chat-70b.yaml")
    assert tiered.demand_profile is not None and tiered.pricing is not None
    plain = tiered.model_copy(update={"demand_profile": None, "pricing": None})
    ex, expected = explain(tiered), explain(plain)
    assert ex.left_out == ["demand_profile", "pricing"] and expected.left_out == []
    assert ex.plan_cost_per_hour == expected.plan_cost_per_hour
    assert ex.plan_gpus == expected.plan_gpus and ex.rule_gpus == expected.rule_gpus
    assert "demand_profile and pricing left out of the plan here" in to_table(ex)


def test_the_verdict_signs_gpus_and_dollars_apart(both):
    """More GPUs need not cost more (another GPU type): each difference says its own sign."""
    fewer_dearer = dataclasses.replace(both, rule_gpus=both.plan_gpus - 1)
    fewer_dearer = dataclasses.replace(
        fewer_dearer, rule_cost_per_hour=both.plan_cost_per_hour + 0.6
    )
    assert "the rule buys 1 GPUs fewer and costs 0.60 $/h more" in to_table(fewer_dearer)


def test_a_throughput_objective_is_left_out_of_the_comparison():
    """The rule sizes the stated rates; a plan buying the most throughput for a budget served
    22.6x them and read as the rule buying 11 GPUs too few. The plan compared is the cheapest
    at the stated rates (the same as without the objective)."""
    data = analytic_instance(["l40s", "h100-sxm"], requests_per_s=10)
    data["objective"] = {"maximize": "throughput", "budget_per_hour": 20.0}
    ex = explain(parse_instance(data))
    expected = explain(parse_instance({k: v for k, v in data.items() if k != "objective"}))
    assert ex.left_out == ["objective"]
    assert (ex.plan_gpus, ex.plan_cost_per_hour) == (
        expected.plan_gpus,
        expected.plan_cost_per_hour,
    )
    assert "objective left out of the plan here" in to_table(ex)
