"""`fleetopt pareto`: the default range, a cost that never rises as the target loosens, the
frontier and its violations, infeasible points, and the command's outputs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from helpers import analytic_instance

from fleetopt.cli import main
from fleetopt.errors import InputError
from fleetopt.instance import parse_instance
from fleetopt.pareto import _blocked, choose_target, classify, default_values, trace
from fleetopt.solve import SolveOptions
from fleetopt.sweep.grid import Scenario
from fleetopt.sweep.runner import Outcome, Result

PNG = b"\x89PNG\r\n\x1a\n"
SMALL = analytic_instance(["l40s", "h100-sxm"], requests_per_s=4, tpot_ms=40)


def _write(tmp_path: Path, data: dict = SMALL) -> str:
    path = tmp_path / "instance.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return str(path)


def test_default_range_starts_at_the_tightest_feasible_target():
    instance = parse_instance(SMALL)
    target = choose_target(instance, "tpot_ms", None)
    values, note = default_values(instance, target, 4)
    tightest = values[0]
    assert not _blocked(instance, target, tightest)
    assert _blocked(instance, target, tightest * 0.98)  # found to within 1%, rounded up
    assert values[-1] == 160 and 40 in values  # 4× the stated target, and the stated one
    assert values == sorted(values)
    assert "4× the stated 40 ms" in note


def test_cost_never_rises_as_tpot_loosens_and_infeasible_points_are_marked():
    instance = parse_instance(SMALL)
    target = choose_target(instance, "tpot_ms", None)
    front = trace(instance, target, [160, 5, 20, 40, 80], "given", SolveOptions(), jobs=2)
    assert [p.target for p in front.points] == [5, 20, 40, 80, 160]  # tight to loose
    first, *rest = front.points
    assert first.result.outcome.status == "infeasible" and not first.frontier
    costs = [p.result.outcome.cost_per_hour for p in rest]
    assert all(p.result.outcome.status == "optimal" for p in rest)
    assert costs == sorted(costs, reverse=True) and costs[0] > costs[-1]
    assert front.violations == []
    # the tightest target at each cost is on the frontier; a looser one at the same cost is not
    assert [p.frontier for p in rest] == [
        cost < min(costs[:i], default=float("inf")) for i, cost in enumerate(costs)
    ]


def _result(index: int, status: str, cost: float | None) -> Result:
    instance = parse_instance(SMALL)
    return Result(Scenario(index, {"tpot_ms": index}, instance), Outcome(status, cost, mip_gap=0.0))


def test_a_looser_target_that_costs_more_is_reported_not_hidden():
    results = [
        _result(0, "infeasible", None),
        _result(1, "optimal", 10.0),
        _result(2, "optimal", 12.0),
        _result(3, "optimal", 10.0),
        _result(4, "optimal", 8.0),
    ]
    points = classify([10, 20, 30, 40, 50], results, 1e-4, "tpot_ms")
    assert [p.frontier for p in points] == [False, True, False, False, True]
    assert [p.violation is not None for p in points] == [False, False, True, False, False]
    assert "tpot_ms 30 ms costs 12.00 $/h, more than the tighter 20 ms at 10.00 $/h" in (
        points[2].violation
    )


def test_several_workloads_scale_together_from_the_first():
    data = analytic_instance(["l40s"], tpot_ms=40)
    data["workloads"].append({**data["workloads"][0], "name": "rag", "slo": {"tpot_ms": 60}})
    data["workloads"].append({**data["workloads"][0], "name": "batch", "slo": {"ttft_ms": 9000}})
    target = choose_target(parse_instance(data), "tpot_ms", None)
    assert target.workloads == ("chat", "rag")
    assert target.values_at(20) == {"chat": 20, "rag": 30}
    assert "rag = 1.5 × chat" in target.describe()


def test_pareto_command_writes_table_csv_and_plot(tmp_path):
    csv, png = tmp_path / "front.csv", tmp_path / "front.png"
    result = CliRunner().invoke(
        main,
        ["pareto", _write(tmp_path), "--vary", "tpot_ms", "--values", "5,20,40,160",
         "--jobs", "2", "--csv", str(csv), "--plot", str(png)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "varying slo.tpot_ms of chat" in out
    assert "a tighter target never cost less" in out
    rows = csv.read_text().splitlines()
    assert rows[0].startswith("tpot_ms,status,cost_per_hour") and rows[0].endswith(",frontier")
    assert [r.split(",")[1] for r in rows[1:]] == ["infeasible", "optimal", "optimal", "optimal"]
    assert png.read_bytes().startswith(PNG)


def test_pareto_json_names_the_frontier(tmp_path):
    result = CliRunner().invoke(
        main,
        ["pareto", _write(tmp_path), "--vary", "tpot_ms", "--values", "20,160", "--jobs", "2",
         "--format", "json"],
    )  # fmt: skip
    data = json.loads(result.stdout)
    assert data["workloads"] == ["chat"] and data["stated"] == {"chat": 40}
    assert [p["target_ms"] for p in data["points"]] == [20, 160]
    assert data["points"][0]["frontier"] is True and data["violations"] == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--vary", "tpot_ms", "--workload", "rag"],
            "--workload rag: no such workload (known: chat)",
        ),
        (["--vary", "tpot_ms", "--values", "20,x"], "--values 20,x: give targets in ms"),
        (["--vary", "tpot_ms", "--values", "20,-3"], "targets must be positive and finite"),
    ],
)
def test_pareto_input_errors_are_one_line_exit_2(tmp_path, args, message):
    result = CliRunner().invoke(main, ["pareto", _write(tmp_path), *args])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0]


def test_a_workload_without_the_target_needs_values():
    instance = parse_instance(analytic_instance(["l40s"], ttft_ms=None, tpot_ms=None))
    with pytest.raises(InputError, match=r"no workload states slo\.tpot_ms"):
        choose_target(instance, "tpot_ms", None)
    target = choose_target(instance, "tpot_ms", "chat")
    with pytest.raises(InputError, match=r"states no slo\.tpot_ms to range around; give --values"):
        default_values(instance, target, 4)


def test_a_throughput_objective_is_refused_with_the_alternative(tmp_path):
    """Its points differ in throughput, not cost: ranked by cost, each looser target read as a
    violation (it spent more of the budget to serve more)."""
    data = analytic_instance(["l40s"], requests_per_s=10)
    data["objective"] = {"maximize": "throughput", "budget_per_hour": 20.0}
    path = tmp_path / "budget.yaml"
    path.write_text(yaml.safe_dump(data))
    result = CliRunner().invoke(main, ["pareto", str(path), "--vary", "tpot_ms", "--points", "2"])
    assert result.exit_code == 2
    assert result.output.startswith("error: objective.maximize: pareto traces the cheapest fleet")
