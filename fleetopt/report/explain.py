"""`fleetopt explain` as terminal tables: demand, GPU-seconds per class, the requests/s rule."""

from __future__ import annotations

from fleetopt.explain.sizing import Explanation
from fleetopt.report.text import fmt_number, grid


def _signed(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:+,.{digits}f}"


def demand_table(ex: Explanation) -> str:
    head = ["workload", "model", "req/s", "in/out tokens", "prefill tok/s", "decode tok/s"]
    rows = [
        [
            d.workload,
            d.model,
            fmt_number(d.requests_per_s, 2),
            f"{d.input_tokens:,.0f}/{d.output_tokens:,.0f}",
            fmt_number(d.prefill_tokens_per_s),
            fmt_number(d.decode_tokens_per_s),
        ]
        for d in ex.demand
    ]
    if len(rows) > 1:
        rows.append(
            [
                "all",
                "",
                fmt_number(sum(d.requests_per_s for d in ex.demand), 2),
                "",
                fmt_number(sum(d.prefill_tokens_per_s for d in ex.demand)),
                fmt_number(sum(d.decode_tokens_per_s for d in ex.demand)),
            ]
        )
    return grid(head, rows)


def needs_table(ex: Explanation) -> str:
    head = ["workload", "gpu", "GPU-s per s", "$/h", "best config of the type", "limited by"]
    rows = [
        [
            n.workload,
            n.gpu,
            fmt_number(n.gpu_seconds_per_s, 2),
            fmt_number(n.cost_per_hour, 2),
            n.path,
            n.limited_by,
        ]
        for n in ex.needs
    ]
    return grid(head, rows)


def rule_table(ex: Explanation) -> str:
    head = [
        "workload",
        "pool",
        "GPUs by req/s rule",
        "GPUs it takes",
        "over (+) / short (-)",
        "$/h",
    ]
    rows = [
        [
            s.workload,
            s.pool,
            fmt_number(s.rule_gpus, 2),
            fmt_number(s.needed_gpus, 2),
            _signed(s.over_gpus, 2),
            _signed(s.over_cost_per_hour, 2),
        ]
        for rule in ex.rules
        for s in rule.shares
    ]
    return grid(head, rows)


def rule_lines(ex: Explanation) -> list[str]:
    lines = [
        f"{r.model}: the average request ({r.input_tokens:,.0f} in / {r.output_tokens:,.0f} out "
        f"tokens) runs {r.requests_per_s_per_gpu:,.3g} req/s per GPU on {r.path}; "
        f"{r.requests_per_s:,.2f} req/s → {r.gpus} GPUs, {r.cost_per_hour:,.2f} $/h"
        for r in ex.rules
    ]
    proof = "" if ex.plan_status == "optimal" else f" ({_unproven(ex)})"
    gpus = f"{abs(ex.over_gpus)} GPUs {'more' if ex.over_gpus >= 0 else 'fewer'}"
    cost = (
        f"{abs(ex.over_cost_per_hour):,.2f} $/h {'more' if ex.over_cost_per_hour >= 0 else 'less'}"
    )
    lines.append(
        f"requests/s rule: {ex.rule_gpus} GPUs, {ex.rule_cost_per_hour:,.2f} $/h · "
        f"plan (tokens/s): {ex.plan_gpus} GPUs, {ex.plan_cost_per_hour:,.2f} $/h{proof} · "
        f"the rule buys {gpus} and costs {cost}"
    )
    if ex.left_out:
        lines.append(
            f"compared at the stated rates, on-demand prices and least cost: "
            f"{' and '.join(ex.left_out)} left out of the plan here, as the rule has none of "
            "them (`fleetopt solve` plans with them)"
        )
    return lines


def _unproven(ex: Explanation) -> str:
    """A plan the solver stopped on: how far from the best it may be."""
    gap = "unknown" if ex.plan_mip_gap is None else f"{ex.plan_mip_gap:.2%}"
    return f"{ex.plan_status}: the solver stopped before proving it, gap {gap}"


def to_table(ex: Explanation) -> str:
    return "\n\n".join(
        [
            f"fleetopt explain: {ex.name}",
            "Demand: requests/s beside the tokens/s they carry",
            demand_table(ex),
            "GPU-seconds per second each class needs on each GPU type "
            "(its best config there; before whole replicas and queueing)",
            needs_table(ex),
            "Sizing by requests/s: each class's share of the rule's fleet vs what it takes "
            "on the same configs",
            rule_table(ex),
            "\n".join(rule_lines(ex)),
        ]
    )
