"""The command line: one-line errors with exit codes 2 (bad input) and 3 (infeasible), and the
solve / validate / schema / catalog commands."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from fleetopt.cli import main

ROOT = Path(__file__).resolve().parent.parent
MELANGE = ROOT / "instances" / "melange-example.yaml"

GOOD = {
    "name": "cli",
    "gpus": [{"type": "l40s"}],
    "models": [{"name": "llama-3.1-8b"}],
    "workloads": [
        {
            "name": "chat",
            "model": "llama-3.1-8b",
            "requests_per_s": 3,
            "input_tokens": 500,
            "output_tokens": 100,
            "slo": {"ttft_ms": 1000, "tpot_ms": 60},
        }
    ],
    "serving": {"modes": ["colocated"], "tensor_parallel": [1]},
}


def _write(tmp_path: Path, data: dict | str) -> str:
    path = tmp_path / "instance.yaml"
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False))
    return str(path)


def _run(*args: str):
    return CliRunner().invoke(main, list(args))


def _assert_one_line_error(result, code: int) -> str:
    assert result.exit_code == code, (result.exit_code, result.output)
    assert isinstance(result.exception, SystemExit)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.output
    assert result.stdout == ""
    return lines[0]


def _edit(**kw) -> dict:
    import copy

    data = copy.deepcopy(GOOD)
    for path, value in kw.items():
        node = data
        keys = path.split("__")
        for k in keys[:-1]:
            node = node[int(k)] if k.isdigit() else node[k]
        node[keys[-1]] = value
    return data


BAD_INPUTS = {
    "unknown-field": (
        _edit(workloads__0__slo={"ttft": 1000}),
        ["workloads[chat].slo.ttft", "unknown field"],
    ),
    "negative-rate": (_edit(workloads__0__requests_per_s=-3), ["workloads[chat].requests_per_s"]),
    "zero-input": (_edit(workloads__0__input_tokens=0), ["workloads[chat].input_tokens"]),
    "unknown-gpu": (_edit(gpus=[{"type": "h900"}]), ["h900", "h100-sxm", "l40s", "a100-80gb"]),
    "unknown-model": (
        _edit(models=[{"name": "llama-9b"}], workloads__0__model="llama-9b"),
        ["llama-9b", "llama-3.1-70b", "llama-3.1-8b"],
    ),
    "workload-model-not-listed": (
        _edit(workloads__0__model="llama-3.1-70b"),
        ["chat", "llama-3.1-70b", "not in models"],
    ),
    "missing-field": (
        {k: v for k, v in GOOD.items() if k != "workloads"},
        ["workloads", "missing"],
    ),
    "bad-dtype": (
        _edit(models=[{"name": "llama-3.1-8b", "weight_dtype": "fp6"}]),
        ["models[llama-3.1-8b].weight_dtype"],
    ),
    "bad-mode": (_edit(serving={"modes": ["pipelined"]}), ["serving.modes"]),
    "duplicate-gpu": (_edit(gpus=[{"type": "l4"}, {"type": "l4"}]), ["gpus", "duplicate", "l4"]),
    "percentiles-out-of-order": (
        _edit(workloads__0__input_tokens={"mean": 500, "p50": 400, "p90": 300}),
        ["workloads[chat].input_tokens:", "percentiles"],
    ),
    "distribution-unknown-field": (
        _edit(workloads__0__input_tokens={"mean": 500, "p95": 700}),
        ["workloads[chat].input_tokens.p95:", "unknown field"],
    ),
    "distribution-negative-mean": (
        _edit(workloads__0__output_tokens={"mean": -1}),
        ["workloads[chat].output_tokens.mean:", "greater than 0"],
    ),
    "rate-twice": (
        _edit(workloads__0__prefill_tokens_per_s=1500),
        ["workloads[chat]", "not both"],
    ),
    "not-a-mapping": ("- just\n- a list\n", ["mapping"]),
    "boolean-rate": (
        _edit(workloads__0__requests_per_s=True),
        ["workloads[chat].requests_per_s", "true/false is not a value it takes"],
    ),
    "no-traffic-in-any-period": (
        _edit(demand_profile={"multipliers": [0, 0, 0]}),
        ["demand_profile.multipliers", "every period is 0", "at least one above 0"],
    ),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_bad_input_is_one_line_exit_2(tmp_path, case):
    data, wanted = BAD_INPUTS[case]
    line = _assert_one_line_error(_run("solve", _write(tmp_path, data)), 2)
    for text in wanted:
        assert text in line, (text, line)


@pytest.mark.parametrize("case", ["unknown-field", "unknown-gpu", "workload-model-not-listed"])
def test_validate_reports_the_same_errors(tmp_path, case):
    data, wanted = BAD_INPUTS[case]
    line = _assert_one_line_error(_run("validate", _write(tmp_path, data)), 2)
    for text in wanted:
        assert text in line


def test_invalid_yaml_names_the_line(tmp_path):
    text = (
        "name: broken\n"
        "gpus: [{type: l40s}]\n"
        "models: [{name: llama-3.1-8b}\n"  # line 3: the list is never closed
        "workloads: []\n"
    )
    line = _assert_one_line_error(_run("solve", _write(tmp_path, text)), 2)
    assert "instance.yaml:" in line
    # the mark is where the parser gave up: line 3 or the next
    number = int(line.split("instance.yaml:")[1].split(":")[0])
    assert number in (3, 4)
    assert "YAML" in line


def test_missing_file(tmp_path):
    missing = str(tmp_path / "nope.yaml")
    line = _assert_one_line_error(_run("solve", missing), 2)
    assert "nope.yaml" in line


def test_unknown_gpu_lists_every_catalog_type(tmp_path):
    from fleetopt.catalog import gpu_catalog

    data, _ = BAD_INPUTS["unknown-gpu"]
    line = _assert_one_line_error(_run("solve", _write(tmp_path, data)), 2)
    assert "gpus[h900]" in line
    for name in gpu_catalog():
        assert name in line


INFEASIBLE = {
    "ttft-1ms": (_edit(workloads__0__slo={"ttft_ms": 1}), ["chat", "TTFT", "1 ms"]),
    "tpot-0.1ms": (_edit(workloads__0__slo={"tpot_ms": 0.1}), ["chat", "TPOT", "0.1 ms"]),
    "kv-too-small": (
        # l4, tp 1, llama-3.1-8b bf16: (24 * 0.9 - 2) GB - 16.06 GB = 3.54 GB of KV cache at
        # 131,072 B/token = ~27,000 tokens < one 100,050-token sequence
        _edit(
            gpus=[{"type": "l4"}],
            workloads__0__input_tokens=100_000,
            workloads__0__output_tokens=50,
            workloads__0__slo=None,
        ),
        ["chat", "KV", "100,050"],
    ),
    "weights-do-not-fit": (
        _edit(
            gpus=[{"type": "l4"}],
            models=[{"name": "llama-3.1-70b"}],
            workloads__0__model="llama-3.1-70b",
        ),
        ["chat", "llama-3.1-70b"],
    ),
    "availability-cap": (
        _edit(gpus=[{"type": "l40s", "max_gpus": 1}], workloads__0__requests_per_s=200),
        ["max_gpus", "l40s"],
    ),
    "memory-share-below-the-activations": (
        # l4: 24 GB × 0.05 = 1.2 GB a GPU, less 2 GB of activations: nothing for the weights
        _edit(gpus=[{"type": "l4"}], serving={"gpu_memory_utilization": 0.05}),
        ["no room for a KV cache in the 0 GB", "serving.gpu_memory_utilization 0.05", "2 GB"],
    ),
}


@pytest.mark.parametrize("case", list(INFEASIBLE))
def test_infeasible_is_one_line_exit_3(tmp_path, case):
    data, wanted = INFEASIBLE[case]
    if data["workloads"][0].get("slo", 0) is None:
        del data["workloads"][0]["slo"]
    line = _assert_one_line_error(_run("solve", _write(tmp_path, data)), 3)
    assert "infeasible" in line
    for text in wanted:
        assert text in line, (text, line)


def test_schema_is_json_schema():
    result = _run("schema")
    assert result.exit_code == 0
    schema = json.loads(result.stdout)
    assert schema["type"] == "object"
    for field in ("gpus", "models", "workloads", "serving", "profiles"):
        assert field in schema["properties"]
    assert set(schema["required"]) >= {"gpus", "models", "workloads"}


def test_schema_describes_each_field_by_its_docstring():
    """Every property of every model carries the string under its field, cleaned as pydantic
    would (inspect.cleandoc: the second line of a docstring keeps its break)."""
    schema = json.loads(_run("schema").stdout)
    nodes = [schema, *schema["$defs"].values()]
    properties = [prop for node in nodes for prop in node["properties"].values()]
    assert all(prop.get("description") for prop in properties)
    mean = schema["$defs"]["TokenDistribution"]["properties"]["mean"]
    assert mean["description"] == "Mean length, tokens: sizes throughput (tokens/s per request/s)."
    minimum = schema["$defs"]["TokenDistribution"]["properties"]["min"]["description"]
    assert minimum.startswith("Shortest length, tokens. Sets the TPOT of the shortest answers")
    assert "\n" in minimum
    assert list(mean) == sorted(mean)


def test_validate_shipped_instance():
    result = _run("validate", str(MELANGE))
    assert result.exit_code == 0
    assert "valid" in result.stdout
    assert "2 GPU types, 1 model, 4 workloads" in result.stdout


def test_catalog_lists_gpus_and_models():
    result = _run("catalog")
    assert result.exit_code == 0
    assert "h100-sxm" in result.stdout
    assert "llama-3.1-70b" in result.stdout
    as_json = _run("catalog", "--format", "json")
    assert as_json.exit_code == 0
    text = json.dumps(json.loads(as_json.stdout))
    assert "h100-sxm" in text and "llama-3.1-70b" in text


def test_solve_json(tmp_path):
    result = _run("solve", _write(tmp_path, GOOD), "--format", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["status"] == "optimal"
    assert data["gpus"] and set(data["gpus"]) == {"l40s"}
    assert data["cost_per_hour"] == pytest.approx(0.86 * data["gpus"]["l40s"])


def test_solve_json_melange_cost():
    result = _run("solve", str(MELANGE), "--format", "json")
    assert result.exit_code == 0
    assert json.loads(result.stdout)["cost_per_hour"] == pytest.approx(1.01 + 3.67)


def test_solve_csv(tmp_path):
    result = _run("solve", _write(tmp_path, GOOD), "--format", "csv")
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert rows
    assert {"model", "gpu", "replicas", "gpus", "cost_per_hour"} <= set(rows[0])
    assert all(r["gpu"] == "l40s" for r in rows)


def test_solve_markdown(tmp_path):
    result = _run("solve", _write(tmp_path, GOOD), "--format", "markdown")
    assert result.exit_code == 0, result.output
    assert "|" in result.stdout
    assert "l40s" in result.stdout and "chat" in result.stdout


@pytest.mark.parametrize("args", [[], ["--format", "table"]])
def test_solve_table(tmp_path, args):
    result = _run("solve", _write(tmp_path, GOOD), *args)
    assert result.exit_code == 0, result.output
    assert "l40s" in result.stdout and "chat" in result.stdout
    assert "optimal" in result.stdout


@pytest.mark.parametrize("fmt", ["json", "csv", "markdown", "table"])
def test_solve_output_file(tmp_path, fmt):
    out = tmp_path / f"plan.{fmt}"
    result = _run("solve", _write(tmp_path, GOOD), "--format", fmt, "-o", str(out))
    assert result.exit_code == 0, result.output
    assert result.stdout == ""
    text = out.read_text()
    assert "l40s" in text
    if fmt == "json":
        assert json.loads(text)["status"] == "optimal"
    # the file holds what stdout would have shown (the solve time aside)
    shown = _run("solve", _write(tmp_path, GOOD), "--format", fmt).stdout
    if fmt == "json":
        a, b = json.loads(text), json.loads(shown)
        a.pop("solve_seconds"), b.pop("solve_seconds")
        assert a == b
    if fmt == "csv":
        assert text.strip() == shown.strip()


@pytest.mark.parametrize(
    ("name", "first"),
    [("plan.json", "{"), ("plan.JSON", "{"), ("plan.csv", "model,"), ("plan.md", "# fleetopt")],
)
def test_the_output_file_extension_picks_the_format(tmp_path, name, first):
    """`-o plan.json` writes JSON without `--format json` (a table there would fail `simulate`);
    a given --format wins, and an extension not known gives the table."""
    out = tmp_path / name
    assert _run("solve", _write(tmp_path, GOOD), "-o", str(out)).exit_code == 0
    assert out.read_text().startswith(first), out.read_text()[:80]
    assert _run("solve", _write(tmp_path, GOOD), "-o", str(out), "--format", "table").exit_code == 0
    assert out.read_text().startswith("fleetopt plan")
    other = tmp_path / "plan.out"
    assert _run("solve", _write(tmp_path, GOOD), "-o", str(other)).exit_code == 0
    assert other.read_text().startswith("fleetopt plan")


def test_solve_options_are_accepted(tmp_path):
    result = _run(
        "solve", _write(tmp_path, GOOD), "--time-limit", "30", "--mip-gap", "0", "--threads", "1"
    )
    assert result.exit_code == 0, result.output


def test_bad_option_is_a_usage_error(tmp_path):
    line = _assert_one_line_error(_run("solve", _write(tmp_path, GOOD), "--format", "xml"), 2)
    assert line.startswith("error: Invalid value for '--format': 'xml' is not one of")
    assert line.endswith("(see fleetopt solve --help)")


USAGE_ERRORS = {
    "missing-argument": (["solve"], ["Missing argument 'INSTANCE_FILE'", "fleetopt solve --help"]),
    "unknown-option": (["validate", "x.yaml", "--bogus"], ["--bogus", "fleetopt validate --help"]),
    "unknown-command": (["bogus"], ["No such command 'bogus'", "(see fleetopt --help)"]),
    "unknown-group-option": (["--bogus"], ["--bogus", "(see fleetopt --help)"]),
    "missing-option": (["perf", "--gpu", "l40s"], ["--model", "fleetopt perf --help"]),
    "out-of-range": (
        ["perf", "--model", "llama-3.1-8b", "--gpu", "l40s", "--input-tokens", "0"],
        ["--input-tokens", "fleetopt perf --help"],
    ),
    "path-is-a-folder": (["validate", "."], ["INSTANCE_FILE", "is a directory"]),
    "not-a-number": (
        ["perf", "--model", "llama-3.1-8b", "--gpu", "l40s", "--input-tokens", "nan"],
        ["--input-tokens", "'nan' is not a finite number", "fleetopt perf --help"],
    ),
    "infinite": (
        [
            "perf",
            "--model",
            "llama-3.1-8b",
            "--gpu",
            "l40s",
            "--input-tokens",
            "9",
            "--output-tokens",
            "inf",
        ],
        ["--output-tokens", "'inf' is not a finite number"],
    ),
}


@pytest.mark.parametrize("case", list(USAGE_ERRORS))
def test_usage_error_is_one_line_exit_2(case):
    args, wanted = USAGE_ERRORS[case]
    line = _assert_one_line_error(_run(*args), 2)
    assert line.startswith("error: ")
    for text in wanted:
        assert text in line, (text, line)


def test_no_arguments_prints_the_help():
    result = _run()
    assert "Usage:" in result.output and "solve" in result.output


def test_runs_as_a_module():
    """`python -m fleetopt.cli` imports the command modules without a circular import."""
    result = subprocess.run(
        [sys.executable, "-m", "fleetopt.cli", "--help"], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    assert "simulate" in result.stdout and "explain" in result.stdout


def test_the_console_script_ends_with_mains_output_and_exit_code(tmp_path):
    """`run` skips the interpreter's teardown: what the command printed still arrives whole,
    on a pipe, and the exit code is the command's (0, and 2 for bad input)."""
    command = [sys.executable, "-m", "fleetopt.cli"]
    done = subprocess.run([*command, "catalog", "--format", "json"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["gpus"]
    missing = tmp_path / "missing.yaml"
    refused = subprocess.run([*command, "solve", str(missing)], capture_output=True, text=True)
    assert refused.returncode == 2
    assert refused.stdout == "" and refused.stderr.count("\n") == 1
    assert str(missing) in refused.stderr


@pytest.mark.parametrize("option", ["-o", "--report"])
def test_output_into_a_missing_folder_fails_before_solving(tmp_path, option, monkeypatch):
    import fleetopt.pipeline

    def no_solve(*args, **kwargs):
        raise AssertionError("solved before checking the output path")

    monkeypatch.setattr(fleetopt.pipeline, "plan_fleet", no_solve)
    target = tmp_path / "missing" / "plan.md"
    line = _assert_one_line_error(_run("solve", _write(tmp_path, GOOD), option, str(target)), 2)
    assert str(tmp_path / "missing") in line and "does not exist" in line


@pytest.mark.parametrize(
    ("option", "value", "known"),
    [("--model", "llama-9b", "llama-3.1-8b"), ("--gpu", "h900", "l40s")],
)
def test_perf_unknown_name_names_the_option(option, value, known):
    args = {"--model": "llama-3.1-8b", "--gpu": "l40s", option: value}
    flat = [x for pair in args.items() for x in pair]
    line = _assert_one_line_error(
        _run("perf", *flat, "--input-tokens", "100", "--output-tokens", "10"), 2
    )
    assert line.startswith(f"error: {option} {value}: not in the catalog")
    assert known in line and "models[" not in line


@pytest.mark.parametrize(
    ("args", "said", "fix"),
    [
        (
            ["--model", "llama-3.1-70b", "--gpu", "l4", "--tp", "2", "--weight-dtype", "fp8"],
            "weights (71 GB) leave no room for a KV cache",
            "raise --tp",
        ),
        (
            ["--model", "llama-3.1-8b", "--gpu", "l4", "--input-tokens", "30000"],
            "fewer than one 31,000-token sequence",
            "raise --tp, or --kv-dtype fp8",
        ),
        (
            ["--model", "llama-3.1-8b", "--gpu", "l4", "--ttft-ms", "200"],
            "a 1,000-token prompt's first token takes at least",
            "raise --ttft-ms",
        ),
        (
            ["--model", "llama-3.1-8b", "--gpu", "l4", "--tpot-ms", "5", "--role", "decode"],
            "a step of one sequence takes",
            "raise --tpot-ms",
        ),
    ],
)
def test_perf_says_why_no_point_holds(args, said, fix):
    """No operating point: which of the weights, one sequence's KV or a latency limit stops
    it, with the best the replica does and the flag to change (exit 3)."""
    given = {"--input-tokens": "1000", "--output-tokens": "1000"}
    given.update(zip(args[::2], args[1::2], strict=True))
    flags = [x for pair in given.items() for x in pair]
    line = _assert_one_line_error(_run("perf", *flags), 3)
    assert said in line and f"fix: {fix}" in line


def test_perf_names_the_admission_headroom_a_tpot_alone_keeps():
    """With a TPOT of 1,000 ms and no TTFT, the replica keeps slots free for admission (a queue
    that fills every slot has no steady state): it said 'latency target (TTFT)', a target never
    given."""
    args = ["--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--input-tokens", "900"]
    args += ["--output-tokens", "250", "--tpot-ms", "1000", "--format", "json"]
    result = _run("perf", *args)
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["limited_by"].startswith("admission headroom")


def _plan_file(tmp_path: Path, content: bytes) -> str:
    path = tmp_path / "plan.json"
    path.write_bytes(content)
    return str(path)


BAD_PLANS = {
    "missing": (None, "cannot read"),
    "not-json": (b"status: optimal\n", "not valid JSON"),
    "a-list": (b"[1, 2]", "not a fleetopt plan"),
    "a-partial-object": (b'{"status": "optimal"}', "not a fleetopt plan"),
    "not-utf8": (b"\xff\xfe{}", "not UTF-8 text"),
}


@pytest.mark.parametrize("case", list(BAD_PLANS))
def test_simulate_bad_plan_file_is_one_line(tmp_path, case):
    content, wanted = BAD_PLANS[case]
    plan = str(tmp_path / "plan.json") if content is None else _plan_file(tmp_path, content)
    line = _assert_one_line_error(_run("simulate", plan, "--instance", str(MELANGE)), 2)
    assert "plan.json" in line and wanted in line, line


def test_instance_not_utf8_is_one_line(tmp_path):
    path = tmp_path / "instance.yaml"
    path.write_bytes(b"\xff\xfe name: x\n")
    line = _assert_one_line_error(_run("validate", str(path)), 2)
    assert "instance.yaml: not UTF-8 text" in line


def test_explain_missing_file_is_one_line(tmp_path):
    line = _assert_one_line_error(_run("explain", str(tmp_path / "nope.yaml")), 2)
    assert "nope.yaml" in line


@pytest.mark.parametrize("command", ["calibrate", "import-aiconfigurator"])
def test_writing_into_a_missing_folder_is_one_line(tmp_path, command):
    """Files written deep inside a command (an overlay, profiles) fail as one line too."""
    data = ROOT / "tests" / "data"
    target = tmp_path / "missing" / "out.yaml"
    args = {
        "calibrate": [str(data / "vllm_serve_result.json"), "--model", "llama-3.1-8b"],
        "import-aiconfigurator": [str(data / "aiconfigurator_agg.csv"), "--model", "m"],
    }[command]
    extra = ["--tp", "1"] if command == "calibrate" else []
    result = _run(command, *args, "--gpu", "h100-sxm", *extra, "-o", str(target))
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output
    assert lines[0] == (
        f"error: {target}: folder {target.parent} does not exist; create it or choose another path"
    )
