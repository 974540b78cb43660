"""aiconfigurator results as measured profiles: `fleetopt import-aiconfigurator`.

aiconfigurator (NVIDIA ai-dynamo) estimates, per parallel configuration, what one worker sustains
at given input/output lengths under its TTFT/TPOT targets, and saves the candidates as CSV
(`pareto.csv`, `best_config_topn.csv`) with the columns of its `ColumnsAgg` / `ColumnsDisagg`
(aiconfigurator/sdk/common.py). This module reads them as fleetopt `profiles` — capacity tables,
max requests/s per replica at the row's lengths — so a mixed fleet can be optimised on its
numbers:

- aggregated rows (`isl, osl, ttft, tpot, tokens/s/gpu, tp, pp`): a colocated replica of tp·pp
  GPUs carries tokens/s/gpu · tp · pp / osl requests/s;
- disaggregated rows (`(p)seq/s/worker, (d)seq/s/worker, (p)tp, (d)tp, (p)pp, (d)pp`): a prefill
  replica carries (p)seq/s/worker, a decode replica (d)seq/s/worker requests/s.

A converter rather than a path inside the instance: the instance stays self-contained and the
numbers it plans on are visible in it. Rows above the given TTFT/TPOT limits are dropped; of the
rows left for one (role, tp, lengths), the highest rate is kept (the profile's SLO is the row's).
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable
from pathlib import Path

from fleetopt.errors import InputError

AGG = ("isl", "osl", "ttft", "tpot", "tokens/s/gpu", "tp", "pp")
DISAGG = (
    "isl",
    "osl",
    "ttft",
    "tpot",
    "(p)seq/s/worker",
    "(d)seq/s/worker",
    "(p)tp",
    "(d)tp",
    "(p)pp",
    "(d)pp",
)

PARALLELISM = ("tp", "pp", "(p)tp", "(p)pp", "(d)tp", "(d)pp")
"""Columns that count GPUs: whole numbers (a tp of 0.25 became `tensor_parallel: 0`)."""

Key = tuple[str, int, float, float]  # role, tp, input tokens, output tokens


def read_capacities(
    path: str | Path, ttft_ms: float | None = None, tpot_ms: float | None = None
) -> dict[Key, float]:
    """Max requests/s per replica for each (role, tp, isl, osl) the file covers."""
    path = Path(path)
    try:
        rows = list(csv.DictReader(path.read_text(encoding="utf-8-sig").splitlines()))
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror})") from None
    if not rows:
        raise InputError(f"{path}: no rows")
    columns = set(rows[0])
    layout = DISAGG if "(p)seq/s/worker" in columns else AGG
    missing = [c for c in layout if c not in columns]
    if missing:
        raise InputError(f"{path}: column `{missing[0]}` is missing (aiconfigurator CSV expected)")
    best: dict[Key, float] = {}
    for line, row in enumerate(rows, start=2):
        values = {c: _number(path, line, row, c) for c in layout}
        if (ttft_ms is not None and values["ttft"] > ttft_ms) or (
            tpot_ms is not None and values["tpot"] > tpot_ms
        ):
            continue
        for key, rate in _capacities(values, layout is DISAGG):
            if rate > best.get(key, 0.0):
                best[key] = rate
    if not best:  # every row is slower than a limit given
        limits = [
            f"{name} <= {ms:g} ms" for name, ms in (("TTFT", ttft_ms), ("TPOT", tpot_ms)) if ms
        ]
        raise InputError(f"{path}: no row meets {' and '.join(limits)}; loosen --ttft-ms/--tpot-ms")
    return best


def _capacities(v: dict[str, float], disaggregated: bool) -> Iterable[tuple[Key, float]]:
    lengths = (v["isl"], v["osl"])
    if disaggregated:
        yield ("prefill", int(v["(p)tp"] * v["(p)pp"]), *lengths), v["(p)seq/s/worker"]
        yield ("decode", int(v["(d)tp"] * v["(d)pp"]), *lengths), v["(d)seq/s/worker"]
    else:
        gpus = int(v["tp"] * v["pp"])
        yield ("colocated", gpus, *lengths), v["tokens/s/gpu"] * gpus / v["osl"]


def to_profiles(capacities: dict[Key, float], model: str, gpu: str) -> list[dict]:
    """Instance `profiles` entries, one per (role, tp), rows sorted by lengths."""
    grouped: dict[tuple[str, int], list[dict]] = {}
    for (role, tp, isl, osl), rate in sorted(capacities.items()):
        grouped.setdefault((role, tp), []).append(
            {"input_tokens": isl, "output_tokens": osl, "max_requests_per_s": round(rate, 6)}
        )
    return [
        {"model": model, "gpu": gpu, "tensor_parallel": tp, "role": role, "table": table}
        for (role, tp), table in grouped.items()
    ]


def _number(path: Path, line: int, row: dict, column: str) -> float:
    text = row.get(column)
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise InputError(f"{path}:{line}: column `{column}` is not a number ({text!r})") from None
    if not math.isfinite(value):
        raise InputError(f"{path}:{line}: column `{column}` must be a finite number ({text!r})")
    if value <= 0 and column not in ("ttft", "tpot"):
        raise InputError(f"{path}:{line}: column `{column}` must be positive ({text!r})")
    if column in PARALLELISM and value != int(value):
        raise InputError(f"{path}:{line}: column `{column}` must be a whole number ({text!r})")
    return value
