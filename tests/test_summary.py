"""The plan's summary lines say what each objective and period structure needs said."""

from __future__ import annotations

from helpers import measured_instance, solve

from fleetopt.report.text import summary_lines


def _instance(**extra) -> dict:
    data = measured_instance(
        [{"type": "a10g", "price_per_gpu_hour": 1.0}],
        [("chat", "llama-2-7b", 500, 200, 4.0)],
        {("llama-2-7b", "a10g", "colocated"): {"chat": 2.0}},
    )
    data.update(extra)
    return data


def test_budget_over_periods_says_scale_peak_and_means():
    # 1 $/h per replica of 2 req/s; 4 req/s at 0.5x and 1x over two equal periods needs
    # alpha·1 and alpha·2 replicas, mean cost 1.5·alpha $/h ≤ 3 → alpha = 2: 2 and 4 replicas.
    plan = solve(
        _instance(
            objective={"maximize": "throughput", "budget_per_hour": 3},
            demand_profile={"period_hours": 1, "multipliers": [0.5, 1.0]},
        )
    )
    assert abs(plan.demand_scale - 2.0) < 1e-3
    lines = summary_lines(plan)
    assert lines[1] == f"serves {plan.demand_scale:.4g} × the stated demand within the budget"
    assert lines[2].startswith("GPUs at the peak: 4 × a10g")
    assert lines[3].startswith("mean cost: 3.00 $/h") and lines[3].endswith("over the horizon")
    assert lines[4].startswith("mean demand:")


def test_plain_plan_has_no_mean_wording():
    lines = summary_lines(solve(_instance()))
    assert lines[1] == "GPUs: 2 × a10g (2 in all)"
    assert lines[2].startswith("cost: 2.00 $/h")
    assert not any("mean" in line or "serves" in line for line in lines)
