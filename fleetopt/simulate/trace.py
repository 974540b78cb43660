"""Read a request trace CSV: arrival time, input tokens, output tokens, optional class.

Columns are found by name, case-insensitively, so the public Azure LLM inference traces
(TIMESTAMP, ContextTokens, GeneratedTokens; 2023 and 2024) and BurstGPT (Timestamp, Request
tokens, Response tokens) load as they are. Times are seconds (a number) or datetimes
(`2023-11-16 18:15:46.6805900`, `2024-05-10 00:00:00.009930+00:00`; without a zone, UTC); either
way the trace is shifted to start at 0 and sorted by time. Token counts are whole numbers (`12`
or `12.0`); a row with no output tokens is a request that failed (BurstGPT logs them) and is
left out, counted in the arrivals' description. Every bad row is an InputError naming
file:line and the column.
"""

from __future__ import annotations

import csv
import math
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from fleetopt.errors import InputError
from fleetopt.simulate.arrivals import Requests

TIME = ("timestamp", "time", "arrival_time", "arrival_s", "timestamp_s")
INPUT = (
    "contexttokens",
    "input_tokens",
    "prompt_tokens",
    "input",
    "request tokens",
    "input_length",
)
OUTPUT = (
    "generatedtokens",
    "output_tokens",
    "completion_tokens",
    "output",
    "response tokens",
    "output_length",
)
CLASS = ("class", "workload")
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def load_trace(path: str | Path, workloads: list[str], assign: str | None = None) -> Requests:
    """The trace's requests, each of one of `workloads` (by its class column, or `assign`,
    or the only workload there is)."""
    path = Path(path)
    try:
        handle = path.open(newline="")
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror})") from None
    with handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        if header is None:
            raise InputError(f"{path}: empty trace")
        columns = _columns(path, header)
        default = _default_class(path, workloads, assign, "class" in columns)
        read = [_row(path, reader.line_num, row, columns, workloads, default) for row in reader]
    rows = [row for row in read if row[2] > 0]
    if not rows:
        raise InputError(f"{path}: the trace has a header but no requests with output tokens")
    failed = len(read) - len(rows)
    times, inputs, outputs, which = (np.array(c) for c in zip(*rows, strict=True))
    if len({type(t) for t in times.tolist()}) > 1:
        raise InputError(f"{path}: column {columns['time'][1]}: mixes seconds and datetimes")
    if times.dtype == object:  # datetimes; without a zone, UTC
        times = np.array([(_utc(t) - EPOCH).total_seconds() for t in times])
    order = np.argsort(times, kind="stable")
    times = times[order] - times[order[0]]
    return Requests(
        list(workloads),
        times.astype(float),
        inputs[order].astype(np.int64),
        outputs[order].astype(np.int64),
        which[order].astype(np.int64),
        f"trace {path.name}"
        + (f" ({failed:,} rows without output tokens left out)" if failed else ""),
    )


def _columns(path: Path, header: list[str]) -> dict[str, tuple[int, str]]:
    """Index and name of each column by role; the three required ones must be there."""
    names = [h.strip().lower() for h in header]
    found = {}
    for role, aliases in (("time", TIME), ("input", INPUT), ("output", OUTPUT), ("class", CLASS)):
        for alias in aliases:
            if alias in names:
                index = names.index(alias)
                found[role] = (index, header[index].strip())
                break
        else:
            if role != "class":
                raise InputError(
                    f"{path}:1: no {role} column (expected one of {', '.join(aliases)}; "
                    f"found {', '.join(header)})"
                )
    return found


def _default_class(
    path: Path, workloads: list[str], assign: str | None, has_column: bool
) -> int | None:
    if assign is not None:
        if has_column:
            raise InputError(f"{path}: the trace has a class column; drop --class")
        if assign not in workloads:
            raise InputError(f"--class: {assign!r} is not a workload ({', '.join(workloads)})")
        return workloads.index(assign)
    if has_column:
        return None
    if len(workloads) > 1:
        raise InputError(
            f"{path}: no class column and the plan has {len(workloads)} workloads "
            f"({', '.join(workloads)}); add a class column or pass --class NAME"
        )
    return 0


def _row(
    path: Path,
    line: int,
    row: list[str],
    columns: dict[str, tuple[int, str]],
    workloads: list[str],
    default: int | None,
) -> tuple[float | datetime, int, int, int]:
    def cell(role: str) -> tuple[str, str]:
        index, name = columns[role]
        if index >= len(row):
            raise InputError(
                f"{path}:{line}: column {name}: missing (the row has {len(row)} fields)"
            )
        return name, row[index].strip()

    name, stamp = cell("time")
    try:
        time: float | datetime = float(stamp)
    except ValueError:
        try:
            time = datetime.fromisoformat(stamp)
        except ValueError:
            raise InputError(
                f"{path}:{line}: column {name}: {stamp!r} is neither seconds nor a datetime"
            ) from None
    which = default
    if which is None:
        name, label = cell("class")
        if label not in workloads:
            raise InputError(
                f"{path}:{line}: column {name}: {label!r} is not a workload "
                f"({', '.join(workloads)})"
            )
        which = workloads.index(label)
    output = _tokens(path, line, *cell("output"), least=0)  # 0: a failed request, left out
    return time, _tokens(path, line, *cell("input")), output, which


def _utc(t: datetime) -> datetime:
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)


def _tokens(path: Path, line: int, name: str, text: str, least: int = 1) -> int:
    try:
        number = float(text)
    except ValueError:
        number = math.nan
    if not number.is_integer() or number < least:
        raise InputError(f"{path}:{line}: column {name}: {text!r} is not a whole number >= {least}")
    return int(number)
