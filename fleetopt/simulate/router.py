"""Routing as the plan says: a pool per request by the plan's route rates, then the replica of
that pool with the least prefill work queued.

A class's routes are colocated pools (phase `both`) and, when it is disaggregated, prefill and
decode pools. A request takes a colocated pool with probability rate/total, or the
disaggregated path with the probability of the prefill routes' total; on that path it takes a
prefill pool and, independently, a decode pool, each in proportion to its routed rate. Pools
are drawn for every request up front (vectorised, seeded).

Within a pool the router joins the replica with the fewest prompt tokens still to prefill — the
work queued ahead of the new prompt, so the pool's replicas act as one queue, as the planner's
M/G/n TTFT model assumes — and among equals (a decode pool: all) one with a free batch slot,
then the one with the fewest outstanding tokens, prompt tokens to prefill plus output tokens to
decode: a queue-aware, least-outstanding-work policy like a production LLM router's, whose
replicas share their slots as the planner's pool-wide admission headroom assumes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Protocol, TypeVar

import numpy as np

from fleetopt.errors import InputError
from fleetopt.plan import Plan

NO_POOL = -1


@dataclass(frozen=True)
class PoolChoice:
    """Per request: the pool that takes the prompt, and the decode pool (NO_POOL: colocated)."""

    entry: np.ndarray
    decode: np.ndarray


def assign_pools(
    plan: Plan, names: list[str], workload: np.ndarray, rng: np.random.Generator
) -> PoolChoice:
    entry = np.full(len(workload), NO_POOL, dtype=np.int64)
    decode = np.full(len(workload), NO_POOL, dtype=np.int64)
    by_name = {w.name: w for w in plan.workloads}
    for index, name in enumerate(names):
        mine = np.flatnonzero(workload == index)
        if not len(mine):
            continue
        routes = by_name[name].routes
        both = [(r.pool, r.requests_per_s) for r in routes if r.phase == "both"]
        prefill = [(r.pool, r.requests_per_s) for r in routes if r.phase == "prefill"]
        decoding = [(r.pool, r.requests_per_s) for r in routes if r.phase == "decode"]
        options = [*both, (NO_POOL, sum(rate for _, rate in prefill))]
        if sum(rate for _, rate in options) <= 0:
            raise InputError(f"workload {name}: the plan routes none of its requests")
        entry[mine] = _draw(rng, options, len(mine))
        split = mine[entry[mine] == NO_POOL]
        if len(split):
            if not decoding:
                raise InputError(f"workload {name}: the plan routes prefill but no decode")
            entry[split] = _draw(rng, prefill, len(split))
            decode[split] = _draw(rng, decoding, len(split))
    return PoolChoice(entry, decode)


def _draw(rng: np.random.Generator, options: list[tuple[int, float]], n: int) -> np.ndarray:
    pools = np.array([pool for pool, _ in options])
    weights = np.array([max(rate, 0.0) for _, rate in options])
    return pools[rng.choice(len(pools), size=n, p=weights / weights.sum())]


class HasBacklog(Protocol):
    prefill_backlog: int
    full: bool
    backlog: int


R = TypeVar("R", bound=HasBacklog)
_backlogs = attrgetter("prefill_backlog", "full", "backlog")


def least_loaded(replicas: Sequence[R]) -> R:
    """The replica with the fewest prompt tokens still to prefill, then one with a free batch
    slot, then the fewest outstanding tokens (the first of equals)."""
    return min(replicas, key=_backlogs)
