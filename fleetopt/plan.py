"""The solver's answer as data: pools, routes, GPUs, cost, latency. JSON names are the public contract."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

HOURS_PER_MONTH = 730.0


@dataclass
class Route:
    pool: int
    phase: str  # both | prefill | decode
    requests_per_s: float


@dataclass
class PoolPlan:
    model: str
    role: str
    gpu: str
    tensor_parallel: int
    replicas: int
    gpus: int
    cost_per_hour: float
    prefill_tokens_per_s: float
    """Prefill capacity at this pool's mix of classes (routed / utilisation)."""
    decode_tokens_per_s: float
    routed_prefill_tokens_per_s: float
    routed_decode_tokens_per_s: float
    utilization: float
    """Busy share of the binding resource."""
    limited_by: str
    step_ms: float | None
    """Step-time budget of the operating point: of a prefill step, of a decode step (the TPOT
    it holds), or of a colocated replica's mean step; None for measured capacity."""
    chunk_tokens: int | None
    measured: bool = False
    prefill_step_share: float | None = None
    """Share of the pool's step time its prompts take at the routed load (1 prefill, 0 decode;
    None if measured)."""
    longest_step_ms: float | None = None
    """Colocated: the budget of a step that carries a full chunk (the TPOT it holds); None
    where no TPOT is held, or not colocated."""
    unqueued_ttft_misses: dict[str, float] | None = None
    """Share of each routed class's requests that miss its TTFT in this pool however idle it is
    (prompts whose prefill alone takes longer here); only classes with any. They spend the
    class's miss share before queueing: the pool holds the percentile on its own."""
    one_fewer_frees_gpus: int | None = None
    """GPUs one replica fewer in this pool would stop paying for: its tensor_parallel, except
    where its GPU type is bought in whole nodes: fewer (often 0) where the node would stay
    part-used, more where the replica holds a node of its own with idle GPUs."""


@dataclass
class WorkloadPlan:
    name: str
    model: str
    requests_per_s: float
    prefill_tokens_per_s: float
    decode_tokens_per_s: float
    input_tokens: float
    output_tokens: float
    ttft_ms: float | None
    """Predicted TTFT of a tail-length prompt on the slowest pool it is routed to (no queueing)."""
    tpot_ms: float | None
    slo: dict | None
    routes: list[Route] = field(default_factory=list)


@dataclass
class PeriodPlan:
    """The fleet of one period of a demand profile."""

    index: int
    multiplier: float
    hours: float
    cost_per_hour: float
    gpus: dict[str, int]
    on_demand_gpus: dict[str, int] | None
    spot_gpus: dict[str, int] | None
    pools: list[PoolPlan]
    workloads: list[WorkloadPlan]


@dataclass
class Plan:
    name: str
    status: str  # optimal | feasible | infeasible
    objective: str
    cost_per_hour: float
    objective_bound: float | None
    mip_gap: float | None
    solve_seconds: float
    gpus: dict[str, int]
    pools: list[PoolPlan]
    workloads: list[WorkloadPlan]
    demand_scale: float = 1.0
    """Share of the stated demand the plan serves (1 when minimising cost)."""
    demand_scale_limit: float | None = None
    """Throughput mode: the largest demand_scale within the supported rates (1,000,000 req/s a
    workload at the peak); a plan at it leaves budget unspent."""
    reserved_gpus: dict[str, int] | None = None
    """GPUs committed for the whole horizon at the reserved price (with `pricing`)."""
    periods: list[PeriodPlan] | None = None
    """One fleet per period of the demand profile; the top-level pools are the peak period's,
    and cost_per_hour is the hour-weighted mean over the horizon."""
    peak_sized_cost_per_hour: float | None = None
    """What one fleet sized for the peak, all on-demand, would cost: the saving's baseline."""
    interrupted: bool = False
    """Ctrl-C stopped the solve: the plan is the best found by then (status feasible, mip_gap
    how far it may be from the optimum)."""
    length_routing: dict | None = None
    """Workloads given as data: the length buckets they were split into (with the tail length
    that sizes each bucket's TTFT), and the cost of the simple answers beside this plan's."""

    @property
    def cost_per_month(self) -> float:
        return self.cost_per_hour * HOURS_PER_MONTH

    @property
    def prefill_tokens_per_s(self) -> float:
        """Prompt tokens/s served: the hour-weighted mean over periods where there are some."""
        return self._mean(lambda w: w.prefill_tokens_per_s)

    @property
    def decode_tokens_per_s(self) -> float:
        return self._mean(lambda w: w.decode_tokens_per_s)

    @property
    def requests_per_s(self) -> float:
        return self._mean(lambda w: w.requests_per_s)

    def _mean(self, tokens) -> float:
        if not self.periods:
            return sum(tokens(w) for w in self.workloads)
        hours = sum(p.hours for p in self.periods)
        return sum(p.hours * sum(tokens(w) for w in p.workloads) for p in self.periods) / hours

    @property
    def cost_per_million_tokens(self) -> float | None:
        """$ per million tokens served, prefill and decode together."""
        tokens_per_hour = (self.prefill_tokens_per_s + self.decode_tokens_per_s) * 3600
        return self.cost_per_hour / tokens_per_hour * 1e6 if tokens_per_hour else None

    @property
    def cost_per_million_output_tokens(self) -> float | None:
        tokens_per_hour = self.decode_tokens_per_s * 3600
        return self.cost_per_hour / tokens_per_hour * 1e6 if tokens_per_hour else None

    @property
    def saving_per_hour(self) -> float | None:
        """What the plan saves against one fleet sized for the peak, all on-demand."""
        if self.peak_sized_cost_per_hour is None:
            return None
        return self.peak_sized_cost_per_hour - self.cost_per_hour

    def to_dict(self) -> dict:
        data = asdict(self)
        data["cost_per_month"] = self.cost_per_month
        data["prefill_tokens_per_s"] = self.prefill_tokens_per_s
        data["decode_tokens_per_s"] = self.decode_tokens_per_s
        data["cost_per_million_tokens"] = self.cost_per_million_tokens
        data["cost_per_million_output_tokens"] = self.cost_per_million_output_tokens
        data["saving_per_hour"] = self.saving_per_hour
        return data

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def pools_frame(self) -> pd.DataFrame:
        import pandas as pd  # only a CSV needs it; a solve starts faster without

        return pd.DataFrame([asdict(p) for p in self.pools])

    @classmethod
    def from_dict(cls, data: dict) -> Plan:
        known = set(cls.__dataclass_fields__)
        plan = cls(**{k: v for k, v in data.items() if k in known})
        plan.pools, plan.workloads = _pools(data["pools"]), _workloads(data["workloads"])
        if data.get("periods"):
            plan.periods = [
                PeriodPlan(
                    **{**p, "pools": _pools(p["pools"]), "workloads": _workloads(p["workloads"])}
                )
                for p in data["periods"]
            ]
        return plan


def _pools(rows: list[dict]) -> list[PoolPlan]:
    return [PoolPlan(**p) for p in rows]


def _workloads(rows: list[dict]) -> list[WorkloadPlan]:
    return [WorkloadPlan(**{**w, "routes": [Route(**r) for r in w["routes"]]}) for w in rows]
