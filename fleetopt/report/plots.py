"""Plots of a plan, drawn with matplotlib's Agg backend (no display needed) as PNG bytes.

Each plot is a function `Plan -> Figure | None` in PLOTS (None: nothing to show for this plan);
a report renders them in order; the per-period fleet appears only for a demand profile.
"""

from __future__ import annotations

import io
from collections.abc import Callable

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
from matplotlib.figure import Figure
from matplotlib.ticker import StrMethodFormatter

from fleetopt.plan import Plan, PoolPlan

ROLE_COLORS = {"colocated": "#4C72B0", "prefill": "#DD8452", "decode": "#55A868"}
CAPACITY_ALPHA = 0.3


def pool_label(index: int, pool: PoolPlan) -> str:
    return f"#{index} {pool.gpu} tp{pool.tensor_parallel} {pool.role}"


def _pool_axes(plan: Plan, panels: int, title: str) -> tuple[Figure, list, list[str]]:
    """A figure with one horizontal-bar panel per measure, pools top to bottom."""
    labels = [pool_label(i, p) for i, p in enumerate(plan.pools)]
    height = 1.2 + 0.45 * len(labels)
    fig, axes = plt.subplots(
        1, panels, figsize=(max(5.2 * panels, 9.0), height), sharey=True, squeeze=False
    )
    fig.suptitle(f"{title} — {plan.name}", fontweight="bold")
    for ax in axes[0]:
        ax.spines[["top", "right"]].set_visible(False)
        ax.grid(axis="x", alpha=0.3)
        ax.xaxis.set_major_formatter(StrMethodFormatter("{x:,g}"))
        ax.set_axisbelow(True)
    return fig, list(axes[0]), labels


def _finish(fig: Figure, plan: Plan) -> None:
    """Pool #0 on top, a legend of roles below, room for both."""
    fig.axes[0].invert_yaxis()
    roles = list(dict.fromkeys(p.role for p in plan.pools))
    handles = [plt.Rectangle((0, 0), 1, 1, color=ROLE_COLORS[r]) for r in roles]
    fig.legend(handles, roles, loc="lower center", ncol=len(roles), frameon=False)
    fig.tight_layout(rect=(0, 0.08, 1, 1))


def _annotate(ax, values: list[float], texts: list[str]) -> None:
    right = max(values, default=0) or 1
    for y, (value, text) in enumerate(zip(values, texts, strict=True)):
        ax.text(value + right * 0.02, y, text, va="center", fontsize=9)
    ax.set_xlim(0, right * 1.25)


def gpus_and_cost(plan: Plan) -> Figure | None:
    """Where the money goes: GPUs and $/h per pool, coloured by role."""
    if not plan.pools:
        return None
    total = f"{sum(plan.gpus.values())} GPUs, ${plan.cost_per_hour:,.2f}/h"
    fig, (left, right), labels = _pool_axes(plan, 2, f"GPUs and cost by pool ({total})")
    colors = [ROLE_COLORS[p.role] for p in plan.pools]
    gpus = [p.gpus for p in plan.pools]
    cost = [p.cost_per_hour for p in plan.pools]
    left.barh(labels, gpus, color=colors)
    left.set_xlabel("GPUs")
    _annotate(
        left,
        gpus,
        [
            f"{g} ({p.replicas} × tp{p.tensor_parallel})"
            for g, p in zip(gpus, plan.pools, strict=True)
        ],
    )
    right.barh(labels, cost, color=colors)
    right.set_xlabel("$ per hour")
    _annotate(right, cost, [f"${c:,.2f}" for c in cost])
    _finish(fig, plan)
    return fig


def utilization(plan: Plan) -> Figure | None:
    """How full each pool runs, and which resource fills first."""
    if not plan.pools:
        return None
    fig, (ax,), labels = _pool_axes(plan, 1, "Utilisation per pool")
    shares = [100 * p.utilization for p in plan.pools]
    ax.barh(labels, shares, color=[ROLE_COLORS[p.role] for p in plan.pools])
    ax.set_xlabel("utilisation of the binding resource, %")
    _annotate(
        ax, shares, [f"{s:.0f}% · {p.limited_by}" for s, p in zip(shares, plan.pools, strict=True)]
    )
    ax.set_xlim(0, 150)
    ax.axvline(100, color="black", linewidth=0.8, linestyle="--")
    _finish(fig, plan)
    return fig


