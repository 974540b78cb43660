"""A plan as a terminal table, Markdown or CSV: per pool, per workload, then totals."""

from __future__ import annotations

from fleetopt.instance import RANGES
from fleetopt.plan import Plan
from fleetopt.report.lengths import length_lines, length_rows


def fmt_number(value: float | None, digits: int = 0) -> str:
    """`12,345` with `digits` decimals; `-` for a missing value."""
    if value is None:
        return "-"
    return f"{value:,.{digits}f}"


def _target(predicted: float | None, target: float | None) -> str:
    if predicted is None and target is None:
        return "-"
    if target is None:
        return f"{fmt_number(predicted, 1)}"
    return f"{fmt_number(predicted, 1)} / {fmt_number(target, 0)}"


def pool_rows(plan: Plan) -> tuple[list[str], list[list[str]]]:
    head = [
        "#",
        "model",
        "role",
        "gpu",
        "tp",
        "replicas",
        "gpus",
        "$/h",
        "prefill tok/s (routed/cap)",
        "decode tok/s (routed/cap)",
        "util",
        "limited by",
        "step ms / chunk",
    ]
    rows = []
    for i, p in enumerate(plan.pools):
        point = "measured" if p.measured else f"{p.step_ms:.1f} / {p.chunk_tokens}"
        rows.append(
            [
                str(i),
                p.model,
                p.role,
                p.gpu,
                str(p.tensor_parallel),
                str(p.replicas),
                str(p.gpus),
                fmt_number(p.cost_per_hour, 2),
                f"{fmt_number(p.routed_prefill_tokens_per_s)} / {fmt_number(p.prefill_tokens_per_s)}"
                if p.role != "decode"
                else "-",
                f"{fmt_number(p.routed_decode_tokens_per_s)} / {fmt_number(p.decode_tokens_per_s)}"
                if p.role != "prefill"
                else "-",
                f"{p.utilization:.0%}",
                p.limited_by,
                point,
            ]
        )
    return head, rows


def workload_rows(plan: Plan) -> tuple[list[str], list[list[str]]]:
    head = [
        "workload",
        "model",
        "req/s",
        "in/out tokens",
        "prefill tok/s",
        "decode tok/s",
        "TTFT ms (pred/target)",
        "TPOT ms (pred/target)",
        "routes (pool: req/s)",
    ]
    rows = []
    for w in plan.workloads:
        slo = w.slo or {}
        routes = ", ".join(f"{r.pool}:{r.requests_per_s:,.3g}" for r in w.routes)
        rows.append(
            [
                w.name,
                w.model,
                fmt_number(w.requests_per_s, 2),
                f"{w.input_tokens:,.0f}/{w.output_tokens:,.0f}",
                fmt_number(w.prefill_tokens_per_s),
                fmt_number(w.decode_tokens_per_s),
                _target(w.ttft_ms, slo.get("ttft_ms")),
                _target(w.tpot_ms, slo.get("tpot_ms")),
                routes,
            ]
        )
    return head, rows


def _throughput_line(plan: Plan) -> str:
    served = f"serves {plan.demand_scale:.4g} × the stated demand"
    limit = plan.demand_scale_limit
    if limit is None or plan.demand_scale < limit * (1 - 1e-6):
        return served + " within the budget"
    most = RANGES["requests_per_s"][1]
    return (
        f"{served}, the most the supported rates allow ({most:,.0f} req/s a workload): the "
        "budget buys more than that and is not all spent"
    )


