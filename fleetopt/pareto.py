"""`fleetopt pareto`: what a tighter latency target costs, traced from tight to loose.

One SLO target (`tpot_ms` or `ttft_ms`) is varied; every other input stays as stated. With
several workloads it is varied for all that state it, scaled together: the first such workload
is the reference, and each other keeps its stated ratio to it, so the x axis is one number in
ms. The points are solved by the sweep runner, in parallel.

The default range runs from the tightest reference target at which some config can still serve
every varied class (found by bisection on the config enumeration, which needs no solve) up to 4×
the stated target. Below that floor no fleet exists at any price; above 4× most costs have long
flattened out.

A plan that meets a tighter target meets a looser one, so the cheapest cost should never rise
as the target loosens. The frontier keeps, at each cost, the tightest target that buys it; a
looser point that costs more than a tighter one is reported as a violation, never silently
dropped: a time limit, the MIP gap, or the operating-point grid (a decode point is a class's
best step cut to its TPOT, so classes that shared a tighter target's point may not share a
looser one's; a class a looser target lets onto a point can tighten the margins of the configs
it joins: docs/formulation.md, Operating points, Queueing levels and Slot tiers).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fleetopt.errors import InfeasibleError, InputError
from fleetopt.instance import Instance
from fleetopt.solve import SolveOptions
from fleetopt.sweep.grid import Scenario, short_labels, with_values
from fleetopt.sweep.runner import Progress, Result, run_scenarios

KINDS = ("tpot_ms", "ttft_ms")
LOOSEST = 4.0
"""The default range ends at this multiple of the stated target."""
BISECTION_RATIO = 1.01
"""The tightest feasible target is found to within 1%."""


@dataclass(frozen=True)
class Target:
    """The SLO target being varied, for which workloads, and from what stated values."""

    kind: str
    workloads: tuple[str, ...]
    stated: dict[str, float | None]

    @property
    def reference(self) -> str:
        return self.workloads[0]

    def values_at(self, x: float) -> dict[str, float]:
        """Every varied workload's target when the reference's is x (stated ratios kept)."""
        ref = self.stated[self.reference]
        return {
            w: x if w == self.reference else _sig(x * self.stated[w] / ref, 4)
            for w in self.workloads
        }

    def describe(self) -> str:
        """Which workloads are varied, and how they move together."""
        text = f"varying slo.{self.kind} of {', '.join(self.workloads)}"
        if len(self.workloads) == 1:
            return text
        ref = self.stated[self.reference]
        ratios = ", ".join(
            f"{w} = {self.stated[w] / ref:.3g} × {self.reference}" for w in self.workloads[1:]
        )
        return f"{text} together, scaled as stated ({ratios})"


@dataclass(frozen=True)
class Point:
    target: float
    """The reference workload's target, ms: the x axis."""
    result: Result
    frontier: bool
    """No tighter target costs as little (within the MIP gap)."""
    violation: str | None = None
    """Set when a tighter target cost less: the program's monotonicity broke here."""


@dataclass(frozen=True)
class Frontier:
    name: str
    target: Target
    points: list[Point]
    """Tight to loose."""
    range_note: str

    @property
    def violations(self) -> list[str]:
        return [p.violation for p in self.points if p.violation]


def choose_target(instance: Instance, kind: str, workload: str | None) -> Target:
    """The workloads to vary: the one named, else every workload that states the target."""
    stated = {w.name: getattr(w.slo, kind) if w.slo else None for w in instance.workloads}
    if workload is not None:
        if workload not in stated:
            raise InputError(
                f"--workload {workload}: no such workload (known: {', '.join(stated)})"
            )
        return Target(kind, (workload,), {workload: stated[workload]})
    chosen = tuple(w for w, v in stated.items() if v is not None)
    if not chosen:
        raise InputError(
            f"--vary {kind}: no workload states slo.{kind}; name one with --workload and give "
            "--values"
        )
    return Target(kind, chosen, {w: stated[w] for w in chosen})


def default_values(instance: Instance, target: Target, points: int) -> tuple[list[float], str]:
    """Geometric points from the tightest feasible target to LOOSEST × the stated one, plus
    the stated target itself; and a sentence saying so."""
    stated = target.stated[target.reference]
    if stated is None:
        raise InputError(
            f"--vary {target.kind}: workloads[{target.reference}] states no slo.{target.kind} "
            "to range around; give --values"
        )
    loosest = _sig(LOOSEST * stated, 3)
    blocked = _blocked(instance, target, loosest)
    if blocked:
        raise InfeasibleError(
            f"--vary {target.kind}: no config serves every class even at {loosest:g} ms "
            f"({LOOSEST:g}× the stated target): {blocked[0]}"
        )
    tightest = _tightest(instance, target, loosest)
    ratio = (loosest / tightest) ** (1 / max(points - 1, 1))
    spaced = [tightest, *(_sig(tightest * ratio**i, 3) for i in range(1, points))]
    # A point within a quarter step of the stated target would crowd it and add nothing.
    crowded = {x for x in spaced[1:-1] if abs(math.log(x / stated)) < math.log(ratio) / 4}
    values = sorted({stated, *spaced} - crowded)
    note = (
        f"{target.kind} {tightest:g} ms (the tightest at which some config serves every class, "
        f"by bisection to 1%) to {loosest:g} ms ({LOOSEST:g}× the stated {stated:g} ms): "
        f"{points} points evenly spaced on a log scale, plus the stated target"
        + (" (in place of the point next to it)" if crowded else "")
    )
    return values, note


