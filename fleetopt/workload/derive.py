"""Read a data-given length mix and derive the workload fields it stands for."""

from __future__ import annotations

import csv
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from stat import S_ISREG

import numpy as np

from fleetopt.errors import InputError
from fleetopt.simulate.trace import _tokens, load_trace

PERCENTILES = {"p50": 50.0, "p90": 90.0, "p99": 99.0}
LENGTH_COLUMNS = ("input_tokens", "output_tokens", "share")


@dataclass(frozen=True)
class Sample:
    """Requests (or histogram cells) with their weights; arrivals for a trace."""

    input_tokens: np.ndarray
    output_tokens: np.ndarray
    weight: np.ndarray
    """Sums to 1."""
    arrival_s: np.ndarray | None = None

    def where(self, mask: np.ndarray) -> Sample:
        """The part of the sample under the mask, reweighted to sum to 1."""
        weight = self.weight[mask]
        return Sample(self.input_tokens[mask], self.output_tokens[mask], weight / weight.sum())


def sample_of(workload) -> Sample:
    """The data of a validated data-given workload (its paths already absolute)."""
    if workload.trace is not None:
        return read_trace(workload.trace, workload.name, f"workloads[{workload.name}].trace")
    if workload.lengths.csv is not None:
        return read_lengths_csv(workload.lengths.csv, f"workloads[{workload.name}].lengths.csv")
    return _histogram(
        [(b.input_tokens, b.output_tokens, b.share) for b in workload.lengths.histogram]
    )


def derive_fields(data: dict, base: Path) -> dict:
    """The workload's raw fields with input_tokens/output_tokens (and with `rate: from_trace`,
    requests_per_s) derived from its data; paths made absolute so the data can be re-read."""
    name = data.get("name", "?")
    data = dict(data)
    if data.get("trace") and data.get("lengths"):
        raise ValueError("give trace or lengths, not both")
    rate = data.get("rate", data.get("rate_source"))
    if data.get("trace"):
        path = _absolute(base, data["trace"])
        data["trace"] = path
        sample = read_trace(path, str(name), f"workloads[{name}].trace")
    else:
        lengths = data["lengths"]
        if not isinstance(lengths, dict):
            return data  # the schema names the type error
        if lengths.get("csv"):
            lengths = {**lengths, "csv": _absolute(base, lengths["csv"])}
            data["lengths"] = lengths
            sample = read_lengths_csv(lengths["csv"], f"workloads[{name}].lengths.csv")
        elif isinstance(lengths.get("histogram"), list):
            sample = _histogram(_cells(lengths["histogram"]))
        else:
            return data
        if rate is not None:
            raise ValueError("rate: from_trace needs a trace (a histogram has no arrival times)")
    derived = {
        "input_tokens": distribution(sample.input_tokens, sample.weight),
        "output_tokens": distribution(sample.output_tokens, sample.weight),
    }
    if rate == "from_trace":
        scale = data.get("rate_scale", 1.0)
        if not isinstance(scale, int | float) or scale <= 0:
            return data  # the schema names the bad rate_scale
        window = data.get("rate_window_s")
        derived["requests_per_s"] = trace_rate(sample.arrival_s, window, data["trace"]) * scale
    for field, value in derived.items():
        given = data.get(field)
        if given is not None and not _same(given, value):
            raise ValueError(
                f"{field} is derived from the data; drop it (or drop trace/lengths/rate)"
            )
        data[field] = value
    return data


def distribution(values: np.ndarray, weight: np.ndarray) -> dict[str, float]:
    """Mean, min, p50/p90/p99 and max as TokenDistribution fields. A percentile is the smallest
    length with at least that share of the weight at or below it (never interpolated down).
    Equal weights (a trace's requests) need the lengths sorted, not their order: a tenth of
    the time on a million requests, the same sums."""
    if (weight == weight[0]).all():
        ordered, cumulative = np.sort(values), np.cumsum(weight)
    else:
        order = np.argsort(values, kind="stable")
        ordered, cumulative = values[order], np.cumsum(weight[order])
    out = {"mean": float(np.dot(values, weight)), "min": float(ordered[0])}
    for key, level in PERCENTILES.items():
        index = int(np.searchsorted(cumulative, level / 100 * cumulative[-1] * (1 - 1e-12)))
        out[key] = float(ordered[min(index, len(ordered) - 1)])
    out["max"] = float(ordered[-1])
    out["mean"] = min(max(out["mean"], out["min"]), out["max"])
    return out


