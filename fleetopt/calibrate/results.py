"""Read serving-benchmark result files: vLLM `bench serve --save-result` and GuideLLM reports.

Each run becomes a `Run`: mean prompt and output lengths, output tokens/s of the server, the mean
TPOT it ran at and, where known, the requests it held in flight: vLLM's `max_concurrency` when
requests were sent as fast as that allowed (`request_rate` inf), GuideLLM's measured mean
`request_concurrency` (Little's law: throughput = in flight / latency, whatever the strategy).
A vLLM run at a finite rate states only a cap, which need not have been reached. Field layouts:

- vLLM (`vllm/benchmarks/serve.py`, `benchmark_serving.py`): one JSON object per run with
  `completed`, `total_input_tokens`, `total_output_tokens`, `output_throughput`, `mean_tpot_ms`
  (also `duration`, `request_throughput`, `*_ttft_ms`, `p99_tpot_ms`, `max_concurrency`,
  `request_rate`).
- GuideLLM (`guidellm benchmark --output-path report.json`): `{"benchmarks": [...]}`, one entry per
  rate of a sweep, each with `metrics.<name>.successful.{mean, median, percentiles}` for
  `prompt_token_count`, `output_token_count`, `output_tokens_per_second`,
  `time_per_output_token_ms` and `request_concurrency`.

A file that is not one of these, or lacks a field, is an InputError naming the file and field.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from fleetopt.errors import InputError


@dataclass(frozen=True)
class Run:
    source: str
    input_tokens: float
    output_tokens: float
    output_tokens_per_s: float
    tpot_ms: float
    concurrency: float | None


def read_runs(path: str | Path) -> list[Run]:
    """The runs of one result file, vLLM or GuideLLM, told apart by their fields."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8-sig"))
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror})") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not valid JSON ({exc.msg}, line {exc.lineno})") from None
    if isinstance(data, dict) and "benchmarks" in data:
        benchmarks = data["benchmarks"]
        if not isinstance(benchmarks, list) or not benchmarks:
            raise InputError(f"{path}: field `benchmarks` must be a non-empty list")
        return [_guidellm_run(path, i, b) for i, b in enumerate(benchmarks)]
    if isinstance(data, dict) and "output_throughput" in data:
        return [_vllm_run(path, data)]
    raise InputError(
        f"{path}: not a vLLM `bench serve --save-result` file (no `output_throughput` field) "
        "nor a GuideLLM report (no `benchmarks` field)"
    )


def _vllm_run(path: Path, data: dict) -> Run:
    completed = _number(path, data, "completed", positive=True)
    concurrency = data.get("max_concurrency")
    if data.get("request_rate", "inf") not in ("inf", float("inf")):
        concurrency = None  # a rate-driven run: the cap need not have been reached
    return Run(
        source=str(path),
        input_tokens=_number(path, data, "total_input_tokens", positive=True) / completed,
        output_tokens=_number(path, data, "total_output_tokens", positive=True) / completed,
        output_tokens_per_s=_number(path, data, "output_throughput", positive=True),
        tpot_ms=_number(path, data, "mean_tpot_ms", positive=True),
        concurrency=None
        if concurrency is None
        else _number(path, data, "max_concurrency", positive=True),
    )


def _guidellm_run(path: Path, index: int, benchmark: object) -> Run:
    where = f"benchmarks[{index}]"

    def mean(metric: str, required: bool = True) -> float | None:
        node = benchmark
        field = f"{where}.metrics.{metric}.successful.mean"
        for key in ("metrics", metric, "successful", "mean"):
            if not isinstance(node, dict) or node.get(key) is None:
                if not required:
                    return None
                raise InputError(f"{path}: field `{field}` is missing")
            node, parent = node[key], node
        return _number(path, parent, "mean", positive=True, label=field)

    return Run(
        source=f"{path} {where}",
        input_tokens=mean("prompt_token_count"),
        output_tokens=mean("output_token_count"),
        output_tokens_per_s=mean("output_tokens_per_second"),
        tpot_ms=mean("time_per_output_token_ms"),
        concurrency=mean("request_concurrency", required=False),
    )


def _number(
    path: Path, node: dict, key: str, positive: bool = False, label: str | None = None
) -> float:
    label = label or key
    if not isinstance(node, dict) or node.get(key) is None:
        raise InputError(f"{path}: field `{label}` is missing")
    value = node[key]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InputError(f"{path}: field `{label}` must be a number, not {value!r}")
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):  # JSON from Python may hold NaN, Infinity or huge integers
        raise InputError(f"{path}: field `{label}` must be a finite number, not {str(value)[:20]}")
    if positive and number <= 0:
        raise InputError(f"{path}: field `{label}` must be positive, not {value!r}")
    return number
