"""What the program is built from: plain numbers, no YAML, no Pyomo."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from fleetopt.configs import Config, RequestClass

GPU_COUNT_TIE_BREAK = 1e-4
"""$/h charged per GPU and per replica on top of the price: of two equal-cost fleets the smaller wins."""


@dataclass(frozen=True)
class GpuMarket:
    name: str
    price_per_gpu_hour: float
    max_gpus: int | None
    gpus_per_node: int | None


@dataclass(frozen=True)
class Period:
    """A stretch of the horizon with one demand level: rates are `multiplier` × the stated ones."""

    multiplier: float = 1.0
    hours: float = 1.0


@dataclass(frozen=True)
class Tiers:
    """Price tiers as factors of the on-demand price: reserved GPUs are paid in every period,
    spot GPUs may make up at most `spot_max_fraction` of a GPU type's fleet in a period."""

    reserved_price_factor: float
    spot_price_factor: float
    spot_max_fraction: float


@dataclass(frozen=True)
class ProgramData:
    classes: list[RequestClass]
    configs: list[Config]
    gpus: list[GpuMarket]
    maximize_throughput: bool = False
    budget_per_hour: float | None = None
    demand_scale_limit: float | None = None
    """Throughput mode: the largest alpha the supported range of rates admits (the busiest
    class at the peak within it); the budget may buy more than the queueing models are tested at."""
    periods: list[Period] = field(default_factory=lambda: [Period()])
    tiers: Tiers | None = None
    replica_bounds: dict[tuple[int, int], int] = field(default_factory=dict)
    """Tighter bounds on x[k,t] than the demand gives, proven by an incumbent
    (fleetopt/presolve.py); keys are (config index, period index)."""
    hull_orders: dict[tuple[int, int], tuple[tuple[str, ...], ...]] = field(default_factory=dict)
    """Orders of the classes of config k whose pooling hull rows it gets in period t, where it
    carries too many classes for all of them (formulation/prefill.py::add_pool_hull): those
    an LP solution broke (fleetopt/presolve.py); keys as above."""

    def restricted(self, configs: list[int], bounds: dict[tuple[int, int], int] | None = None):
        """The program on these configs only (indices into this one), keeping their replica
        bounds, or taking `bounds` (keyed by this program's indices) instead."""
        bounds = self.replica_bounds if bounds is None else bounds
        local = {k: i for i, k in enumerate(configs)}
        return dataclasses.replace(
            self,
            configs=[self.configs[k] for k in configs],
            replica_bounds={(local[k], t): b for (k, t), b in bounds.items() if k in local},
            hull_orders={(local[k], t): o for (k, t), o in self.hull_orders.items() if k in local},
        )

    def at_scale(self, scale: float) -> ProgramData:
        """The program in cost mode with every class's demand times `scale`, its budget still a
        row: what a fleet serving that scale of the demand costs at least."""
        classes = [
            dataclasses.replace(c, requests_per_s=c.requests_per_s * scale) for c in self.classes
        ]
        return dataclasses.replace(self, classes=classes, maximize_throughput=False)

    def with_hull_orders(self, found: dict[tuple[int, int], tuple[str, ...]]) -> ProgramData:
        """The program with these orders' hull rows too."""
        orders = dict(self.hull_orders)
        for key, order in found.items():
            orders[key] = (*orders.get(key, ()), order)
        return dataclasses.replace(self, hull_orders=orders)

    def eligible(self) -> list[tuple[str, int]]:
        """(class, config index) pairs that get a routing variable: latency eligibility (§4)."""
        return [(c, k) for k, config in enumerate(self.configs) for c in config.usage]

    @property
    def total_hours(self) -> float:
        return sum(p.hours for p in self.periods)
