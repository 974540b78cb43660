"""Plots of a sweep (cost against the swept value) and of a Pareto front (cost against the
latency target), in the look of report/plots.py: Agg backend, bold suptitle, light grid, no top
or right spine, thousands separators.

Scenarios without a fleet are drawn as × on the x axis at their x, so a gap in a line is
never mistaken for a missing run.
"""

from __future__ import annotations

import itertools
import math
import re

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, NullLocator, StrMethodFormatter

from fleetopt.pareto import Frontier
from fleetopt.sweep.grid import Axis
from fleetopt.sweep.runner import Result

FIELD_TITLES = {
    "tpot_ms": "TPOT target, ms",
    "ttft_ms": "TTFT target, ms",
    "percentile": "SLO percentile, %",
    "requests_per_s": "requests/s",
    "prefill_tokens_per_s": "prefill tokens/s",
    "decode_tokens_per_s": "decode tokens/s",
    "max_gpus": "GPU cap",
    "gpus_per_node": "GPUs per node",
    "price_per_gpu_hour": "price, $ per GPU-hour",
    "budget_per_hour": "budget, $ per hour",
    "mean": "mean tokens",
}
"""Readable axis titles, units included, for the fields people sweep; others show their path."""
WIDE = 8.0
"""Spans (max / min) from which an axis is drawn on a log scale."""
NO_FLEET = {"marker": "x", "markersize": 8, "markeredgewidth": 2, "linestyle": "none"}


def axis_title(path: str) -> str:
    """`workloads[chat].slo.tpot_ms` → `chat TPOT target, ms`; `objective.budget_per_hour` →
    `budget, $ per hour`."""
    field = path.rsplit(".", 1)[-1]
    owner = re.findall(r"\[([^\]]+)\]", path)
    if field not in FIELD_TITLES:
        return path
    title = FIELD_TITLES[field]
    if field == "mean":
        title = f"{path.rsplit('.', 2)[-2].replace('_', ' ')}, mean"
    return f"{owner[-1]} {title}" if owner else title


def _style(ax: Axes) -> None:
    ax.spines[["top", "right"]].set_visible(False)
    ax.grid(alpha=0.3)
    ax.set_axisbelow(True)
    ax.yaxis.set_major_formatter(StrMethodFormatter("{x:,g}"))


def _numeric_ticks(ax: Axes, xs: list[float]) -> None:
    """Ticks at the values run, on a log scale where they span a wide range."""
    if min(xs) > 0 and max(xs) / min(xs) >= WIDE:
        ax.set_xscale("log")
        ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticks(xs, [f"{x:,g}" for x in xs])


def _scale_y(ax: Axes, ys: list[float], missing: bool) -> None:
    """Log where the values span a wide range, else linear from zero so heights compare; with
    room under the lowest value for the row of ×s that marks scenarios without a fleet."""
    if not ys:
        return
    low, high = min(ys), max(ys)
    if low > 0 and high / low >= WIDE:
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(StrMethodFormatter("{x:,g}"))
        ax.yaxis.set_minor_formatter(FuncFormatter(_two_three_five))
        margin = (high / low) ** 0.08
        ax.set_ylim(low / margin ** (2 if missing else 1), high * margin)
        return
    top = high * 1.1
    ax.set_ylim(-0.1 * top if missing else 0, top)
    ax.set_yticks([t for t in ax.get_yticks() if 0 <= t <= top])


def _two_three_five(value: float, _position: int) -> str:
    """Label the minor ticks 2, 3 and 5 of each decade on a log axis, and leave the rest bare."""
    leading = round(value / 10 ** math.floor(math.log10(value)))
    return f"{value:,g}" if leading in (2, 3, 5) else ""


def _no_fleet(ax: Axes, xs: list[float], color: str) -> None:
    """× on the x axis at each x without a fleet: no height, since there is no cost to show."""
    if xs:
        ax.plot(
            xs,
            [0] * len(xs),
            transform=ax.get_xaxis_transform(),
            color=color,
            clip_on=False,
            zorder=5,
            **NO_FLEET,
        )


def _metric(results: list[Result]) -> tuple[str, str]:
    """Cost, unless every scenario maximises throughput for a budget: then what it serves."""
    if all(r.scenario.instance.objective.maximize for r in results):
        return "decode_tokens_per_s", "output tokens/s served"
    return "cost_per_hour", "cost, $ per hour"


def _text(value: object) -> str:
    return f"{value:,g}" if isinstance(value, int | float) else str(value)


def _unitless(title: str) -> str:
    return title.split(",")[0]


