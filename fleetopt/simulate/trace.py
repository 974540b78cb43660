"""Read a request trace CSV: arrival time, input tokens, output tokens, optional class.

Columns are found by name, case-insensitively, so the public Azure LLM inference traces
(TIMESTAMP, ContextTokens, GeneratedTokens; 2023 and 2024) and BurstGPT (Timestamp, Request
tokens, Response tokens) load as they are. Times are seconds (a number) or datetimes
(`2023-11-16 18:15:46.6805900`, `2024-05-10 00:00:00.009930+00:00`; without a zone, UTC); either
way the trace is shifted to start at 0 and sorted by time. Token counts are whole numbers (`12`
or `12.0`); a row with no output tokens is a request that failed (BurstGPT logs them) and is
left out, counted in the arrivals' description. Blank lines are skipped. Every bad row is an
InputError naming file:line and the column.

Columns are parsed by numpy a chunk of rows at a time (a million rows in ~1.5 s, in the memory
of their arrays); where anything does not parse, the file is read again row by row to name the
first bad cell (docs/benchmarks.md).
"""

from __future__ import annotations

import csv
import itertools
import math
from collections.abc import Iterator
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
MOST_TOKENS = 2**53
"""The largest token count read: beyond it a float skips whole numbers (an instance refuses far
fewer, fleetopt.instance.RANGES, and says so in its own words)."""
CHUNK_ROWS = 1 << 16
"""Rows parsed together: enough for numpy to pay, few enough to bound the memory."""


def load_trace(path: str | Path, workloads: list[str], assign: str | None = None) -> Requests:
    """The trace's requests, each of one of `workloads` (by its class column, or `assign`,
    or the only workload there is)."""
    path = Path(path)
    try:
        handle = path.open(newline="", encoding="utf-8-sig")
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror})") from None
    with handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        if header is None:
            raise InputError(f"{path}: empty trace")
        columns = _columns(path, header)
        default = _default_class(path, workloads, assign, "class" in columns)
        read = _read_columns(reader, columns, workloads, default)
    if read is None:  # something did not parse: the row-by-row reading names it
        read = _read_rows(path, columns, workloads, default)
    times, inputs, outputs, which = read
    kept = outputs > 0
    if not kept.any():
        raise InputError(f"{path}: the trace has a header but no requests with output tokens")
    failed = len(kept) - int(kept.sum())
    times, inputs, outputs, which = (a[kept] for a in (times, inputs, outputs, which))
    order = np.argsort(times, kind="stable")
    return Requests(
        list(workloads),
        times[order] - times[order[0]],
        inputs[order],
        outputs[order],
        which[order],
        f"trace {path.name}"
        + (f" ({failed:,} rows without output tokens left out)" if failed else ""),
    )


Columns = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
"""Arrival (s, UTC for datetimes), input and output tokens (int64), workload index (int64)."""


def _read_columns(
    reader: Iterator[list[str]],
    columns: dict[str, tuple[int, str]],
    workloads: list[str],
    default: int | None,
) -> Columns | None:
    """The rows, CHUNK_ROWS at a time, each column parsed whole by numpy: a week-long trace
    of millions of requests reads in seconds and in memory its arrays need. None where any
    cell does not parse or breaks a rule (`_read_rows` then finds and names it)."""
    index = {role: i for role, (i, _) in columns.items()}
    width = max(index.values()) + 1
    labels = {name: i for i, name in enumerate(workloads)}
    parts: list[Columns] = []
    kinds: set[type] = set()
    while rows := list(itertools.islice(reader, CHUNK_ROWS)):
        chunk = [row for row in rows if row]  # blank lines are no requests
        if not chunk:
            continue
        if any(len(row) < width for row in chunk):
            return None
        try:
            times, kind = _times([row[index["time"]] for row in chunk])
            inputs = _whole([row[index["input"]] for row in chunk], least=1)
            outputs = _whole([row[index["output"]] for row in chunk], least=0)
            which = (
                np.full(len(chunk), default, dtype=np.int64)
                if default is not None
                else np.array([labels[row[index["class"]].strip()] for row in chunk])
            )
        except (ValueError, KeyError):
            return None
        kinds.add(kind)
        parts.append((times, inputs, outputs, which.astype(np.int64)))
    if len(kinds) > 1 or not parts:
        return None
    times, inputs, outputs, which = (np.concatenate(part) for part in zip(*parts, strict=True))
    return times, inputs, outputs, which


def _times(cells: list[str]) -> tuple[np.ndarray, type]:
    """Seconds, or datetimes (without a zone, UTC) as seconds since the epoch."""
    try:
        times, kind = np.array(cells, dtype=float), float
    except ValueError:
        times = np.array([_seconds(datetime.fromisoformat(cell.strip())) for cell in cells])
        kind = datetime
    if not np.isfinite(times).all():
        raise ValueError("a time that is not a number")
    return times, kind


def _whole(cells: list[str], least: int) -> np.ndarray:
    numbers = np.array(cells, dtype=float)
    whole = np.isfinite(numbers) & (numbers == np.floor(numbers))
    if not (whole & (numbers >= least) & (numbers <= MOST_TOKENS)).all():
        raise ValueError("not a whole number in range")
    return numbers.astype(np.int64)


def _read_rows(
    path: Path, columns: dict[str, tuple[int, str]], workloads: list[str], default: int | None
) -> Columns:
    """The rows one at a time, each bad cell an InputError naming file:line and the column."""
    with path.open(newline="", encoding="utf-8-sig") as handle:
        reader = csv.reader(handle)
        next(reader)
        read = [
            _row(path, reader.line_num, row, columns, workloads, default) for row in reader if row
        ]
    if not read:
        raise InputError(f"{path}: the trace has a header but no requests with output tokens")
    times, inputs, outputs, which = (np.array(c) for c in zip(*read, strict=True))
    if len({type(t) for t in times.tolist()}) > 1:
        raise InputError(f"{path}: column {columns['time'][1]}: mixes seconds and datetimes")
    if times.dtype == object:  # datetimes; without a zone, UTC
        times = np.array([_seconds(t) for t in times])
    as_int = (a.astype(np.int64) for a in (inputs, outputs, which))
    return (times.astype(float), *as_int)


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
        if not math.isfinite(time):
            raise ValueError(stamp)
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


def _seconds(t: datetime) -> float:
    """Seconds since the epoch; a datetime without a zone is UTC."""
    utc = t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)
    return (utc - EPOCH).total_seconds()


def _tokens(path: Path, line: int, name: str, text: str, least: int = 1) -> int:
    try:
        number = float(text)
    except ValueError:
        number = math.nan
    if not number.is_integer() or not least <= number <= MOST_TOKENS:
        raise InputError(
            f"{path}:{line}: column {name}: {text!r} is not a whole number "
            f"from {least} to {MOST_TOKENS:,}"
        )
    return int(number)