def tokens_demand_vs_capacity(plan: Plan) -> Figure | None:
    """Tokens/s routed to each pool against what it could carry at its mix, prefill and decode."""
    if not plan.pools:
        return None
    fig, axes, labels = _pool_axes(plan, 2, "Tokens/s: demand routed vs capacity per pool")
    for ax, phase in zip(axes, ("prefill", "decode"), strict=True):
        capacity = [getattr(p, f"{phase}_tokens_per_s") for p in plan.pools]
        routed = [getattr(p, f"routed_{phase}_tokens_per_s") for p in plan.pools]
        colors = [ROLE_COLORS[p.role] for p in plan.pools]
        ax.barh(labels, capacity, color=colors, alpha=CAPACITY_ALPHA, label="capacity")
        ax.barh(labels, routed, color=colors, height=0.5, label="demand routed")
        ax.set_xlabel(f"{phase} tokens/s")
        ax.set_title(phase, fontsize=10)
        _annotate(
            ax,
            capacity,
            [f"{r:,.0f} / {c:,.0f}" if c else "-" for r, c in zip(routed, capacity, strict=True)],
        )
    wide = plt.Rectangle((0, 0), 1, 1, color="grey", alpha=CAPACITY_ALPHA)
    narrow = plt.Rectangle((0, 0), 1, 1, color="grey")
    fig.axes[0].invert_yaxis()
    fig.legend(
        [narrow, wide],
        ["demand routed", "capacity at the pool's mix of classes"],
        loc="lower center",
        ncol=2,
        frameon=False,
    )
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    return fig


TIER_COLORS = {"reserved": "#4C72B0", "on-demand": "#DD8452", "spot": "#55A868"}


def fleet_by_period(plan: Plan) -> Figure | None:
    """GPUs in service per period, stacked by price tier (or by GPU type without tiers), with
    the demand multiplier and the $/h of each period: where the fleet breathes with the day."""
    if not plan.periods:
        return None
    periods = plan.periods
    x = list(range(len(periods)))
    fig, (ax, cost_ax) = plt.subplots(
        2,
        1,
        figsize=(max(9.0, 0.38 * len(periods) + 3), 6.4),
        sharex=True,
        gridspec_kw={"height_ratios": [3, 1.3]},
    )
    fig.suptitle(f"Fleet by period — {plan.name}", fontweight="bold")
    if plan.reserved_gpus is not None:
        reserved = sum(plan.reserved_gpus.values())
        layers = {
            "reserved": [reserved] * len(periods),
            "on-demand": [sum((p.on_demand_gpus or {}).values()) for p in periods],
            "spot": [sum((p.spot_gpus or {}).values()) for p in periods],
        }
        colors = TIER_COLORS
    else:
        types = sorted({g for p in periods for g in p.gpus})
        layers = {g: [p.gpus.get(g, 0) for p in periods] for g in types}
        palette = plt.get_cmap("tab10")
        colors = {g: palette(i) for i, g in enumerate(types)}
    bottom = [0.0] * len(periods)
    for name, values in layers.items():
        ax.bar(x, values, bottom=bottom, color=colors[name], label=name, width=0.8)
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    ax.set_ylabel("GPUs in service")
    demand = ax.twinx()
    demand.plot(
        x,
        [p.multiplier for p in periods],
        color="black",
        marker="o",
        lw=1.5,
        label="demand (× stated)",
    )
    demand.set_ylabel("demand multiplier")
    demand.set_ylim(0, max(p.multiplier for p in periods) * 1.15 or 1)
    handles, labels = ax.get_legend_handles_labels()
    more, more_labels = demand.get_legend_handles_labels()
    ax.legend(handles + more, labels + more_labels, loc="upper left", frameon=False, fontsize=9)
    cost_ax.bar(x, [p.cost_per_hour for p in periods], color="#8172B3", width=0.8)
    cost_ax.axhline(
        plan.cost_per_hour,
        color="black",
        ls="--",
        lw=1,
        label=f"mean {plan.cost_per_hour:,.2f} $/h",
    )
    if plan.peak_sized_cost_per_hour is not None:
        cost_ax.axhline(
            plan.peak_sized_cost_per_hour,
            color="#C44E52",
            ls=":",
            lw=1.5,
            label=f"sized for the peak {plan.peak_sized_cost_per_hour:,.2f} $/h",
        )
    cost_ax.set_ylabel("$/h")
    cost_ax.set_xlabel(
        f"period ({periods[0].hours:g} h each)"
        if len({p.hours for p in periods}) == 1
        else "period"
    )
    cost_ax.legend(loc="upper left", frameon=False, fontsize=8)
    for axis in (ax, cost_ax):
        axis.spines[["top"]].set_visible(False)
        axis.grid(axis="y", alpha=0.3)
        axis.set_axisbelow(True)
    cost_ax.set_xticks(x)
    fig.tight_layout()
    return fig


PLOTS: list[tuple[str, Callable[[Plan], Figure | None]]] = [
    ("gpus-and-cost", gpus_and_cost),
    ("utilization", utilization),
    ("tokens", tokens_demand_vs_capacity),
    ("fleet-by-period", fleet_by_period),
]
"""(file stem, plot) in report order."""


def render(plan: Plan) -> list[tuple[str, str, bytes]]:
    """(stem, title, PNG bytes) of every plot that has something to show."""
    images = []
    for stem, plot in PLOTS:
        fig = plot(plan)
        if fig is None:
            continue
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=110)
        plt.close(fig)
        images.append((stem, fig.get_suptitle(), buffer.getvalue()))
    return images
