"""Sweep and Pareto results as rows: a terminal table, CSV, JSON and the progress line.

One row per scenario in grid order: the swept values, then status, $/h, GPUs by type, prefill
and decode tokens/s side by side, $ per million output tokens and the scenario's seconds. A
scenario without a fleet is a row like any other, its reason listed under the table.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import pandas as pd

from fleetopt.report.text import fmt_number, grid
from fleetopt.sweep.grid import Axis
from fleetopt.sweep.runner import Result

if TYPE_CHECKING:
    from fleetopt.pareto import Frontier, Point


def value_text(value: object) -> str:
    """A swept value as given: `40` rather than `40.0`, strings as they are."""
    return f"{value:.10g}" if isinstance(value, float) else str(value)


def scenario_label(values: dict) -> str:
    return " ".join(f"{k}={value_text(v)}" for k, v in values.items())


def progress_line(done: int, total: int, result: Result) -> str:
    """`[3/9] tpot_ms=30 requests_per_s=20 → 41.20 $/h`, as each scenario finishes."""
    outcome = result.outcome
    answer = f"{outcome.cost_per_hour:,.2f} $/h" if outcome.solved else outcome.status
    if outcome.status == "feasible":
        answer += f" (time limit, gap {outcome.mip_gap or 0:.2%})"
    return f"[{done}/{total}] {scenario_label(result.scenario.values)} → {answer}"


def gpu_types(results: list[Result]) -> list[str]:
    """GPU types in the instance's order, for one column each."""
    types = [g.type for r in results for g in r.scenario.instance.gpus]
    return list(dict.fromkeys(types))


def to_frame(results: list[Result], extra: dict[str, list] | None = None) -> pd.DataFrame:
    """Machine-readable rows (the CSV): field names with units, one `gpus.TYPE` column each."""
    types = gpu_types(results)
    rows = []
    for r in results:
        o = r.outcome
        rows.append(
            {
                **r.scenario.values,
                "status": o.status,
                "cost_per_hour": o.cost_per_hour,
                **{f"gpus.{t}": o.gpus.get(t, 0) if o.solved else None for t in types},
                "prefill_tokens_per_s": o.prefill_tokens_per_s,
                "decode_tokens_per_s": o.decode_tokens_per_s,
                "cost_per_million_output_tokens": o.cost_per_million_output_tokens,
                "mip_gap": o.mip_gap,
                "solve_seconds": round(o.seconds, 3),
                "reason": o.reason,
            }
        )
    frame = pd.DataFrame(rows)
    for name, column in (extra or {}).items():
        frame[name] = column
    return frame


def to_csv(results: list[Result], extra: dict[str, list] | None = None) -> str:
    return to_frame(results, extra).to_csv(index=False)


def to_table(results: list[Result], extra: dict[str, list[str]] | None = None) -> str:
    """The terminal table, then one line per scenario without a fleet saying why."""
    labels = list(results[0].scenario.values) if results else []
    head = [
        *labels,
        "status",
        "$/h",
        "GPUs",
        "prefill tok/s",
        "decode tok/s",
        "$/M out",
        *(extra or {}),
        "solve s",
    ]
    rows = []
    for i, r in enumerate(results):
        o = r.outcome
        gpus = " + ".join(f"{n} {g}" for g, n in o.gpus.items()) or "-"
        rows.append(
            [
                *(value_text(v) for v in r.scenario.values.values()),
                o.status,
                fmt_number(o.cost_per_hour, 2),
                gpus if o.solved else "-",
                fmt_number(o.prefill_tokens_per_s),
                fmt_number(o.decode_tokens_per_s),
                fmt_number(o.cost_per_million_output_tokens, 4),
                *(column[i] for column in (extra or {}).values()),
                f"{o.seconds:.2f}",
            ]
        )
    notes = _reasons(results)
    return "\n\n".join([grid(head, rows), *(["\n".join(notes)] if notes else [])])


def _reasons(results: list[Result]) -> list[str]:
    """Why each scenario has no fleet, a reason shared by several said once."""
    shared: dict[str, list[str]] = {}
    for r in results:
        if r.outcome.reason:
            shared.setdefault(r.outcome.reason, []).append(scenario_label(r.scenario.values))
    lines = []
    for reason, labels in shared.items():
        more = f" and {len(labels) - 2} more" if len(labels) > 3 else ""
        shown = labels[:2] if more else labels
        lines.append(f"{'; '.join(shown)}{more}: {reason}")
    return lines


def to_dict(axes: list[Axis], results: list[Result]) -> dict:
    """JSON: the axes (label, path, values) and one record per scenario."""
    return {
        "axes": [{"label": a.label, "path": a.path, "values": list(a.values)} for a in axes],
        "scenarios": [
            {"values": r.scenario.values, **dataclasses.asdict(r.outcome)} for r in results
        ],
    }


def frontier_column(front: Frontier) -> dict[str, list[str]]:
    def mark(p: Point) -> str:
        if p.violation:
            return "VIOLATION"
        if not p.result.outcome.solved:
            return "-"
        return "yes" if p.frontier else "dominated"

    return {"frontier": [mark(p) for p in front.points]}


def frontier_table(front: Frontier) -> str:
    lines = [
        f"fleetopt pareto: {front.name}",
        front.target.describe(),
        f"range: {front.range_note}",
        "",
        to_table([p.result for p in front.points], frontier_column(front)),
        "",
    ]
    on = sum(p.frontier for p in front.points)
    lines.append(f"frontier: {on} of {len(front.points)} points (the tightest target at each cost)")
    lines += [f"warning: {v}" for v in front.violations] or [
        "a tighter target never cost less: the cost is non-increasing as the target loosens"
    ]
    return "\n".join(lines)


def frontier_dict(front: Frontier) -> dict:
    return {
        "name": front.name,
        "vary": front.target.kind,
        "workloads": list(front.target.workloads),
        "stated": front.target.stated,
        "range": front.range_note,
        "points": [
            {
                "target_ms": p.target,
                "values": p.result.scenario.values,
                "frontier": p.frontier,
                "violation": p.violation,
                **dataclasses.asdict(p.result.outcome),
            }
            for p in front.points
        ],
        "violations": front.violations,
    }
