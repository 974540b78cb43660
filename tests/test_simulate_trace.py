"""Trace input: the Azure layout loads as is, bad rows name file:line and the column, and the
first minutes of both Azure 2023 traces replay against their instances' plans."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from fleetopt.catalog import resolve
from fleetopt.errors import InputError
from fleetopt.instance import load_instance
from fleetopt.pipeline import plan_fleet
from fleetopt.simulate import simulate_plan, trace
from fleetopt.simulate.trace import load_trace

ROOT = Path(__file__).resolve().parent.parent
TRACES = ROOT.parent / "shared" / "data"
MINUTES = 8
"""Replayed prefix. The code trace comes in minute-long bursts of up to 3.5× its hourly rate;
its minute-3 burst outruns the plan's prefill capacity and the backlog clears by minute 6, so
an 8-minute prefix ends with the fleet caught up and the achieved rates equal the offered."""
AZURE = """TIMESTAMP,ContextTokens,GeneratedTokens
2023-11-16 18:15:46.6805900,374,44
2023-11-16 18:15:50.9951690,396,109
2023-11-16 18:15:51.2224670,879,55
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "trace.csv"
    path.write_text(text)
    return path


def test_reads_the_azure_layout(tmp_path):
    requests = load_trace(_write(tmp_path, AZURE), ["chat"])
    assert requests.arrival_s.tolist() == pytest.approx([0.0, 4.314579, 4.541877])
    assert requests.input_tokens.tolist() == [374, 396, 879]
    assert requests.output_tokens.tolist() == [44, 109, 55]
    assert requests.workload.tolist() == [0, 0, 0]


def test_seconds_and_a_class_column_sorted_by_time(tmp_path):
    text = "time,input_tokens,output_tokens,class\n2.5,10,5,rag\n0.5,20,6,chat\n"
    requests = load_trace(_write(tmp_path, text), ["chat", "rag"])
    assert requests.arrival_s.tolist() == [0.0, 2.0]
    assert requests.workload.tolist() == [0, 1]


def test_reads_zoned_datetimes_and_the_burstgpt_layout(tmp_path):
    """The Azure 2024 traces stamp times with a zone (times without one are UTC); BurstGPT
    names its columns Timestamp, Request tokens, Response tokens, and logs failed requests with
    no response tokens, which are left out and counted; token counts may be written as 12.0."""
    zoned = (
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2024-05-10 00:00:00.009930+00:00,100,20\n"
        "2024-05-10 02:00:01.5+02:00,200,30\n"
        "2024-05-10 00:00:02.009930,300,40\n"
    )
    requests = load_trace(_write(tmp_path, zoned), ["chat"])
    assert requests.arrival_s.tolist() == pytest.approx([0.0, 1.49007, 2.0])
    assert requests.input_tokens.tolist() == [100, 200, 300]
    burst = (
        "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
        "5,ChatGPT,472.0,18,490,Conversation log\n3,GPT-4,1087,229,1316,Conversation log\n"
        "4,ChatGPT,300,0,300,Conversation log\n"
    )
    requests = load_trace(_write(tmp_path, burst), ["chat"])
    assert "1 rows without output tokens left out" in requests.source
    assert requests.arrival_s.tolist() == [0.0, 2.0]
    assert requests.input_tokens.tolist() == [1087, 472]
    assert requests.output_tokens.tolist() == [229, 18]


@pytest.mark.parametrize(
    ("text", "where"),
    [
        (AZURE + "2023-11-16 18:15:52.0,12x,5\n", ":5: column ContextTokens: '12x'"),
        (AZURE + "2023-11-16 18:15:52.0,12,-3\n", ":5: column GeneratedTokens: '-3'"),
        (AZURE + "2023-11-16 18:15:52.0,0,3\n", ":5: column ContextTokens: '0'"),
        (AZURE + "2023-11-16 18:15:52.0,12.5,3\n", ":5: column ContextTokens: '12.5'"),
        (AZURE + "2023-11-16 18:15:52.0,1e20,3\n", ":5: column ContextTokens: '1e20'"),
        (AZURE + "yesterday,12,3\n", ":5: column TIMESTAMP: 'yesterday'"),
        (AZURE + "2023-11-16 18:15:52.0,12\n", ":5: column GeneratedTokens: missing"),
        ("when,ContextTokens,GeneratedTokens\n1,2,3\n", ":1: no time column"),
    ],
)
def test_a_bad_row_names_its_line_and_column(tmp_path, text, where):
    with pytest.raises(InputError, match="trace.csv" + where.replace("(", r"\(")):
        load_trace(_write(tmp_path, text), ["chat"])


def test_several_workloads_need_a_class(tmp_path):
    path = _write(tmp_path, AZURE)
    with pytest.raises(InputError, match=r"no class column .* --class NAME"):
        load_trace(path, ["chat", "rag"])
    assert load_trace(path, ["chat", "rag"], assign="rag").workload.tolist() == [1, 1, 1]
    with pytest.raises(InputError, match="--class: 'code' is not a workload"):
        load_trace(path, ["chat", "rag"], assign="code")


def test_an_unknown_class_names_its_line(tmp_path):
    text = "time,input_tokens,output_tokens,class\n0,10,5,chat\n1,10,5,code\n"
    with pytest.raises(InputError, match=r"trace.csv:3: column class: 'code' is not a workload"):
        load_trace(_write(tmp_path, text), ["chat"])


