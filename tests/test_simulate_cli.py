"""`fleetopt simulate` and `fleetopt solve --simulate`: reports, and one-line errors (exit 2)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from fleetopt.cli import main
from tests.helpers import analytic_instance

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> tuple[str, str]:
    """A small solved instance: (instance.yaml, plan.json)."""
    folder = tmp_path_factory.mktemp("simulate")
    data = analytic_instance(
        ["l40s"], requests_per_s=5, input_tokens=800, output_tokens=100, weight_dtype="fp8"
    )
    instance = folder / "instance.yaml"
    instance.write_text(yaml.safe_dump(data))
    plan = folder / "plan.json"
    result = _run("solve", str(instance), "--format", "json", "-o", str(plan))
    assert result.exit_code == 0, result.output
    return str(instance), str(plan)


def _run(*args: str):
    return CliRunner().invoke(main, list(args))


def _one_line_error(result) -> str:
    assert result.exit_code == 2, (result.exit_code, result.output)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output, result.output
    return lines[0]


def test_json_report(files):
    instance, plan = files
    result = _run(
        "simulate", plan, "--instance", instance, "--requests", "2000", "--format", "json"
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["requests"] == 2000 and report["warmup_requests"] == 200
    (w,) = report["workloads"]
    assert {"ttft_ms", "tpot_ms", "e2e_ms", "slo_attainment", "prefill_tokens_per_s"} <= set(w)
    assert {"utilization", "queue_mean", "queue_max", "mean_batch"} <= set(report["pools"][0])


def test_table_is_seeded_and_says_the_warmup(files):
    instance, plan = files
    args = ("simulate", plan, "--instance", instance, "--requests", "1500", "--arrivals", "gamma")
    first = _run(*args, "--cv", "2", "--seed", "4")
    assert first.exit_code == 0, first.output
    assert "warm-up" in first.stdout and "gamma inter-arrivals, cv 2" in first.stdout
    assert _run(*args, "--cv", "2", "--seed", "4").stdout == first.stdout


def test_trace_replay_and_a_bad_row(files, tmp_path):
    instance, plan = files
    trace = tmp_path / "trace.csv"
    trace.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n0.0,100,10\n0.5,200,20\n1.0,x,3\n")
    line = _one_line_error(_run("simulate", plan, "--instance", instance, "--trace", str(trace)))
    assert "trace.csv:4: column ContextTokens: 'x'" in line
    trace.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n0.0,100,10\n0.5,200,20\n")
    result = _run("simulate", plan, "--instance", instance, "--trace", str(trace))
    assert result.exit_code == 0, result.output
    assert "trace trace.csv" in result.stdout


def test_a_trace_busier_than_the_plan_is_flagged(files, tmp_path):
    """The plan is sized for 5 req/s: a trace replayed at 10 req/s says so beside its misses, in
    the table and the JSON; one at the plan's rate, and a Poisson run, do not."""
    instance, plan = files
    lines = "".join(f"{i / 10:.3f},800,100\n" for i in range(1500))  # 10 req/s
    (tmp_path / "busy.csv").write_text("time,input_tokens,output_tokens\n" + lines)
    lines = "".join(f"{i / 5:.3f},800,100\n" for i in range(1500))  # 5 req/s
    (tmp_path / "even.csv").write_text("time,input_tokens,output_tokens\n" + lines)
    busy = _run("simulate", plan, "--instance", instance, "--trace", str(tmp_path / "busy.csv"))
    assert busy.exit_code == 0, busy.output
    assert "warning: chat arrives at 10.0" in busy.stdout
    assert "2.00x the 5.00 req/s the plan is sized for" in busy.stdout
    args = ("--instance", instance, "--format", "json")
    even = json.loads(_run("simulate", plan, *args, "--trace", str(tmp_path / "even.csv")).stdout)
    assert even["warnings"] == [] and even["workloads"][0]["planned_requests_per_s"] == 5
    poisson = json.loads(_run("simulate", plan, *args, "--requests", "3000").stdout)
    assert poisson["warnings"] == []


