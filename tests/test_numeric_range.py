"""The supported numeric range, tested at its ends: rates from 0.001 to 1,000,000 requests/s,
requests up to 1M tokens, prices from $0.01 to $1000 per GPU-hour. Each solve must be optimal,
pass verify (plan_fleet re-checks every plan), behave as the ends imply, and draw no warning
from HiGHS's model assessment."""

from __future__ import annotations

import copy
import re

import pytest

from fleetopt.errors import InputError
from fleetopt.instance import RANGES, parse_instance
from fleetopt.pipeline import plan_fleet
from fleetopt.plan import Plan
from fleetopt.solve import SolveOptions
from tests.helpers import analytic_instance

LOW_RATE, HIGH_RATE, _ = RANGES["requests_per_s"]
LOW_PRICE, HIGH_PRICE, _ = RANGES["price_per_gpu_hour"]
_, LONGEST, _ = RANGES["tokens"]


def _solve(data: dict, capfd) -> tuple[Plan, set[str]]:
    """The plan, and the warnings in HiGHS's log (verbose: the log goes to stdout)."""
    plan = plan_fleet(parse_instance(copy.deepcopy(data)), SolveOptions(verbose=True))
    log = capfd.readouterr().out
    assert re.search(r"Status\s+Optimal", log)
    return plan, set(re.findall(r"WARNING: Problem has some (.*)", log))


def test_the_lowest_rate_buys_one_replica_of_the_cheapest_config_that_holds_the_slo(capfd):
    low, warnings = _solve(analytic_instance(["l4", "h100-sxm"], requests_per_s=LOW_RATE), capfd)
    double, _ = _solve(analytic_instance(["l4", "h100-sxm"], requests_per_s=2 * LOW_RATE), capfd)
    assert low.status == "optimal" and warnings == set()
    assert sum(p.replicas for p in low.pools) == 1
    assert low.cost_per_hour == pytest.approx(double.cost_per_hour)  # both one replica


def test_the_highest_rate_costs_ten_times_a_tenth_of_it(capfd):
    """Far from one replica, cost is linear in the rate up to the rounding of replicas."""
    gpus = ["h100-sxm"]
    high, warnings = _solve(analytic_instance(gpus, requests_per_s=HIGH_RATE), capfd)
    tenth, _ = _solve(analytic_instance(gpus, requests_per_s=HIGH_RATE / 10), capfd)
    assert high.status == "optimal" and warnings == set()
    assert high.cost_per_hour == pytest.approx(10 * tenth.cost_per_hour, rel=1e-3)
    assert high.requests_per_s == pytest.approx(HIGH_RATE)


@pytest.mark.parametrize("price", [LOW_PRICE, HIGH_PRICE])
def test_prices_at_the_ends_of_the_range(price, capfd):
    """A GPU at $0.01/h is the whole fleet; at $1000/h it is left out: the other type (an H200
    at ~$4/h) serves the class too."""
    data = analytic_instance(["h200", "h100-sxm"], requests_per_s=20)
    data["gpus"][1]["price_per_gpu_hour"] = price
    plan, warnings = _solve(data, capfd)
    assert plan.status == "optimal" and warnings == set()
    if price == LOW_PRICE:
        assert set(plan.gpus) == {"h100-sxm"}
        assert plan.cost_per_hour == pytest.approx(price * plan.gpus["h100-sxm"], rel=1e-6)
    else:
        assert "h100-sxm" not in plan.gpus


def _long_context(model: str, max_context: int | None) -> dict:
    output = 48_576
    data = analytic_instance(
        ["h200", "b200"],
        requests_per_s=0.01,
        input_tokens=LONGEST - output,
        output_tokens=output,
        ttft_ms=None,
        tpot_ms=None,
        model=model,
        tensor_parallel=(1, 2, 4, 8),
    )
    if max_context is not None:
        data["models"][0]["spec"] = {"max_context": max_context}
    return data


@pytest.mark.parametrize("model", ["llama-3.1-8b", "llama-3.1-70b"])
def test_a_one_million_token_request_is_planned_where_the_model_allows_it(model, capfd):
    plan, warnings = _solve(_long_context(model, int(LONGEST)), capfd)
    assert plan.status == "optimal" and warnings == set()
    assert plan.prefill_tokens_per_s == pytest.approx(0.01 * (LONGEST - 48_576))


def test_a_request_longer_than_the_model_allows_names_max_context():
    with pytest.raises(InputError, match=r"exceeds llama-3.1-8b's max_context of 131,072"):
        plan_fleet(parse_instance(_long_context("llama-3.1-8b", None)))


@pytest.mark.parametrize(
    "field, value",
    [
        ("requests_per_s", LOW_RATE / 2),
        ("requests_per_s", HIGH_RATE * 2),
        ("price_per_gpu_hour", LOW_PRICE / 2),
        ("price_per_gpu_hour", HIGH_PRICE * 2),
        ("input_tokens", 2 * LONGEST),
    ],
)
def test_values_beyond_the_range_are_refused_naming_the_field_and_the_range(field, value):
    data = analytic_instance(["l4"])
    if field == "price_per_gpu_hour":
        data["gpus"][0][field] = value
    else:
        data["workloads"][0][field] = value
    with pytest.raises(InputError, match=rf"{field}.*outside the supported range"):
        parse_instance(data)


@pytest.mark.parametrize("multiplier", [HIGH_RATE, LOW_RATE / 100])
def test_a_period_beyond_the_range_is_refused_naming_its_multiplier(multiplier):
    """10 req/s in a period at 1e6x is 1e7 req/s (a fuzz instance at 1e9x failed verification,
    exit 4); at 1e-5x, 1e-4 req/s. A period at 0 has no traffic and stays allowed."""
    data = analytic_instance(["l4"], requests_per_s=10)
    data["demand_profile"] = {"multipliers": [1, 0, multiplier]}
    where = r"demand_profile\.multipliers\[2\] × workloads\[chat\]\.requests_per_s"
    with pytest.raises(InputError, match=rf"{where}: .* outside the supported range"):
        parse_instance(data)


def test_a_rate_given_in_tokens_is_named_by_its_own_field():
    """0.02 decode tokens/s over 200-token outputs is 1e-4 req/s: the error named
    `requests_per_s`, a field not in the file."""
    data = analytic_instance(["l4"])
    workload = data["workloads"][0]
    del workload["requests_per_s"]
    workload["decode_tokens_per_s"] = 0.02
    with pytest.raises(
        InputError, match=r"workloads\[chat\]\.decode_tokens_per_s \(as requests/s\)"
    ):
        parse_instance(data)