def trace_rate(arrival_s: np.ndarray, window_s: float | None, where: str) -> float:
    """Requests per second over the trace's span, or over its busiest window of `window_s`."""
    span = float(arrival_s[-1] - arrival_s[0]) if len(arrival_s) else 0.0
    if span <= 0:
        raise InputError(
            f"{where}: {len(arrival_s)} request(s) and no time between the first and the last; "
            "rate: from_trace needs requests spread over a span (or give requests_per_s)"
        )
    if window_s is None or not isinstance(window_s, int | float) or window_s >= span:
        return len(arrival_s) / span
    ends = np.searchsorted(arrival_s, arrival_s + window_s, side="left")
    return float((ends - np.arange(len(arrival_s))).max()) / window_s


def read_trace(path: str, name: str, field: str) -> Sample:
    stat = _stat(path, field)
    return _read_trace(path, name, stat.st_mtime_ns, stat.st_size)


def read_lengths_csv(path: str, field: str) -> Sample:
    stat = _stat(path, field)
    return _read_lengths_csv(path, stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=16)
def _read_trace(path: str, name: str, _mtime: int, _size: int) -> Sample:
    requests = load_trace(path, [name])
    count = len(requests)
    return Sample(
        requests.input_tokens,
        requests.output_tokens,
        np.full(count, 1.0 / count),
        requests.arrival_s,
    )


@lru_cache(maxsize=16)
def _read_lengths_csv(path: str, _mtime: int, _size: int) -> Sample:
    with Path(path).open(newline="", encoding="utf-8-sig") as handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        if header is None:
            raise InputError(f"{path}: empty file (expected columns {', '.join(LENGTH_COLUMNS)})")
        names = [h.strip().lower() for h in header]
        missing = [c for c in LENGTH_COLUMNS if c not in names]
        if missing:
            raise InputError(
                f"{path}:1: no {', '.join(missing)} column (found {', '.join(header)})"
            )
        index = [names.index(c) for c in LENGTH_COLUMNS]
        cells = [_length_row(path, reader.line_num, row, index) for row in reader if row]
    if not cells:
        raise InputError(f"{path}: the file has a header but no rows")
    return _histogram(cells)


def _length_row(path: str, line: int, row: list[str], index: list[int]) -> tuple[int, int, float]:
    if max(index) >= len(row):
        raise InputError(f"{path}:{line}: {len(row)} fields, expected {', '.join(LENGTH_COLUMNS)}")
    text = row[index[2]].strip()
    try:
        share = float(text)
    except ValueError:
        share = -1.0
    if not share > 0 or share == float("inf"):
        raise InputError(f"{path}:{line}: column share: {text!r} is not a number > 0")
    return (
        _tokens(Path(path), line, "input_tokens", row[index[0]].strip()),
        _tokens(Path(path), line, "output_tokens", row[index[1]].strip()),
        share,
    )


def _cells(histogram: list) -> list[tuple[float, float, float]]:
    """Inline histogram cells; anything malformed is left for the schema to name."""
    cells = []
    for cell in histogram:
        values = [cell.get(c) for c in LENGTH_COLUMNS] if isinstance(cell, dict) else []
        if len(values) != 3 or not all(isinstance(v, int | float) and v > 0 for v in values):
            raise ValueError(
                "lengths.histogram: each cell needs input_tokens, output_tokens and share, all > 0"
            )
        cells.append(tuple(float(v) for v in values))
    return cells


def _histogram(cells: list[tuple[float, float, float]]) -> Sample:
    inputs, outputs, shares = (np.array(c, dtype=float) for c in zip(*cells, strict=True))
    return Sample(inputs, outputs, shares / shares.sum())


def _absolute(base: Path, path: object) -> str:
    if not isinstance(path, str):
        raise ValueError("a data path must be a string")
    return str((base / path).resolve())


def _stat(path: str, field: str):
    """The file's stat (its cache key), or an error naming the field that gave the path."""
    try:
        stat = Path(path).stat()
    except FileNotFoundError:
        stat = None
    except OSError as exc:
        raise InputError(f"{field}: cannot read {path} ({exc.strerror})") from None
    if stat is None or not S_ISREG(stat.st_mode):
        raise InputError(f"{field}: no file at {path}; give a path relative to the instance file")
    return stat


def _same(given: object, derived: object) -> bool:
    """A derived value written back (a dumped instance read again) is not a conflict."""
    if isinstance(derived, dict):
        return isinstance(given, dict) and all(_same(given.get(k), v) for k, v in derived.items())
    return isinstance(given, int | float) and abs(given - derived) <= 1e-9 * max(1.0, abs(derived))
