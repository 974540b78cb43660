"""`solve --report`: Markdown with PNGs beside it, or one HTML file with the PNGs inside; and the
user guide's field reference, generated from the schema, kept current."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from click.testing import CliRunner

from fleetopt.cli import main
from fleetopt.report import fields

ROOT = Path(__file__).resolve().parent.parent
PNG = b"\x89PNG\r\n\x1a\n"


def _instance(tmp_path: Path) -> str:
    data = {
        "name": "report",
        "gpus": [{"type": "l40s"}],
        "models": [{"name": "llama-3.1-8b"}],
        "workloads": [
            {
                "name": "chat",
                "model": "llama-3.1-8b",
                "requests_per_s": 20,
                "input_tokens": 900,
                "output_tokens": 250,
                "slo": {"ttft_ms": 800, "tpot_ms": 40},
            }
        ],
        "serving": {"modes": ["colocated", "disaggregated"], "tensor_parallel": [1]},
    }
    path = tmp_path / "instance.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def test_markdown_report_with_plots_beside_it(tmp_path):
    report = tmp_path / "plan.md"
    result = CliRunner().invoke(main, ["solve", _instance(tmp_path), "--report", str(report)])
    assert result.exit_code == 0, result.output
    text = report.read_text()
    for heading in ("## Pools", "## Workloads", "## Cost by GPU type", "## Plots"):
        assert heading in text
    for stem in ("gpus-and-cost", "utilization", "tokens"):
        image = tmp_path / f"plan-{stem}.png"
        assert image.read_bytes().startswith(PNG)
        assert f"]({image.name})" in text


def test_html_report_is_one_file(tmp_path):
    report = tmp_path / "plan.html"
    result = CliRunner().invoke(main, ["solve", _instance(tmp_path), "--report", str(report)])
    assert result.exit_code == 0, result.output
    text = report.read_text()
    assert text.count('src="data:image/png;base64,') == 3
    assert "<h2>Pools</h2><table>" in text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["instance.yaml", "plan.html"]


def test_unknown_report_format_is_input_error(tmp_path):
    result = CliRunner().invoke(main, ["solve", _instance(tmp_path), "--report", "plan.pdf"])
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        "error: --report plan.pdf: unknown format; name the file .md or .html"
    ]


def test_user_guide_field_reference_is_current():
    guide = (ROOT / "docs" / "user-guide.md").read_text()
    assert fields.markdown() in guide, (
        "docs/user-guide.md is stale: run `python -m fleetopt.report.fields docs/user-guide.md`"
    )


def test_every_field_has_a_row():
    paths = {row[0] for row in fields.rows()}
    assert {"`workloads[].slo.ttft_ms`", "`gpus[].max_gpus`", "`serving.chunk_tokens`"} <= paths


def test_every_field_is_documented():
    """Each field has a docstring: the guide's meaning column and the schema's description."""
    assert all(row[3] for row in fields.rows()), [row[0] for row in fields.rows() if not row[3]]
    schema = json.loads(CliRunner().invoke(main, ["schema"]).stdout)
    models = {"Instance": schema, **schema["$defs"]}
    missing = [
        f"{model}.{name}"
        for model, body in models.items()
        for name, prop in body.get("properties", {}).items()
        if not prop.get("description")
    ]
    assert not missing, missing
    ttft = schema["$defs"]["Slo"]["properties"]["ttft_ms"]["description"]
    assert ttft.startswith("Time to first token target, ms")
