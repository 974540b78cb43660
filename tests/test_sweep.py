"""`fleetopt sweep`: grid expansion, input errors, parallel = serial, monotone cost, outputs."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from helpers import analytic_instance

from fleetopt.cli import main
from fleetopt.errors import InputError
from fleetopt.instance import parse_instance
from fleetopt.solve import SolveOptions
from fleetopt.sweep.grid import expand, parse_sets
from fleetopt.sweep.runner import run_scenarios

PNG = b"\x89PNG\r\n\x1a\n"
SMALL = analytic_instance(["l40s", "h100-sxm"], requests_per_s=4, tpot_ms=40)


def _instance(data: dict = SMALL):
    return parse_instance(data)


def _write(tmp_path: Path, data: dict = SMALL) -> str:
    path = tmp_path / "instance.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return str(path)


def test_paths_address_list_items_by_name_and_type():
    axes = parse_sets(
        [
            "workloads.chat.slo.tpot_ms=30,50",
            "gpus.h100-sxm.max_gpus=2",
            "models.llama-3.1-8b.weight_dtype=fp8",  # a name with dots in it
            "objective.budget_per_hour=20",
        ],
        _instance(),
    )
    assert [(a.path, a.label, a.values) for a in axes] == [
        ("workloads[chat].slo.tpot_ms", "tpot_ms", (30, 50)),
        ("gpus[h100-sxm].max_gpus", "max_gpus", (2,)),
        ("models[llama-3.1-8b].weight_dtype", "weight_dtype", ("fp8",)),
        ("objective.budget_per_hour", "budget_per_hour", (20,)),
    ]


def test_bracket_paths_as_error_messages_spell_them():
    (axis,) = parse_sets(["workloads[chat].slo.ttft_ms=500.5"], _instance())
    assert (axis.path, axis.values) == ("workloads[chat].slo.ttft_ms", (500.5,))


def test_labels_grow_until_unique():
    data = analytic_instance(["l40s"])
    data["workloads"].append({**data["workloads"][0], "name": "rag"})
    axes = parse_sets(
        ["workloads.chat.slo.tpot_ms=30", "workloads.rag.slo.tpot_ms=40"], _instance(data)
    )
    assert [a.label for a in axes] == ["chat.slo.tpot_ms", "rag.slo.tpot_ms"]


def test_grid_is_the_cartesian_product_first_set_slowest():
    instance = _instance()
    axes = parse_sets(
        ["workloads.chat.slo.tpot_ms=30,50", "workloads.chat.requests_per_s=1,2,4"], instance
    )
    scenarios = expand(instance, axes)
    assert [s.index for s in scenarios] == list(range(6))
    assert [tuple(s.values.values()) for s in scenarios] == [
        (30, 1), (30, 2), (30, 4), (50, 1), (50, 2), (50, 4),
    ]  # fmt: skip
    for s in scenarios:
        chat = s.instance.workloads[0]
        assert (chat.slo.tpot_ms, chat.requests_per_s) == tuple(s.values.values())
    assert instance.workloads[0].slo.tpot_ms == 40  # the base instance is left as it was


def test_an_absent_optional_section_is_created():
    instance = _instance(analytic_instance(["l40s"], ttft_ms=None, tpot_ms=None))
    (scenario,) = expand(instance, parse_sets(["workloads.chat.slo.tpot_ms=50"], instance))
    assert scenario.instance.workloads[0].slo.tpot_ms == 50


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("workloads.chta.slo.tpot_ms=30", "workloads has no item named 'chta' (known: chat)"),
        ("workloads.chat.slo.tpot=30", "workloads[chat].slo.tpot is not a field"),
        ("gpus.a100.max_gpus=4", "gpus has no item named 'a100' (known: l40s, h100-sxm)"),
        ("workloads.chat.slo=30", "workloads[chat].slo is a mapping"),
        ("serving.tensor_parallel=1,2", "serving.tensor_parallel is a list"),
        ("workloads.chat.slo.tpot_ms=30,0", "--set workloads[chat].slo.tpot_ms=0: makes the"),
        ("gpus.l40s.max_gpus=2.5", "--set gpus[l40s].max_gpus=2.5: makes the instance invalid"),
        ("workloads.chat.requests_per_s=fast", "valid number"),
        ("workloads.chat.slo.tpot_ms=30,30", "30 given twice"),
        ("workloads.chat.slo.tpot_ms", "expected PATH=V1,V2,..."),
        ("workloads.chat.slo.tpot_ms=inf", "inf is not a finite number"),
        (
            "workloads.chat.requests_per_s=2e6",
            "outside the supported range 0.001 to 1e+06 requests/s",
        ),
        (
            "gpus.l40s.price_per_gpu_hour=1e-6",
            "outside the supported range 0.01 to 1,000 $ per GPU-hour",
        ),
    ],
)
def test_bad_path_or_value_is_one_line_exit_2(tmp_path, spec, message):
    result = CliRunner().invoke(main, ["sweep", _write(tmp_path), "--set", spec])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --set "), lines
    assert message in lines[0]
    assert "→" not in result.stderr  # nothing was solved


def test_the_same_field_twice_is_an_error():
    with pytest.raises(InputError, match="set twice"):
        parse_sets(["workloads.chat.slo.tpot_ms=30", "workloads[chat].slo.tpot_ms=40"], _instance())


def _sweep(jobs: int, *specs: str):
    instance = _instance()
    scenarios = expand(instance, parse_sets(list(specs), instance))
    return run_scenarios(scenarios, SolveOptions(), jobs)


def _answers(results) -> list[dict]:
    return [
        {**dataclasses.asdict(r.outcome), "seconds": None, "values": r.scenario.values}
        for r in results
    ]


def test_parallel_results_equal_serial_results():
    specs = ("workloads.chat.slo.tpot_ms=15,30,60", "workloads.chat.requests_per_s=2,8")
    serial, parallel = _sweep(1, *specs), _sweep(2, *specs)
    assert _answers(parallel) == _answers(serial)
    assert any(r.outcome.solved for r in serial)


def test_more_requests_never_cost_less():
    results = _sweep(2, "workloads.chat.requests_per_s=1,2,4,8,16")
    costs = [r.outcome.cost_per_hour for r in results]
    assert all(r.outcome.status == "optimal" for r in results)
    assert costs == sorted(costs) and costs[0] < costs[-1]


def test_sweep_command_table_csv_json_and_plot(tmp_path):
    path = _write(tmp_path)
    csv, png = tmp_path / "out.csv", tmp_path / "out.png"
    args = ["sweep", path, "--set", "workloads.chat.slo.tpot_ms=5,40", "--set",
            "workloads.chat.requests_per_s=2,4", "--jobs", "2"]  # fmt: skip
    result = CliRunner().invoke(main, [*args, "--csv", str(csv), "--plot", str(png)])
    assert result.exit_code == 0, result.output
    progress = [line for line in result.stderr.splitlines() if line.startswith("[")]
    assert len(progress) == 4 and progress[-1].startswith("[4/4] ")
    table = result.stdout.splitlines()
    assert table[0].split()[:4] == ["tpot_ms", "requests_per_s", "status", "$/h"]
    assert [line.split()[2] for line in table[2:6]] == ["infeasible"] * 2 + ["optimal"] * 2
    reason = "tpot_ms=5 requests_per_s=2; tpot_ms=5 requests_per_s=4: infeasible: chat: TPOT 5.0 ms"
    assert reason in result.stdout  # a reason shared by scenarios is said once
    rows = csv.read_text().splitlines()
    assert rows[0].startswith("tpot_ms,requests_per_s,status,cost_per_hour,gpus.l40s,gpus.h100-sxm")
    assert len(rows) == 5
    assert png.read_bytes().startswith(PNG)

    as_json = CliRunner().invoke(main, [*args, "--format", "json", "--mip-gap", "0.02"])
    assert as_json.exit_code == 0, as_json.output
    data = json.loads(as_json.stdout)
    assert all(s["mip_gap"] <= 0.02 for s in data["scenarios"] if s["status"] == "optimal")
    assert [a["label"] for a in data["axes"]] == ["tpot_ms", "requests_per_s"]
    assert [s["status"] for s in data["scenarios"]] == ["infeasible"] * 2 + ["optimal"] * 2
    assert data["scenarios"][3]["values"] == {"tpot_ms": 40, "requests_per_s": 4}


def test_plot_format_is_checked_before_solving(tmp_path):
    result = CliRunner().invoke(
        main,
        ["sweep", _write(tmp_path), "--set", "workloads.chat.requests_per_s=1",
         "--plot", str(tmp_path / "out.jpg")],
    )  # fmt: skip
    assert result.exit_code == 2
    assert (
        result.stderr.strip()
        == f"error: --plot {tmp_path / 'out.jpg'}: name the file .png, .svg or .pdf"
    )