def summary_lines(plan: Plan) -> list[str]:
    gpus = ", ".join(f"{n} × {g}" for g, n in sorted(plan.gpus.items())) or "none"
    count = sum(plan.gpus.values())
    gap = "-" if plan.mip_gap is None else f"{plan.mip_gap:.2%}"
    mean = "mean " if plan.periods else ""
    horizon = " over the horizon" if plan.periods else ""
    lines = [
        f"status {plan.status} · gap {gap} · bound {fmt_number(plan.objective_bound, 2)} · "
        f"solved in {plan.solve_seconds:.2f} s"
    ]
    if plan.objective == "maximize throughput":
        lines.append(_throughput_line(plan))
    if plan.periods:
        lines.append(
            f"GPUs at the peak: {gpus} ({count} in all); the pools above are the peak period's"
        )
    else:
        lines.append(f"GPUs: {gpus} ({count} in all)")
    lines += [
        f"{mean}cost: {plan.cost_per_hour:,.2f} $/h · {plan.cost_per_month:,.0f} $/month · "
        f"{fmt_number(plan.cost_per_million_tokens, 4)} $ per million tokens · "
        f"{fmt_number(plan.cost_per_million_output_tokens, 4)} $ per million output tokens{horizon}",
        f"{mean}demand: {plan.prefill_tokens_per_s:,.0f} prefill + "
        f"{plan.decode_tokens_per_s:,.0f} decode tokens/s ({plan.requests_per_s:,.2f} req/s)",
    ]
    lines += node_lines(plan)
    lines += unqueued_lines(plan)
    if plan.reserved_gpus is not None:
        reserved = ", ".join(f"{n} × {g}" for g, n in sorted(plan.reserved_gpus.items())) or "none"
        lines.append(f"reserved for the whole horizon: {reserved}")
    if plan.saving_per_hour is not None:
        lines.append(
            f"one fleet sized for the peak, on demand around the clock: "
            f"{plan.peak_sized_cost_per_hour:,.2f} $/h; this plan saves {plan.saving_per_hour:,.2f} $/h "
            f"({plan.saving_per_hour / plan.peak_sized_cost_per_hour:.0%})"
        )
    return lines


def node_lines(plan: Plan) -> list[str]:
    """Pools whose last replica costs other than its GPUs, because their type comes in whole
    nodes: less where the node stays bought without it (docs/latency.md, "Padding"), more
    where the replica holds a node of its own."""
    lines = []
    for i, p in enumerate(plan.pools):
        frees = p.one_fewer_frees_gpus
        if p.replicas < 2 or frees in (None, p.tensor_parallel):
            continue
        used = sum(q.gpus for q in plan.pools if q.gpu == p.gpu) - p.tensor_parallel
        lines.append(
            f"pool {i}: one replica fewer ({p.tensor_parallel} GPUs) frees "
            f"{'no GPU' if frees == 0 else f'{frees} GPUs'}: {p.gpu} is bought in whole nodes, "
            f"{plan.gpus[p.gpu]} now, and the other replicas would use {used}"
        )
    return lines


def unqueued_lines(plan: Plan) -> list[str]:
    """Pools where prompts too long to make a class's TTFT however idle the pool take half its
    miss share or more: the pool holds the class's percentile on its own (docs/latency.md,
    "Padding"), so queueing gets only what is left, and the pool runs larger than a share of
    the class's pooled misses would need."""
    slo = {w.name: w.slo for w in plan.workloads if w.slo and w.slo.get("ttft_ms")}
    lines = []
    for i, p in enumerate(plan.pools):
        parts = [
            f"{share:.2%} of {name}'s (TTFT {slo[name]['ttft_ms']:,.0f} ms at "
            f"p{slo[name]['percentile']:g}, {1 - slo[name]['percentile'] / 100:.2%} may miss)"
            for name, share in sorted((p.unqueued_ttft_misses or {}).items())
            if name in slo and share >= (1 - slo[name]["percentile"] / 100) / 2
        ]
        if parts:
            lines.append(
                f"pool {i}: prompts too long to make the TTFT here however idle the pool: "
                f"{', '.join(parts)}; each pool holds the percentile on its own, so queueing "
                "gets only the rest"
            )
    return lines


def period_rows(plan: Plan) -> tuple[list[str], list[list[str]]]:
    """One row per period of the demand profile: demand level, fleet by tier, $/h."""
    head = ["period", "hours", "demand ×", "GPUs", "on-demand", "spot", "$/h"]

    def fleet(gpus: dict[str, int] | None) -> str:
        return ", ".join(f"{n} {g}" for g, n in sorted((gpus or {}).items())) or "-"

    rows = [
        [
            str(p.index),
            f"{p.hours:g}",
            f"{p.multiplier:.2f}",
            fleet(p.gpus),
            fleet(p.on_demand_gpus),
            fleet(p.spot_gpus),
            fmt_number(p.cost_per_hour, 2),
        ]
        for p in plan.periods or []
    ]
    return head, rows


def grid(head: list[str], rows: list[list[str]]) -> str:
    """A plain-text table: columns padded to their widest cell, numbers right-aligned."""
    widths = [
        max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(head)
    ]

    def line(cells):
        return "  ".join(
            c.rjust(w) if _numeric(c) else c.ljust(w) for c, w in zip(cells, widths, strict=True)
        ).rstrip()

    return "\n".join([line(head), line(["-" * w for w in widths]), *map(line, rows)])


