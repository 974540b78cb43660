"""What the program is built from: plain numbers, no YAML, no Pyomo."""

from __future__ import annotations

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
    periods: list[Period] = field(default_factory=lambda: [Period()])
    tiers: Tiers | None = None

    def eligible(self) -> list[tuple[str, int]]:
        """(class, config index) pairs that get a routing variable: latency eligibility (§4)."""
        return [(c, k) for k, config in enumerate(self.configs) for c in config.usage]

    @property
    def total_hours(self) -> float:
        return sum(p.hours for p in self.periods)