def _tightest(instance: Instance, target: Target, loosest: float) -> float:
    """The smallest reference target (3 significant digits, rounded up) at which every varied
    class still has a config, by bisection between a hopeless 1/1000 of `loosest` and it."""
    good, bad = loosest, loosest / 1000
    if not _blocked(instance, target, bad):
        return bad
    while good / bad > BISECTION_RATIO:
        mid = math.sqrt(good * bad)
        if _blocked(instance, target, mid):
            bad = mid
        else:
            good = mid
    rounded = _sig(good, 3, up=True)
    return rounded if not _blocked(instance, target, rounded) else good


def _blocked(instance: Instance, target: Target, x: float) -> list[str]:
    """Why no config can serve some class at reference target x (empty: every class can)."""
    from fleetopt.catalog import resolve
    from fleetopt.configs import enumerate_configs
    from fleetopt.diagnose import blocked_classes

    resolved = resolve(_at(instance, target, x))
    return blocked_classes(enumerate_configs(resolved), resolved)


def _at(instance: Instance, target: Target, x: float) -> Instance:
    changes = {f"workloads[{w}].slo.{target.kind}": v for w, v in target.values_at(x).items()}
    return with_values(instance, changes, f"--vary {target.kind}={x:g}")


def scenarios(instance: Instance, target: Target, values: list[float]) -> list[Scenario]:
    """One scenario per reference target, tight to loose, labelled by each varied target."""
    paths = {w: f"workloads[{w}].slo.{target.kind}" for w in target.workloads}
    labels = short_labels(list(paths.values()))
    return [
        Scenario(
            i,
            {labels[paths[w]]: v for w, v in target.values_at(x).items()},
            _at(instance, target, x),
        )
        for i, x in enumerate(sorted(values))
    ]


def trace(
    instance: Instance,
    target: Target,
    values: list[float],
    range_note: str,
    options: SolveOptions,
    jobs: int | None = None,
    progress: Progress | None = None,
) -> Frontier:
    """Solve every point (in parallel) and mark the frontier."""
    xs = sorted(values)
    results = run_scenarios(scenarios(instance, target, xs), options, jobs, progress)
    points = classify(xs, results, options.mip_gap, target.kind)
    return Frontier(instance.name, target, points, range_note)


def classify(xs: list[float], results: list[Result], mip_gap: float, kind: str) -> list[Point]:
    """Walk tight to loose: a point is on the frontier when it is cheaper than every tighter
    one, dominated when a tighter one costs the same, and a violation when a tighter one costs
    less (beyond the MIP gap either could be off by)."""
    points = []
    best: tuple[float, float] | None = None  # (cost, target) of the cheapest tighter point
    for x, result in zip(xs, results, strict=True):
        outcome = result.outcome
        if not outcome.solved:
            points.append(Point(x, result, frontier=False))
            continue
        cost = outcome.cost_per_hour
        tol = max(mip_gap, outcome.mip_gap or 0.0) + 1e-9
        if best is None or cost < best[0] * (1 - tol):
            points.append(Point(x, result, frontier=True))
            best = (cost, x)
        elif cost <= best[0] * (1 + tol):
            points.append(Point(x, result, frontier=False))
        else:
            points.append(
                Point(
                    x,
                    result,
                    frontier=False,
                    violation=(
                        f"{kind} {x:g} ms costs {cost:,.2f} $/h, more than the tighter "
                        f"{best[1]:g} ms at {best[0]:,.2f} $/h, whose plan meets {x:g} ms too: "
                        "the operating-point grid or a class that joined a point's configs "
                        "(docs/formulation.md, Operating points, Queueing levels), or the time "
                        f"limit or MIP gap stopped the solve (status {outcome.status})"
                    ),
                )
            )
    return points


def _sig(value: float, digits: int, up: bool = False) -> float:
    """`value` to `digits` significant digits (rounded up when `up`, to stay feasible)."""
    scale = 10 ** (digits - 1 - math.floor(math.log10(value)))
    return (math.ceil(value * scale - 1e-9) if up else round(value * scale)) / scale
