"""`fleetopt calibrate` and `import-aiconfigurator`: parsers on files in the real layouts, the
fit, the overlay an instance includes, and aiconfigurator profiles solved end to end."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from fleetopt.calibrate.aiconfigurator import read_capacities, to_profiles
from fleetopt.calibrate.overlay import read_overlay
from fleetopt.calibrate.results import read_runs
from fleetopt.catalog import resolve
from fleetopt.cli import main
from fleetopt.errors import InputError
from fleetopt.instance import load_instance
from tests.helpers import analytic_instance, solve

DATA = Path(__file__).parent / "data"


def test_vllm_result_fields():
    (run,) = read_runs(DATA / "vllm_serve_result.json")
    # 1,000,000 input and 500,000 output tokens over 1,000 completed requests
    assert run.input_tokens == 1000 and run.output_tokens == 500
    assert run.output_tokens_per_s == 5252.1
    assert run.tpot_ms == 11.6 and run.concurrency == 64


def test_vllm_run_at_a_finite_rate_states_no_concurrency(tmp_path):
    """A concurrency cap on a rate-driven run need not have been reached: the run is read as
    one at a rate, not as that many requests in flight."""
    data = json.loads((DATA / "vllm_serve_result.json").read_text())
    data["request_rate"] = 4.0
    (tmp_path / "rated.json").write_text(json.dumps(data))
    (run,) = read_runs(tmp_path / "rated.json")
    assert run.concurrency is None


def test_guidellm_report_one_run_per_benchmark():
    runs = read_runs(DATA / "guidellm_report.json")
    assert [r.output_tokens_per_s for r in runs] == [2600.0, 7400.0]
    assert [r.concurrency for r in runs] == [32.0, 128.0]
    assert runs[1].input_tokens == 1000 and runs[1].tpot_ms == 15.5


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (lambda d: d.pop("mean_tpot_ms"), "mean_tpot_ms"),
        (lambda d: d.update(completed="many"), "completed"),
        (lambda d: d.update(total_output_tokens=0), "total_output_tokens"),
        (lambda d: d.update(output_throughput=float("nan")), "output_throughput"),
        (lambda d: d.update(output_throughput=float("inf")), "output_throughput"),
        (lambda d: d.update(output_throughput=10**400), "output_throughput"),
        (lambda d: d.update(max_concurrency=-4), "max_concurrency"),
    ],
)
def test_malformed_vllm_file_names_file_and_field(tmp_path, edit, field):
    data = json.loads((DATA / "vllm_serve_result.json").read_text())
    edit(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(InputError, match=rf"bad\.json: field `{field}`"):
        read_runs(path)


def test_malformed_guidellm_file_names_the_nested_field(tmp_path):
    data = json.loads((DATA / "guidellm_report.json").read_text())
    del data["benchmarks"][1]["metrics"]["output_tokens_per_second"]
    path = tmp_path / "report.json"
    path.write_text(json.dumps(data))
    with pytest.raises(
        InputError, match=r"benchmarks\[1\]\.metrics\.output_tokens_per_second\.successful\.mean"
    ):
        read_runs(path)


def test_guidellm_concurrency_stated_as_null_is_left_out(tmp_path):
    """`request_concurrency: {successful: null}` is a run without a stated concurrency (it
    raised a TypeError through the CLI)."""
    data = json.loads((DATA / "guidellm_report.json").read_text())
    data["benchmarks"][0]["metrics"]["request_concurrency"]["successful"] = None
    path = tmp_path / "report.json"
    path.write_text(json.dumps(data))
    assert [r.concurrency for r in read_runs(path)] == [None, 128.0]


@pytest.mark.parametrize(
    ("model", "gpu", "tp", "code", "says"),
    [
        ("llama-3.1-8b", "h100-sxm", 3, 2, "--tp 3: 32 attention heads do not split over tp3"),
        ("llama-3.1-8b", "h100-sxm", 64, 2, "--tp 64: tp64 exceeds the 8-GPU scale-up domain"),
        ("llama-3.1-405b", "l4", 1, 3, "llama-3.1-405b on l4 tp1: its weights"),
    ],
)
def test_calibrate_refuses_a_replica_that_cannot_exist(tmp_path, model, gpu, tp, code, says):
    """A fit to runs no operating point can reproduce (every prediction 0) wrote an overlay."""
    out = tmp_path / "o.yaml"
    args = ["--model", model, "--gpu", gpu, "--tp", str(tp), "-o", str(out)]
    result = CliRunner().invoke(main, ["calibrate", str(DATA / "vllm_serve_result.json"), *args])
    assert result.exit_code == code
    assert result.output.startswith(f"error: {says}") and not out.exists()


def test_calibrate_cli_malformed_file_exit_2_one_line(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text('{"something": 1}')
    args = ["calibrate", str(bad), "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--tp", "1"]
    result = CliRunner().invoke(main, [*args, "-o", str(tmp_path / "o.yaml")])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "x.json" in lines[0] and "output_throughput" in lines[0]


def _calibrate(tmp_path: Path) -> Path:
    overlay = tmp_path / "overlay.yaml"
    files = [str(DATA / "vllm_serve_result.json"), str(DATA / "guidellm_report.json")]
    args = ["--model", "llama-3.1-8b", "--gpu", "l40s", "--tp", "1", "-o", str(overlay)]
    result = CliRunner().invoke(main, ["calibrate", *files, *args])
    assert result.exit_code == 0, result.output
    assert "median |error|" in result.output and result.output.count("measured") == 3
    return overlay


def test_calibrate_writes_an_overlay_that_an_instance_applies(tmp_path):
    overlay = _calibrate(tmp_path)
    factors = read_overlay(overlay)["l40s"]
    data = analytic_instance(["l40s", "h100-sxm"])
    data["calibration"] = "overlay.yaml"  # relative to the instance file
    (tmp_path / "inst.yaml").write_text(yaml.safe_dump(data))
    resolved = resolve(load_instance(tmp_path / "inst.yaml"))
    assert resolved.gpus["l40s"].spec.efficiency == factors
    # a GPU type the overlay does not name keeps its catalog factors
    assert (
        resolved.gpus["h100-sxm"].spec.efficiency
        == resolve(load_instance_without_calibration(data, tmp_path))
        .gpus["h100-sxm"]
        .spec.efficiency
    )


def load_instance_without_calibration(data: dict, tmp_path: Path):
    plain = {k: v for k, v in data.items() if k != "calibration"}
    (tmp_path / "plain.yaml").write_text(yaml.safe_dump(plain))
    return load_instance(tmp_path / "plain.yaml")


def test_overlay_keeps_other_gpus(tmp_path):
    overlay = _calibrate(tmp_path)
    text = overlay.read_text().replace("l40s", "a100-80gb")
    overlay.write_text(text)
    _calibrate(tmp_path)
    assert set(read_overlay(overlay)) == {"l40s", "a100-80gb"}


def test_missing_overlay_is_an_input_error(tmp_path):
    data = analytic_instance(["l40s"])
    data["calibration"] = "nowhere.yaml"
    (tmp_path / "inst.yaml").write_text(yaml.safe_dump(data))
    with pytest.raises(InputError, match=r"calibration: cannot read .*nowhere\.yaml"):
        resolve(load_instance(tmp_path / "inst.yaml"))


# --- aiconfigurator --------------------------------------------------------------------------


def test_aiconfigurator_agg_rows_become_colocated_capacity():
    caps = read_capacities(DATA / "aiconfigurator_agg.csv")
    # tp4: the faster of two rows, 750 tokens/s/gpu * 4 GPUs / 250 output tokens = 12 req/s
    assert caps[("colocated", 4, 1000.0, 250.0)] == pytest.approx(12.0)
    assert caps[("colocated", 2, 1000.0, 250.0)] == pytest.approx(375 * 2 / 250)
    # a TPOT limit of 40 ms drops the 55 ms row: 500 * 4 / 250 = 8 req/s
    strict = read_capacities(DATA / "aiconfigurator_agg.csv", tpot_ms=40)
    assert strict[("colocated", 4, 1000.0, 250.0)] == pytest.approx(8.0)


def test_aiconfigurator_disagg_rows_become_prefill_and_decode():
    caps = read_capacities(DATA / "aiconfigurator_disagg.csv")
    assert caps == {
        ("prefill", 2, 1000.0, 250.0): 8.0,
        ("decode", 8, 1000.0, 250.0): 16.0,
    }


def test_aiconfigurator_missing_column(tmp_path):
    path = tmp_path / "pareto.csv"
    path.write_text("isl,osl\n1000,250\n")
    with pytest.raises(InputError, match=r"pareto\.csv: column `ttft` is missing"):
        read_capacities(path)


@pytest.mark.parametrize(
    ("column", "value", "says"),
    [
        ("tokens/s/gpu", "inf", "must be a finite number"),
        ("isl", "nan", "must be a finite number"),
        ("tp", "0.5", "must be a whole number"),
    ],
)
def test_aiconfigurator_values_no_profile_can_hold(tmp_path, column, value, says):
    """Such rows became `max_requests_per_s: .inf` or `tensor_parallel: 0`, which `validate`
    then refused."""
    rows = list(csv.DictReader((DATA / "aiconfigurator_agg.csv").read_text().splitlines()))
    rows[0][column] = value
    path = tmp_path / "pareto.csv"
    with path.open("w", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    with pytest.raises(InputError, match=rf"pareto\.csv:2: column `{re.escape(column)}` {says}"):
        read_capacities(path)


def test_aiconfigurator_profiles_solve_end_to_end(tmp_path):
    out = tmp_path / "profiles.yaml"
    args = ["--model", "llama-3.1-70b", "--gpu", "h200", "--tpot-ms", "40", "-o", str(out)]
    csv_file = str(DATA / "aiconfigurator_agg.csv")
    result = CliRunner().invoke(main, ["import-aiconfigurator", csv_file, *args])
    assert result.exit_code == 0, result.output
    profiles = yaml.safe_load(out.read_text())["profiles"]
    assert profiles == to_profiles(
        read_capacities(DATA / "aiconfigurator_agg.csv", tpot_ms=40), "llama-3.1-70b", "h200"
    )
    data = analytic_instance(
        ["h200"], requests_per_s=20, model="llama-3.1-70b", tensor_parallel=(2, 4)
    )
    data["profiles"] = profiles
    data["workloads"][0]["slo"] = None
    plan = solve(data)
    # 20 req/s at 8 req/s per tp4 replica (4 GPUs) or 3 per tp2 (2 GPUs): the profiles, measured,
    # replace the analytic model for those configs
    assert plan.status == "optimal" and plan.gpus["h200"] > 0