def _numeric(cell: str) -> bool:
    return bool(cell) and (cell[0].isdigit() or (cell[0] in "-+" and len(cell) > 1))


def to_table(plan: Plan) -> str:
    return "\n\n".join(
        [
            f"fleetopt plan: {plan.name}",
            grid(*pool_rows(plan)),
            grid(*workload_rows(plan)),
            *([grid(*period_rows(plan))] if plan.periods else []),
            *(
                [grid(*length_rows(plan)), "\n".join(length_lines(plan))]
                if plan.length_routing
                else []
            ),
            "\n".join(summary_lines(plan)),
        ]
    )


def markdown_table(head: list[str], rows: list[list[str]]) -> str:
    """A GitHub-flavoured Markdown table."""
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def to_markdown(plan: Plan) -> str:
    return (
        "\n\n".join(
            [
                f"# fleetopt plan: {plan.name}",
                "## Pools",
                markdown_table(*pool_rows(plan)),
                "## Workloads",
                markdown_table(*workload_rows(plan)),
                *(["## Periods", markdown_table(*period_rows(plan))] if plan.periods else []),
                *(
                    [
                        "## Length routing",
                        markdown_table(*length_rows(plan)),
                        "\n".join(f"- {line.strip()}" for line in length_lines(plan)),
                    ]
                    if plan.length_routing
                    else []
                ),
                "## Totals",
                "\n".join(f"- {line}" for line in summary_lines(plan)),
            ]
        )
        + "\n"
    )


def to_csv(plan: Plan) -> str:
    return plan.pools_frame().to_csv(index=False)


def capacity_table(result) -> str:
    """`fleetopt perf` as aligned lines, tokens/s first."""
    lines = [
        (
            "replica",
            f"{result.model} on {result.tensor_parallel} × {result.gpu} ({result.role})"
            + (f", one of a pool of {result.pool_size}" if result.pool_size > 1 else ""),
        ),
        (
            "request",
            f"{result.input_tokens:,.0f} input + {result.output_tokens:,.0f} output tokens",
        ),
        ("requests/s", fmt_number(result.requests_per_s, 2)),
        ("prefill tokens/s", fmt_number(result.prefill_tokens_per_s)),
        ("output tokens/s", fmt_number(result.output_tokens_per_s)),
        ("output tokens/s per GPU", fmt_number(result.output_tokens_per_s_per_gpu)),
        ("concurrent sequences", fmt_number(result.concurrent_sequences, 1)),
        ("KV capacity, tokens", fmt_number(result.kv_capacity_tokens)),
        ("TTFT ms (idle replica)", fmt_number(result.ttft_ms, 1)),
        ("TPOT ms", fmt_number(result.tpot_ms, 1)),
        (
            "operating point",
            f"step {result.step_ms:.1f} ms, prefill chunk {result.chunk_tokens} tokens",
        ),
        ("step parts ms", ", ".join(f"{k} {v:.2f}" for k, v in result.step_breakdown_ms.items())),
        ("limited by", result.limited_by),
    ]
    width = max(len(k) for k, _ in lines)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in lines)


def compare_table(results) -> str:
    """`fleetopt compare`: one column per mode, then the explanation."""
    from fleetopt.compare import explain

    def cell(r, value: str) -> str:
        return r.status if r.plan is None else value  # infeasible, or no_solution in time

    rows = [
        ("$/h", lambda r: fmt_number(r.cost_per_hour, 2)),
        ("GPUs", lambda r: ", ".join(f"{n} {g}" for g, n in sorted(r.gpus.items()))),
        ("output tok/s per GPU", lambda r: fmt_number(r.output_tokens_per_s_per_gpu)),
        ("$ per M input tokens", lambda r: fmt_number(r.cost_per_million_input_tokens, 4)),
        ("$ per M output tokens", lambda r: fmt_number(r.cost_per_million_output_tokens, 4)),
        ("utilisation", lambda r: "-" if r.utilization is None else f"{r.utilization:.0%}"),
        ("status", lambda r: r.status),
    ]
    head = ["", *(r.mode for r in results)]
    body = [
        [label, *(cell(r, fn(r)) if label != "status" else r.status for r in results)]
        for label, fn in rows
    ]
    return grid(head, body) + "\n\n" + "\n".join(f"- {line}" for line in explain(results))