def test_too_few_requests_for_the_tail_are_flagged(files):
    """The class's p99 needs 1,000 measured requests to put 10 beyond it: 200 (180 after the
    warm-up) are flagged, with the fix; the window of a short run is not rounded to 0 s."""
    instance, plan = files
    short = _run("simulate", plan, "--instance", instance, "--requests", "200")
    assert short.exit_code == 0, short.output
    assert "warning: chat: 180 requests measured, too few to read its p99" in short.stdout
    assert "simulate more with --requests" in short.stdout
    one = _run("simulate", plan, "--instance", instance, "--requests", "1")
    assert re.search(r"measured over \d\.\d\d s of \d\.\d\d s", one.stdout), one.stdout


def test_refuses_measured_pools(tmp_path):
    melange = ROOT / "instances" / "melange-example.yaml"
    plan = tmp_path / "plan.json"
    assert _run("solve", str(melange), "--format", "json", "-o", str(plan)).exit_code == 0
    line = _one_line_error(_run("simulate", str(plan), "--instance", str(melange)))
    assert "measured capacity" in line


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (("--arrivals", "gamma"), "--arrivals gamma needs --cv"),
        (("--cv", "2"), "--cv applies to --arrivals gamma"),
        (("--class", "chat"), "--class applies to --trace"),
    ],
)
def test_option_errors(files, extra, message):
    instance, plan = files
    assert message in _one_line_error(_run("simulate", plan, "--instance", instance, *extra))


def test_not_a_plan(files, tmp_path):
    instance, _ = files
    bad = tmp_path / "plan.json"
    bad.write_text("{")
    assert "plan.json:1: not valid JSON" in _one_line_error(
        _run("simulate", str(bad), "--instance", instance)
    )


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda plan: plan.update(pools=[]), "pools: empty, no fleet to simulate"),
        (lambda plan: plan["pools"][0].update(replicas=0), "pools[0].replicas: 0, not a whole"),
        (
            lambda plan: plan["workloads"][0]["routes"][0].update(pool=7),
            "routes: pool 7 is not in pools",
        ),
    ],
)
def test_a_plan_edited_into_one_nothing_could_serve(files, tmp_path, edit, message):
    instance, plan = files
    data = json.loads(Path(plan).read_text())
    edit(data)
    edited = tmp_path / "plan.json"
    edited.write_text(json.dumps(data))
    assert message in _one_line_error(_run("simulate", str(edited), "--instance", instance))


def test_solve_then_simulate(files):
    instance, _ = files
    result = _run("solve", instance, "--simulate")
    assert result.exit_code == 0, result.output
    assert "TTFT ms p99 (sim/pred/target)" in result.stdout
    assert "pred TTFT" not in result.stdout  # every class has a TTFT target
    as_json = _run("solve", instance, "--simulate", "--format", "json")
    assert json.loads(as_json.stdout)["status"] == "optimal"
    assert "TTFT ms p99 (sim/pred/target)" in as_json.stderr


def test_a_class_without_a_ttft_target_is_said_to_have_no_queueing_bound(tmp_path):
    """A throughput-only class shares pools the plan runs at full load for it: its simulated
    p99 TTFT can lie far above the unqueued prediction, and the table says why; a plan whose
    classes all have a TTFT target gets no such note."""
    data = analytic_instance(
        ["l40s"], requests_per_s=5, input_tokens=800, output_tokens=100, weight_dtype="fp8"
    )
    batch = {**data["workloads"][0], "name": "batch", "requests_per_s": 2}
    del batch["slo"]
    data["workloads"].append(batch)
    instance = tmp_path / "instance.yaml"
    instance.write_text(yaml.safe_dump(data))
    text = _run("solve", str(instance), "--simulate").stdout
    assert "bounds none for batch (no TTFT target" in text
    assert "pred TTFT: the tail-length prompt" in text


def test_solve_then_simulate_a_plan_of_measured_pools():
    """Profiles give a capacity but no step time: the plan stands, with a note, not an error."""
    result = _run("solve", str(ROOT / "instances" / "melange-example.yaml"), "--simulate")
    assert result.exit_code == 0, result.output
    assert "cost: 4.68 $/h" in result.stdout
    assert "not simulated: pool(s) 0, 1 take their capacity from measurements" in result.stdout
