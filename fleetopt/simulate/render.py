"""A simulation report as terminal tables: per class, per pool, and measured vs targets."""

from __future__ import annotations

from fleetopt.report.text import fmt_number, grid


def _ms(value: float | None) -> str:
    return fmt_number(value, 1)


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def _triple(p: dict) -> str:
    return " / ".join(_ms(p[k]) for k in ("p50", "p90", "p99"))


def workload_table(report: dict) -> str:
    head = [
        "workload",
        "requests",
        "req/s",
        "prefill tok/s",
        "decode tok/s",
        "TTFT ms p50/p90/p99",
        "TPOT ms p50/p90/p99",
        "e2e ms p50/p90/p99",
        "SLO met (TTFT/TPOT/both)",
    ]
    rows = []
    for w in report["workloads"]:
        a = w["slo_attainment"]
        met = "-" if a is None else " / ".join(_share(a[k]) for k in ("ttft", "tpot", "both"))
        rows.append(
            [
                w["name"],
                f"{w['requests']:,}",
                fmt_number(w["requests_per_s"], 2),
                fmt_number(w["prefill_tokens_per_s"]),
                fmt_number(w["decode_tokens_per_s"]),
                _triple(w["ttft_ms"]),
                _triple(w["tpot_ms"]),
                _triple(w["e2e_ms"]),
                met,
            ]
        )
    return grid(head, rows)


def pool_table(report: dict) -> str:
    head = [
        "#",
        "role",
        "gpu",
        "tp",
        "replicas",
        "busy sim / util plan",
        "step ms (mean/plan)",
        "batch mean ± sd",
        "queue mean/max",
        "prefill tok/s",
        "decode tok/s",
    ]
    rows = [
        [
            str(p["pool"]),
            p["role"],
            p["gpu"],
            str(p["tensor_parallel"]),
            str(p["replicas"]),
            f"{_share(p['utilization'])} / {_share(p['planned_utilization'])}",
            f"{_ms(p['mean_step_ms'])} / {_ms(p['step_ms'])}",
            f"{fmt_number(p['mean_batch'], 1)} ± {fmt_number(p['batch_sd'], 1)}",
            f"{fmt_number(p['queue_mean'], 2)} / {p['queue_max']}",
            fmt_number(p["prefill_tokens_per_s"]),
            fmt_number(p["decode_tokens_per_s"]),
        ]
        for p in report["pools"]
    ]
    return grid(head, rows)


def _attained(attained: dict | None) -> str:
    if not attained or attained["both_margin"] is None:
        return _share(attained and attained["both"])
    return f"{_share(attained['both'])} ± {attained['both_margin'] * 100:.1f}"


def versus_targets(report: dict) -> str:
    """Measured p99 beside the plan's prediction and the target, per class."""
    head = [
        "workload",
        "TTFT ms p99 (sim/pred/target)",
        "TPOT ms p99 (sim/pred/target)",
        "SLO met (both)",
        "at percentile",
    ]
    rows = []
    for w in report["workloads"]:
        slo = w["slo"] or {}
        attained = w["slo_attainment"]
        verdict = "-" if w["meets_slo"] is None else ("yes" if w["meets_slo"] else "NO")
        if attained and attained["both_margin"] is not None:
            required = slo["percentile"] / 100
            if abs(attained["both"] - required) <= attained["both_margin"]:
                verdict += ", within noise"
        rows.append(
            [
                w["name"],
                " / ".join(
                    [
                        _ms(w["ttft_ms"]["p99"]),
                        _ms(w["predicted"]["ttft_ms"]),
                        fmt_number(slo.get("ttft_ms"), 0),
                    ]
                ),
                " / ".join(
                    [
                        _ms(w["tpot_ms"]["p99"]),
                        _ms(w["predicted"]["tpot_ms"]),
                        fmt_number(slo.get("tpot_ms"), 0),
                    ]
                ),
                _attained(attained),
                f"{verdict} (p{slo['percentile']:g})" if slo else "-",
            ]
        )
    return "\n".join([grid(head, rows), *_prediction_notes(report)])


def _prediction_notes(report: dict) -> list[str]:
    """What `pred` is, where a class without a TTFT target makes its queueing stand out: the
    plan holds no queue for it, so its measured tail may lie far above the prediction."""
    loose = [w["name"] for w in report["workloads"] if not (w["slo"] or {}).get("ttft_ms")]
    if not loose:
        return []
    return [
        "",
        "pred TTFT: the tail-length prompt on the slowest pool it is routed to, unqueued; the "
        "plan holds queueing within each TTFT target at its percentile, and bounds none for "
        f"{', '.join(loose)} (no TTFT target: its pools may run at full load for it)",
    ]


def to_table(report: dict) -> str:
    return "\n\n".join(
        [
            f"fleetopt simulation: {report['plan']}",
            _header(report),
            workload_table(report),
            pool_table(report),
            versus_targets(report),
        ]
    )


def _seconds(value: float) -> str:
    return f"{value:,.0f} s" if value >= 10 else f"{value:.2f} s"


def _header(report: dict) -> str:
    line = (
        f"{report['requests']:,} requests, {report['arrivals']}; {report['warmup']}; "
        f"measured over {_seconds(report['measured_seconds'])} of "
        f"{_seconds(report['simulated_seconds'])}"
    )
    if report["refused"]:
        line += f"; {report['refused']:,} refused (longer than their pool's KV cache)"
    return "\n".join([line, *(f"warning: {text}" for text in report["warnings"])])
