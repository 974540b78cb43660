"""How much load a pool of n servers carries while the wait tail stays within budget.

A prefill pool (or the prefill chunks of colocated replicas) is treated as an M/G/n queue: Poisson
arrivals, n replicas serving prompts first come first served, a prompt's service time s being
the compute time it takes at the replica's prefill rate. Erlang C gives the probability of
waiting, and the M/M/n wait tail, stretched by the Allen–Cunneen factor (1 + cs²)/2 for general
service times, gives

    P(wait > W) ≈ C(n, a) · exp(−(n − a) · W / (s · (1 + cs²)/2))

for an offered load of a servers' worth of work. `max_load(n, ...)` is the largest a that keeps
this at or below 1 − percentile. It is convex in n — each added replica carries more than the
last (pooling, square-root staffing) — which the program holds with an incremental binary
expansion (docs/formulation.md §2). docs/latency.md states the assumptions and measures them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

SERVICE_CV2 = 1.0
"""Squared coefficient of variation of prompt service times assumed when sizing (exponential-like):
prompt lengths of chat and RAG traffic are about as variable as that (Azure 2023 conversation
trace: std/mean of prompt tokens 0.94)."""

LINEAR_WITHIN = 0.01
"""The expansion stops where one more replica adds within 1% of what the previous one added."""
MAX_EXPANSION = 64
"""…or at this many replicas, beyond which every further one counts at the last marginal rate
(conservative, since the marginal keeps growing)."""


def erlang_c(servers: int, load: float) -> float:
    """Probability that an arrival waits in M/M/n with offered load `load` (< servers)."""
    if load <= 0:
        return 0.0
    if load >= servers:
        return 1.0
    blocking = 1.0  # Erlang B by its stable recursion
    for k in range(1, servers + 1):
        blocking = load * blocking / (k + load * blocking)
    return servers * blocking / (servers - load * (1 - blocking))


def wait_tail(
    servers: int, load: float, wait_in_services: float, cv2: float = SERVICE_CV2
) -> float:
    """P(wait > W) with W given in mean service times."""
    if load >= servers:
        return 1.0
    stretch = (1 + cv2) / 2
    return erlang_c(servers, load) * math.exp(-(servers - load) * wait_in_services / stretch)


@lru_cache(maxsize=65536)
def max_load(servers: int, wait_in_services: float, tail: float, cv2: float = SERVICE_CV2) -> float:
    """Largest offered load (in servers) with P(wait > W) ≤ tail; 0 if not even a trickle fits."""
    if servers <= 0 or wait_in_services <= 0:
        return 0.0
    low, high = 0.0, float(servers)
    for _ in range(60):
        mid = (low + high) / 2
        if wait_tail(servers, mid, wait_in_services, cv2) <= tail:
            low = mid
        else:
            high = mid
    return low


@dataclass(frozen=True)
class PoolCurve:
    """g(n) for n = 1..N as increments, then a constant marginal: the load n replicas carry in
    units of one replica's capacity at the utilisation ceiling u, so g(n) ≤ n and g(n) = n
    where queueing does not bite."""

    increments: tuple[float, ...]  # f(j) − f(j−1), j = 1..N
    tail_rate: float  # added per replica beyond N

    @property
    def linear(self) -> bool:
        """True when f(n) = tail_rate·n exactly: no binaries needed."""
        return all(math.isclose(d, self.tail_rate, rel_tol=1e-12) for d in self.increments)

    def load(self, replicas: int) -> float:
        head = self.increments[:replicas]
        return sum(head) + max(0, replicas - len(self.increments)) * self.tail_rate


NO_QUEUEING = PoolCurve((1.0,), 1.0)


def pool_curve(
    wait_in_services: float, tail: float, ceiling: float, max_replicas: int | None = None
) -> PoolCurve:
    """g(n) = min(u·n, f(n)) / u, expanded up to where it is linear within LINEAR_WITHIN (or
    MAX_EXPANSION, or the most replicas the program may use)."""
    limit = max(1, min(MAX_EXPANSION, max_replicas) if max_replicas else MAX_EXPANSION)
    values = [0.0]
    tail_rate = None
    for n in range(1, limit + 1):
        carried = max_load(n, wait_in_services, tail)
        if carried >= ceiling * n:
            values.append(ceiling * n)
            tail_rate = ceiling  # at the ceiling from here on: exactly linear
            break
        values.append(carried)
        if n >= 2:
            previous, last = values[n - 1] - values[n - 2], values[n] - values[n - 1]
            if previous > 0 and last <= previous * (1 + LINEAR_WITHIN):
                break
    increments = tuple((values[j] - values[j - 1]) / ceiling for j in range(1, len(values)))
    if len(increments) == 1 and tail_rate is not None:
        return NO_QUEUEING  # one replica already reaches the ceiling
    rate = 1.0 if tail_rate is not None else increments[-1]
    return PoolCurve(increments, rate)
