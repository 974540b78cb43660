"""The plan's length routing in words: buckets, their tail lengths and routes, and the saving
over the simple answers (one pool for all lengths, the best single boundary)."""

from __future__ import annotations

from fleetopt.plan import Plan

ANSWERS = {
    "optimised": "the optimised split",
    "best_two_pool": "the best single boundary",
    "one_pool": "one pool for all lengths",
}


def length_rows(plan: Plan) -> tuple[list[str], list[list[str]]]:
    """One row per bucket: prompt range, share, rate, the length that sizes its TTFT, routes."""
    head = ["bucket", "prompt tokens", "share", "req/s", "in/out mean", "TTFT sized at", "SLO %"]
    head.append("routes (pool gpu: req/s)")
    workloads = {w.name: w for w in plan.workloads}
    rows = []
    for b in plan.length_routing["buckets"]:
        low, top = b["input_tokens_from"], b["input_tokens_to"]
        span = f"{low:,}-{top:,}" if top is not None else f">={low:,}" if low > 1 else "all"
        routes = workloads[b["name"]].routes if b["name"] in workloads else []
        percentile = b["slo_percentile"]
        rows.append(
            [
                b["name"],
                span,
                f"{b['requests_share']:.1%}",
                f"{b['requests_per_s']:,.2f}",
                f"{b['input_tokens']['mean']:,.0f}/{b['output_tokens']['mean']:,.0f}",
                f"{b['ttft_length']} {b['ttft_input_tokens']:,.0f}",
                "-" if percentile is None else f"{percentile:.4g}",
                ", ".join(
                    f"{r.pool} {plan.pools[r.pool].gpu}: {r.requests_per_s:,.2f}" for r in routes
                ),
            ]
        )
    return head, rows


def length_lines(plan: Plan) -> list[str]:
    """The answers compared: this plan against one pool and the best single boundary."""
    routing = plan.length_routing
    throughput = plan.objective == "maximize throughput"
    best = "best (most demand served)" if throughput else "cheapest"
    lines = [
        f"length routing: {ANSWERS[routing['chosen']]} is the {best} "
        f"({_split(routing['boundaries'])}); each bucket's TTFT is held at the prompt length of "
        "its percentile (column 'TTFT sized at'), not its mean"
    ]
    for key, boundaries in (
        ("one_pool", None),
        ("best_two_pool", routing["best_two_pool_boundaries"]),
        ("optimised", routing["optimised_boundaries"]),
    ):
        cost = routing[f"{key}_cost_per_hour"]
        where = "" if boundaries is None else f" ({_split(boundaries)})"
        priced = "infeasible" if cost is None else f"{cost:,.2f} $/h"
        if cost is not None and throughput:
            priced += f", {routing[f'{key}_demand_scale']:.4g} × the stated demand"
        lines.append(f"  {ANSWERS[key]}{where}: {priced}")
    if throughput:
        return lines
    savings = []
    for key in ("one_pool", "best_two_pool"):
        saving, base = routing[f"saving_vs_{key}_per_hour"], routing[f"{key}_cost_per_hour"]
        if saving is not None:
            savings.append(f"{saving:,.2f} $/h ({saving / base:.0%}) over {ANSWERS[key]}")
    if savings:
        lines.append(f"this plan ({plan.cost_per_hour:,.2f} $/h) saves " + " and ".join(savings))
    return lines


def _split(boundaries: dict[str, list[int]]) -> str:
    parts = [
        f"{name} at {', '.join(f'{b:,}' for b in edges)} tokens" if edges else f"{name} unsplit"
        for name, edges in boundaries.items()
    ]
    return "; ".join(parts)
