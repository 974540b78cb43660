"""Workloads given as data: a trace or a length histogram becomes the lengths (and the rate) of
an ordinary request class, read relative to the instance file; bad data names file and line."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetopt.errors import InputError
from fleetopt.instance import load_instance, parse_instance

TRACE = """TIMESTAMP,ContextTokens,GeneratedTokens
2023-11-16 18:15:40.0,100,10
2023-11-16 18:15:41.0,200,20
2023-11-16 18:15:42.0,300,30
2023-11-16 18:15:42.5,400,40
2023-11-16 18:15:50.0,1000,50
"""
"""Five requests over 10 s: 0.5 req/s; the busiest 2 s (41.0 to 43.0) holds three."""


def _instance(workload: dict) -> dict:
    return {
        "gpus": [{"type": "h100-sxm"}],
        "models": [{"name": "llama-3.1-8b"}],
        "workloads": [{"name": "chat", "model": "llama-3.1-8b", **workload}],
    }


def _load(tmp_path: Path, workload: dict, trace: str = TRACE):
    """Instance file in one folder, trace in a subfolder: the path is relative to the file."""
    (tmp_path / "data").mkdir(exist_ok=True)
    (tmp_path / "data" / "t.csv").write_text(trace)
    path = tmp_path / "instance.yaml"
    import yaml

    path.write_text(yaml.safe_dump(_instance({"trace": "data/t.csv", **workload})))
    return load_instance(path).workloads[0]


def test_a_trace_gives_the_lengths_and_the_rate(tmp_path, monkeypatch):
    monkeypatch.chdir("/")  # the trace path is relative to the instance file, not the cwd
    w = _load(tmp_path, {"rate": "from_trace", "rate_scale": 2})
    assert w.input.mean == pytest.approx(400.0)
    assert (w.input.min, w.input.p50, w.input.p90, w.input.p99, w.input.max) == (
        100,
        300,
        1000,
        1000,
        1000,
    )
    assert w.output.mean == pytest.approx(30.0)
    assert w.rate == pytest.approx(2 * 5 / 10)
    assert w.from_data and Path(w.trace).is_absolute()


def test_the_busiest_window_sizes_the_rate(tmp_path):
    assert _load(tmp_path, {"rate": "from_trace", "rate_window_s": 2}).rate == pytest.approx(1.5)
    # a window as long as the span is the mean rate
    assert _load(tmp_path, {"rate": "from_trace", "rate_window_s": 60}).rate == pytest.approx(0.5)


def test_a_histogram_weights_its_cells():
    cells = [
        {"input_tokens": 100, "output_tokens": 10, "share": 3},
        {"input_tokens": 1000, "output_tokens": 50, "share": 1},
    ]
    w = parse_instance(_instance({"lengths": {"histogram": cells}, "requests_per_s": 4}))
    (w,) = w.workloads
    assert w.input.mean == pytest.approx(325.0)
    assert (w.input.p50, w.input.p90, w.input.max) == (100, 1000, 1000)
    assert w.output.mean == pytest.approx(20.0)
    assert w.rate == 4


def test_a_lengths_csv(tmp_path):
    (tmp_path / "mix.csv").write_text("input_tokens,output_tokens,share\n100,10,0.5\n300,30,0.5\n")
    import yaml

    path = tmp_path / "i.yaml"
    data = _instance({"lengths": {"csv": "mix.csv"}, "requests_per_s": 1})
    path.write_text(yaml.safe_dump(data))
    (w,) = load_instance(path).workloads
    assert (w.input.mean, w.input.p50, w.input.max) == (200, 100, 300)


def test_a_dumped_workload_validates_again(tmp_path):
    """Derived fields written back (a sweep re-validates a dumped instance) are no conflict."""
    from fleetopt.instance import Workload

    w = _load(tmp_path, {"rate": "from_trace"})
    assert Workload.model_validate(w.model_dump()) == w


@pytest.mark.parametrize(
    ("trace", "message"),
    [
        (TRACE + "2023-11-16 18:15:51.0,12x,5\n", r"t.csv:7: column ContextTokens: '12x'"),
        (TRACE + "2023-11-16 18:15:51.0,0,5\n", r"t.csv:7: column ContextTokens: '0'"),
        (TRACE + "2023-11-16 18:15:51.0,5,-3\n", r"t.csv:7: column GeneratedTokens: '-3'"),
        ("", r"t.csv: empty trace"),
        ("TIMESTAMP,ContextTokens,GeneratedTokens\n", r"t.csv: the trace has a header but no"),
        (
            "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:40.0,100,10\n",
            r"t.csv: 1 request\(s\) and no time between the first and the last",
        ),
    ],
)
def test_bad_trace_data_names_file_and_line(tmp_path, trace, message):
    with pytest.raises(InputError, match=message):
        _load(tmp_path, {"rate": "from_trace"}, trace)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("input_tokens,output_tokens,share\n100,10,1\n0,5,1\n", r"mix.csv:3: column input_tokens"),
        ("input_tokens,output_tokens,share\n100,10,0\n", r"mix.csv:2: column share: '0'"),
        ("input_tokens,output_tokens\n100,10\n", r"mix.csv:1: no share column"),
        ("", r"mix.csv: empty file"),
    ],
)
def test_bad_lengths_csv_names_file_and_line(tmp_path, text, message):
    (tmp_path / "mix.csv").write_text(text)
    with pytest.raises(InputError, match=message):
        parse_instance(
            _instance({"lengths": {"csv": str(tmp_path / "mix.csv")}, "requests_per_s": 1})
        )


@pytest.mark.parametrize(
    ("workload", "message"),
    [
        ({"trace": "x.csv", "input_tokens": 5}, r"input_tokens is derived from the data; drop it"),
        (
            {"lengths": {"histogram": [{"input_tokens": 1, "output_tokens": 1, "share": 0}]}},
            r"each cell needs input_tokens, output_tokens and share, all > 0",
        ),
        (
            {"input_tokens": 5, "output_tokens": 5, "rate": "from_trace"},
            r"rate applies to a workload given by trace or lengths",
        ),
        ({"requests_per_s": 1}, r"give input_tokens and output_tokens, or trace, or lengths"),
    ],
)
def test_bad_data_fields_name_the_field(tmp_path, workload, message):
    (tmp_path / "x.csv").write_text(TRACE)
    if "trace" in workload:
        workload = {**workload, "trace": str(tmp_path / "x.csv"), "rate": "from_trace"}
    with pytest.raises(InputError, match=r"workloads\[chat\].*" + message):
        parse_instance(_instance(workload))


@pytest.mark.parametrize(
    ("workload", "field"),
    [
        ({"trace": "missing.csv", "rate": "from_trace"}, r"workloads\[chat\]\.trace"),
        (
            {"lengths": {"csv": "missing.csv"}, "requests_per_s": 1},
            r"workloads\[chat\]\.lengths\.csv",
        ),
    ],
)
def test_a_missing_data_file_names_the_field(workload, field):
    with pytest.raises(InputError, match=field + r": no file at .*missing\.csv; give a path"):
        parse_instance(_instance(workload))