def sweep_figure(name: str, axes: list[Axis], results: list[Result]) -> Figure:
    """The metric against the first swept field; one line per combination of the others."""
    x_axis, others = axes[0], axes[1:]
    metric, metric_title = _metric(results)
    numeric = all(isinstance(v, int | float) for v in x_axis.values)
    position = {v: (v if numeric else i) for i, v in enumerate(x_axis.values)}
    fig, ax = plt.subplots(figsize=(8.5, 5.2))
    _style(ax)
    combos = list(itertools.product(*(a.values for a in others)))
    colors = itertools.cycle(plt.rcParams["axes.prop_cycle"].by_key()["color"])
    solved_ys: list[float] = []
    missing = False
    for combo, color in zip(combos, colors, strict=False):
        fixed = {a.label: v for a, v in zip(others, combo, strict=True)}
        line = [r for r in results if all(r.scenario.values[k] == v for k, v in fixed.items())]
        solved = [r for r in line if r.outcome.solved]
        xs = [position[r.scenario.values[x_axis.label]] for r in solved]
        ys = [getattr(r.outcome, metric) for r in solved]
        label = ", ".join(_text(v) for v in combo) or None
        ax.plot(xs, ys, marker="o", color=color, label=label)
        if len(combos) == 1:
            for x, y in zip(xs, ys, strict=True):
                ax.annotate(
                    f"{y:,.4g}", (x, y), textcoords="offset points", xytext=(0, 7), ha="center"
                )
        unsolved = [position[r.scenario.values[x_axis.label]] for r in line if not r.outcome.solved]
        _no_fleet(ax, unsolved, color)
        missing = missing or bool(unsolved)
        solved_ys += ys
    if numeric:
        _numeric_ticks(ax, [float(v) for v in x_axis.values])
    else:
        ax.set_xticks(range(len(x_axis.values)), [str(v) for v in x_axis.values])
    _scale_y(ax, solved_ys, missing)
    ax.set_xlabel(axis_title(x_axis.path))
    ax.set_ylabel(metric_title)
    handles, labels = ax.get_legend_handles_labels()
    if missing:
        handles.append(Line2D([], [], color="grey", **NO_FLEET))
        labels.append("no fleet")
    if handles:
        title = ", ".join(axis_title(a.path) for a in others) or None
        ax.legend(
            handles, labels, title=title, frameon=False, fontsize=9, title_fontsize=9, loc="best"
        )
    fig.suptitle(
        f"{_unitless(metric_title).capitalize()} vs {_unitless(axis_title(x_axis.path))} — {name}",
        fontweight="bold",
    )
    fig.tight_layout()
    return fig


def frontier_figure(front: Frontier) -> Figure:
    """Cost against the target: the achievable cost as steps (a fleet that meets a target meets
    every looser one), frontier points filled, dominated ones hollow, violations in red, no
    fleet as ×, the stated target as a dashed line."""
    target = front.target
    fig, ax = plt.subplots(figsize=(8.5, 5.2))
    _style(ax)
    solved = [p for p in front.points if p.result.outcome.solved]
    xs = [p.target for p in front.points]
    if solved:
        steps_x = [p.target for p in solved] + [max(xs)]
        running = list(itertools.accumulate((p.result.outcome.cost_per_hour for p in solved), min))
        ax.step(
            steps_x,
            [*running, running[-1]],
            where="post",
            color="#4C72B0",
            alpha=0.6,
            label="cheapest fleet meeting the target",
        )
    for p in solved:
        cost = p.result.outcome.cost_per_hour
        if p.violation:
            ax.plot(p.target, cost, "o", color="#C44E52", markersize=8)
        elif p.frontier:
            ax.plot(p.target, cost, "o", color="#4C72B0", markersize=7)
            ax.annotate(
                f"${cost:,.2f}",
                (p.target, cost),
                textcoords="offset points",
                xytext=(4, 6),
                fontsize=9,
            )
        else:
            ax.plot(p.target, cost, "o", markerfacecolor="white", color="#4C72B0", markersize=7)
    _no_fleet(ax, [p.target for p in front.points if not p.result.outcome.solved], "#C44E52")
    stated = target.stated[target.reference]
    if stated is not None:
        ax.axvline(stated, color="black", linestyle="--", linewidth=0.9)
        ax.annotate(
            f"stated {stated:g} ms",
            (stated, 0.97),
            xycoords=("data", "axes fraction"),
            xytext=(4, 0),
            textcoords="offset points",
            va="top",
            fontsize=9,
        )
    _numeric_ticks(ax, xs)
    _scale_y(ax, [p.result.outcome.cost_per_hour for p in solved], len(solved) < len(xs))
    ax.set_xlabel(
        axis_title(f"workloads[{target.reference}].slo.{target.kind}")
        + (
            f" ({', '.join(target.workloads[1:])} scaled alike)"
            if len(target.workloads) > 1
            else ""
        )
    )
    ax.set_ylabel("cost, $ per hour")
    handles, labels = ax.get_legend_handles_labels()
    legend = [
        (Line2D([], [], marker="o", color="#4C72B0", linestyle="none"), "on the frontier"),
        (
            Line2D([], [], marker="o", color="#4C72B0", markerfacecolor="white", linestyle="none"),
            "dominated (a tighter target costs the same)",
        ),
    ]
    if front.violations:
        legend.append(
            (
                Line2D([], [], marker="o", color="#C44E52", linestyle="none"),
                "violation: a tighter target cost less",
            )
        )
    if len(solved) < len(front.points):
        legend.append((Line2D([], [], color="#C44E52", **NO_FLEET), "no fleet"))
    ax.legend(
        handles + [h for h, _ in legend],
        labels + [t for _, t in legend],
        frameon=False,
        fontsize=9,
        loc="upper right",
    )
    kind = "TPOT" if target.kind == "tpot_ms" else "TTFT"
    fig.suptitle(f"Cost–latency frontier: {kind} — {front.name}", fontweight="bold")
    fig.tight_layout()
    return fig


def save(fig: Figure, path: str) -> None:
    fig.savefig(path, dpi=110)
    plt.close(fig)