@pytest.mark.parametrize(
    ("instance", "trace"), [("azure-conv-70b", "conv"), ("azure-code-70b", "code")]
)
def test_replays_the_first_minutes_of_the_azure_traces(instance, trace):
    path = TRACES / f"azure-llm-2023-{trace}.csv"
    if not path.exists():
        pytest.skip(f"{path} is absent (the shared data sits beside the repository in CI)")
    loaded = load_instance(ROOT / "instances" / f"{instance}.yaml")
    plan, resolved = plan_fleet(loaded), resolve(loaded)
    requests = load_trace(path, [w.name for w in plan.workloads])
    requests = requests.head(int(np.searchsorted(requests.arrival_s, MINUTES * 60)))
    report = simulate_plan(plan, resolved, requests)
    (w,) = report["workloads"]
    assert report["refused"] == 0
    assert w["requests"] == len(requests) - report["warmup_requests"]
    for key in ("ttft_ms", "tpot_ms", "e2e_ms"):
        assert 0 < w[key]["p50"] <= w[key]["p90"] <= w[key]["p99"]
    assert 0 <= w["slo_attainment"]["both"] <= 1
    start, end = report_window(requests, report)
    window = (requests.arrival_s >= start) & (requests.arrival_s <= end)
    span = end - start
    assert w["prefill_tokens_per_s"] == pytest.approx(
        requests.input_tokens[window].sum() / span, rel=0.05
    )
    assert w["decode_tokens_per_s"] == pytest.approx(
        requests.output_tokens[window].sum() / span, rel=0.05
    )


def report_window(requests, report) -> tuple[float, float]:
    """The measured window: first request after the warm-up to the last arrival."""
    return float(requests.arrival_s[report["warmup_requests"]]), float(requests.arrival_s[-1])


def test_chunks_read_as_the_rows_do(tmp_path, monkeypatch):
    """Columns parsed a chunk at a time (here two rows, so every rule meets a chunk's edge)
    give the arrays the row-by-row reading gives: classes, failed requests left out, order."""
    monkeypatch.setattr(trace, "CHUNK_ROWS", 2)
    rng = np.random.default_rng(7)
    rows = [
        f"{rng.uniform(0, 60):.6f},{rng.integers(1, 9000)},{rng.integers(0, 3)},"
        f"{rng.choice(['chat', 'rag'])}"
        for _ in range(41)
    ]
    path = _write(tmp_path, "time,input_tokens,output_tokens,class\n" + "\n".join(rows) + "\n")
    columns = {"time": (0, "time"), "input": (1, "input_tokens"), "output": (2, "output_tokens")}
    columns["class"] = (3, "class")
    with path.open(newline="") as handle:
        reader = csv.reader(handle)
        next(reader)
        chunked = trace._read_columns(reader, columns, ["chat", "rag"], None)
    assert chunked is not None
    by_row = trace._read_rows(path, columns, ["chat", "rag"], None)
    for fast, slow in zip(chunked, by_row, strict=True):
        assert fast.dtype == slow.dtype and np.array_equal(fast, slow)
    requests = load_trace(path, ["chat", "rag"])
    left_out = sum(row.split(",")[2] == "0" for row in rows)
    assert len(requests) == len(rows) - left_out and left_out > 0
    assert np.all(np.diff(requests.arrival_s) >= 0) and requests.arrival_s[0] == 0.0


@pytest.mark.parametrize(
    ("last", "message"),
    [
        ("2023-11-16 18:15:59.0,12,nan", ":8: column GeneratedTokens: 'nan'"),
        ("9.5,12,3", ": column TIMESTAMP: mixes seconds and datetimes"),
        ("inf,12,3", ":8: column TIMESTAMP: 'inf' is neither seconds nor a datetime"),
    ],
)
def test_a_bad_cell_past_the_first_chunk_is_named(tmp_path, monkeypatch, last, message):
    monkeypatch.setattr(trace, "CHUNK_ROWS", 2)
    more = "2023-11-16 18:15:52.0,12,3\n2023-11-16 18:15:53.0,14,4\n"
    text = AZURE + more + "2023-11-16 18:15:54.0,16,5\n" + last + "\n"
    with pytest.raises(InputError, match="trace.csv" + message):
        load_trace(_write(tmp_path, text), ["chat"])


def test_a_byte_order_mark_and_crlf_lines_read_as_plain_text(tmp_path):
    """Spreadsheets save CSV with a UTF-8 byte order mark and CRLF lines: the first column is
    still TIMESTAMP (it was '\\ufeffTIMESTAMP', and no time column was found)."""
    path = tmp_path / "trace.csv"
    path.write_bytes(b"\xef\xbb\xbf" + AZURE.replace("\n", "\r\n").encode())
    requests = load_trace(path, ["chat"])
    assert requests.input_tokens.tolist() == [374, 396, 879]
    assert requests.arrival_s.tolist() == pytest.approx([0.0, 4.314579, 4.541877])


def test_blank_lines_are_skipped(tmp_path, monkeypatch):
    """A trace edited by hand often ends in a blank line (it was refused: 'column TIMESTAMP:
    missing (the row has 0 fields)'); a chunk of blank lines ends nothing."""
    monkeypatch.setattr(trace, "CHUNK_ROWS", 2)
    rows = AZURE.splitlines(keepends=True)
    text = rows[0] + rows[1] + "\n\n\n" + rows[2] + "\n" + rows[3] + "\n\n"
    requests = load_trace(_write(tmp_path, text), ["chat"])
    assert requests.input_tokens.tolist() == [374, 396, 879]
