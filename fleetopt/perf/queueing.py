"""How much load a pool of n servers carries while the wait tail stays within budget.

A prefill pool (or the prefill chunks of colocated replicas) is treated as an M/G/n queue: Poisson
arrivals, n replicas serving prompts first come first served, a prompt's service time s being
the compute time it takes at the replica's prefill rate. Erlang C gives the probability of
waiting, and the M/M/n wait tail, stretched by the Allen–Cunneen factor (1 + cs²)/2 for general
service times, gives

    P(wait > W) ≈ C(n, a) · exp(−(n − a) · W / (s · (1 + cs²)/2))

for an offered load of a servers' worth of work. Prompts of different lengths have different
wait budgets W (the TTFT target less their own prefill time), so the budget is a mixture: shares
π_i of the requests, each with its own W_i, and the share that misses is

    Σ_i π_i · P(wait > W_i)        (W_i ≤ 0: a sure miss, whatever the load).

`max_load(n, ...)` is the largest a that keeps this at or below 1 − percentile. It is convex in
n — each added replica carries more than the last (pooling, square-root staffing) — which the
program holds with an incremental binary expansion (docs/formulation.md §2). docs/latency.md
states the assumptions and measures them.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property, lru_cache

SERVICE_CV2 = 1.0
"""The least squared coefficient of variation of prompt service times assumed when sizing
(exponential-like); a class whose lengths spread more brings its own (`RequestShape.service_cv2`).
Chat traffic is about this variable (Azure 2023 conversation trace: std/mean of prompt tokens
0.94)."""

Waits = tuple[tuple[float, float], ...]
"""A wait budget as a mixture: (share of requests, wait they may take in mean service times),
shares summing to 1. A single budget W is ((1.0, W),)."""

LINEAR_WITHIN = 0.01
"""The expansion stops at the smallest N from which continuing at the last marginal rate stays
within 1% of g(n) for every n up to the expansion limit."""
MAX_EXPANSION = 64
"""The expansion limit: the rule above is checked up to this many replicas (or the most the
program may use); beyond, replicas count at the tail rate, a lower bound while g is convex."""


def sure_misses(waits: Waits) -> float:
    """Share of requests with no time to wait: they miss even in an empty pool."""
    return sum(share for share, wait in waits if wait <= 0)


def wait_tail(servers: int, load: float, waits: Waits, cv2: float = SERVICE_CV2) -> float:
    """Share of requests that wait longer than their budget (budgets in mean service times)."""
    return _wait_tail(servers, waits, cv2)(load)[0]


def _wait_tail(servers: int, waits: Waits, cv2: float) -> Callable[[float], tuple[float, float]]:
    """`wait_tail` and its derivative in the load, as a function of the load, what does not
    depend on it worked out once: each root of a pool curve evaluates it several times. With
    B the Erlang B blocking, dB/da = B·(n/a − 1 + B), and Erlang C = n·B/D, D = n − a·(1 − B)."""
    sure, stretch = sure_misses(waits), (1 + cv2) / 2
    queued_bins = [(share, wait / stretch) for share, wait in waits if wait > 0]
    n, exp = servers, math.exp

    def tail(load: float) -> tuple[float, float]:
        if load >= n:
            return 1.0, 0.0
        if load <= 0:
            return sure, 0.0
        blocking = 1.0  # Erlang B by its stable recursion
        for k in range(1, n + 1):
            carried_now = load * blocking
            blocking = carried_now / (k + carried_now)
        rest = n - load * (1 - blocking)
        waiting = n * blocking / rest
        blocking_slope = blocking * (n / load - 1 + blocking)
        rest_slope = blocking - 1 + load * blocking_slope
        waiting_slope = n * (blocking_slope * rest - blocking * rest_slope) / (rest * rest)
        queued = queued_slope = 0.0
        for share, wait in queued_bins:
            term = share * exp(-(n - load) * wait)
            queued += term
            queued_slope += term * wait
        return sure + waiting * queued, waiting_slope * queued + waiting * queued_slope

    return tail


@lru_cache(maxsize=65536)
def max_load(servers: int, waits: Waits, tail: float, cv2: float = SERVICE_CV2) -> float:
    """Largest offered load (in servers) that keeps the share of requests waiting past their
    budget at most `tail`; 0 if not even a trickle fits."""
    return _largest_load(servers, (waits, tail, cv2), servers / 2)


def max_load_between(servers: float, waits: Waits, tail: float) -> float:
    """`max_load` at a fractional number of servers: linear between the whole numbers either
    side (0 servers carry nothing)."""
    whole = math.floor(servers)
    low = max_load(whole, waits, tail) if whole >= 1 else 0.0
    if servers == whole:
        return low
    return low + (servers - whole) * (max_load(whole + 1, waits, tail) - low)


def _largest_load(servers: int, queue: tuple[Waits, float, float], start: float) -> float:
    """`max_load` from a guess (queue: waits, tail, cv²).

    Newton's method on log P(wait > W) − log tail, which rises with the load and is near linear
    in it, from the guess, kept within the bracket [0, n] that every evaluation narrows,
    bisecting where a step would leave it. The answer is the bracket's low end, where the tail
    is within budget, once the bracket, or a step from that end, is within 1e-10 of the load:
    on the medium benchmark instance's queues 2.7 evaluations of the tail from `pool_load`'s
    guesses and 5.0 from n/2, against 5.9 and 8.6 for the Illinois regula falsi on the
    brackets before, the same answers to 1.5e-10 (docs/benchmarks.md)."""
    waits, tail, cv2 = queue
    if servers <= 0 or sure_misses(waits) >= tail:
        return 0.0
    target = math.log(tail)
    chance_at = _wait_tail(servers, waits, cv2)
    low_end, high_end = 0.0, float(servers)  # at n everybody waits
    load = start if 0 < start < servers else servers / 2
    closing = False  # a step from the high end was within tolerance: try just below it
    for _ in range(200):
        chance, slope = chance_at(load)
        excess = math.log(chance) - target if chance > 0 else -math.inf
        if excess <= 0:
            low_end = load
        else:
            high_end = load
        tolerance = 1e-10 * high_end
        if high_end - low_end <= tolerance:
            break
        step = -excess * chance / slope if chance > 0 and slope > 0 else math.nan
        if abs(step) <= tolerance / 2:
            if excess <= 0:
                break  # within tolerance of the root, from the side within budget
            step = math.nan if closing else -tolerance / 2
            closing = True
        load = load + step
        if not low_end < load < high_end:
            load = (low_end + high_end) / 2
    return low_end


@lru_cache(maxsize=4096)
def _pool_loads(queue: tuple[Waits, float, float]) -> list[float]:
    """[f(0), f(1), …] for one queue, grown by `pool_load` and shared by the pool curves of
    every config with that queue (they differ in chunking and ceiling only)."""
    return [0.0]


def pool_load(servers: int, queue: tuple[Waits, float, float]) -> float:
    """f(n) = `max_load(n, *queue)`, computed after f(1), …, f(n − 1), each from the guess
    the last two give: f is convex, so f(n) ≥ 2f(n − 1) − f(n − 2), within a fraction of a
    server of the answer, which halves the evaluations Newton's method takes from n/2
    (docs/benchmarks.md)."""
    loads = _pool_loads(queue)
    while len(loads) <= servers:
        n = len(loads)
        guess = 2 * loads[-1] - loads[-2] if n >= 3 else 0.0
        loads.append(_largest_load(n, queue, guess))
    return loads[servers]


@dataclass(frozen=True)
class PoolCurve:
    """g(n) = min(n, f(n)/u): the load n replicas carry, in units of one replica's capacity at
    the utilisation ceiling u (so g(n) = n where queueing does not bite). Held as f/u's
    increments for n = 1..N, then a constant marginal, capped at n."""

    increments: tuple[float, ...]  # f(j)/u − f(j−1)/u, j = 1..N
    tail_rate: float  # added per replica beyond N (before the cap at n)

    @property
    def linear(self) -> bool:
        """True when g(n) = tail_rate·n exactly: no binaries needed."""
        return all(math.isclose(d, self.tail_rate, rel_tol=1e-12) for d in self.increments)

    @cached_property
    def heads(self) -> tuple[float, ...]:
        """f(n)/u for n = 0..N, summed once: `load` is asked for at every replica count the
        presolve's arithmetic tries."""
        return tuple(itertools.accumulate(self.increments, initial=0.0))

    def load(self, replicas: int) -> float:
        heads = self.heads
        if replicas < len(heads):
            return min(float(replicas), heads[replicas])
        line = heads[-1] + (replicas - len(self.increments)) * self.tail_rate
        return min(float(replicas), line)

    def replicas_at_least(self, load: float) -> float:
        """A concave h with h(0) = 0 and h(load) at most the replicas (fractional) any pool
        carrying `load` needs: the inverse of the line with every increment raised to the
        largest before it, a convex majorant of it (f, the least of the classes' own, need not
        be convex). The pooling hull rows (docs/formulation.md §2) rest on its concavity."""
        if load <= 0.0:
            return 0.0
        carried, replicas = 0.0, 0.0
        for step in itertools.accumulate(self.increments, max):
            if carried + step >= load:
                return replicas + (load - carried) / step
            carried, replicas = carried + step, replicas + 1.0
        tail = max(self.tail_rate, max(self.increments))
        return replicas + (load - carried) / tail


NO_QUEUEING = PoolCurve((1.0,), 1.0)


Target = tuple[Waits, float]
"""What one class holds in a shared queue: its wait budgets and the share that may miss them."""


@lru_cache(maxsize=16384)
def pool_curve(
    targets: tuple[Target, ...],
    ceiling: float,
    max_replicas: int | None = None,
    chunk_share: float = 0.0,
    longest: float = math.inf,
    cv2: float = SERVICE_CV2,
) -> PoolCurve:
    """g(n) = min(n, f(n)/u), expanded up to the smallest N from which the tail at the last
    marginal rate, min(n, f(N)/u + Δ_N·(n − N)), stays within LINEAR_WITHIN of g(n) for every n
    up to the expansion limit (MAX_EXPANSION, or the most replicas the program may use).

    f(n) is the least of the classes' own largest loads (`targets`): whatever the mix, the
    share of the pool's requests that miss is a mix of the classes' shares, each within its
    class's tail. `chunk_share` r > 0 and `longest` (colocated replicas, `carried`): f is the
    servers' Erlang load turned into the load of the capacity rows. Each class's f is convex,
    so the tail, at the least of the classes' marginal rates at N, lies below f/u for every n,
    beyond the limit too: it never overstates g (checked where computed). Once g meets the
    ceiling (g(n) = n from some n on) it is exact from there."""
    limit = max(1, min(MAX_EXPANSION, max_replicas) if max_replicas else MAX_EXPANSION)
    pooled = _pooled(targets, ceiling, chunk_share, longest, cv2)
    if pooled.at(1) >= 1:
        return NO_QUEUEING  # one replica already reaches the ceiling
    size = next(n for n in range(1, limit + 1) if _tail_within(pooled, n, limit))
    increments = tuple(pooled.at(j) - pooled.at(j - 1) for j in range(1, size + 1))
    return PoolCurve(increments, pooled.marginal(size))


def pooled_load(
    targets: tuple[Target, ...],
    replicas: int,
    ceiling: float,
    chunk_share: float = 0.0,
    longest: float = math.inf,
    cv2: float = SERVICE_CV2,
) -> float:
    """g(replicas) itself (`pool_curve`'s arguments), each class's f computed at that size on
    its own: the expansion's line lies up to LINEAR_WITHIN below g, and where to stop it turns
    on small differences in the budgets, so a re-check of a pool against the line of budgets a
    little other than the program's could refuse it by that 1% (verify)."""
    return _pooled(targets, ceiling, chunk_share, longest, cv2).at_limit(replicas)


def _pooled(
    targets: tuple[Target, ...], ceiling: float, chunk_share: float, longest: float, cv2: float
) -> _Pooled:
    kept = _strictest(tuple(dict.fromkeys(targets)))
    return _Pooled(tuple((w, t, cv2) for w, t in kept), ceiling, (chunk_share, longest))


def _strictest(targets: tuple[Target, ...]) -> tuple[Target, ...]:
    """The targets that bind: one that another is at least as strict as everywhere carries no
    less than that one at every n, so it never sets the least."""
    kept: list[Target] = []
    for i, target in enumerate(targets):
        if not any(
            _no_stricter(target, other) and (not _no_stricter(other, target) or j < i)
            for j, other in enumerate(targets)
            if j != i
        ):
            kept.append(target)
    return tuple(kept)


def _no_stricter(b: Target, a: Target) -> bool:
    """b allows at least a's share of misses, and every share of b's requests may wait at least
    as long as the same share of a's (their budgets compared at every bin end of either), so
    b's largest load is at least a's."""
    (waits_b, tail_b), (waits_a, tail_a) = b, a
    if tail_b < tail_a:
        return False
    ends_b, ends_a = _ends(waits_b), _ends(waits_a)
    return all(
        _budget_at(waits_b, ends_b, p) >= _budget_at(waits_a, ends_a, p)
        for p in sorted({*ends_b, *ends_a})
    )


def _ends(waits: Waits) -> list[float]:
    """Where each bin ends, in share of requests."""
    return list(itertools.accumulate(share for share, _ in waits))


def _budget_at(waits: Waits, ends: list[float], p: float) -> float:
    """The budget of the requests just below share p."""
    k = bisect.bisect_left(ends, p - 1e-9)
    return waits[min(k, len(waits) - 1)][1]


class _Pooled:
    """f(n)/u, computed as far as asked and no further than the first n where it reaches n."""

    def __init__(
        self,
        queues: tuple[tuple[Waits, float, float], ...],
        ceiling: float,
        chunks: tuple[float, float],
    ) -> None:
        """queues: (waits, tail share, service cv²) of each class, for `pool_load`."""
        self.queues, self.ceiling, self.chunks = queues, ceiling, chunks
        self.values: list[list[float]] = [[0.0] for _ in queues]
        self.far: dict[tuple[int, int], float] = {}

    def _of(self, k: int, n: int) -> float:
        """Class k's f(n)/u, or inf past the ceiling (where g(n) = n)."""
        values = self.values[k]
        while len(values) <= n:
            last = len(values) - 1
            if last and values[last] >= last:
                return math.inf
            busy = pool_load(last + 1, self.queues[k])
            values.append(carried(last + 1, busy, *self.chunks) / self.ceiling)
        return values[n]

    def _far(self, k: int, n: int) -> float:
        """Class k's f(n)/u on its own, without the values below it (inf past the ceiling)."""
        if self._known(k, n):
            return self._of(k, n)
        if (k, n) not in self.far:
            waits, tail, cv2 = self.queues[k]
            busy = max_load(n, waits, tail, cv2)
            value = carried(n, busy, *self.chunks) / self.ceiling
            self.far[k, n] = math.inf if value >= n else value
        return self.far[k, n]

    def _known(self, k: int, n: int) -> bool:
        values = self.values[k]
        last = len(values) - 1
        return n <= last or (last > 0 and values[last] >= last)

    def known(self, n: int) -> bool:
        """Every class's f(n)/u is at hand (computed, or past its ceiling)."""
        return all(self._known(k, n) for k in range(len(self.queues)))

    def above(self, n: int, limit: int) -> float:
        """An upper bound on g(n), n ≤ limit, that computes no value below n: each class's
        f(n)/u where known, else the chord from its last known value to its value at the
        limit: f/u is convex and, below n at both ends, below n in between, so g = f/u there
        and the chord lies above it (past the ceiling at the limit, n is the bound)."""
        bound = float(n)
        for k, values in enumerate(self.values):
            if self._known(k, n):
                bound = min(bound, self._of(k, n))
                continue
            last, end = len(values) - 1, self._far(k, limit)
            if math.isfinite(end):
                chord = values[last] + (end - values[last]) * (n - last) / (limit - last)
                bound = min(bound, chord)
        return bound

    def at_limit(self, limit: int) -> float:
        """g(limit), each class's value computed on its own."""
        return min(limit, *(self._far(k, limit) for k in range(len(self.queues))))

    def at(self, n: int) -> float:
        if len(self.queues) == 1:
            return self._of(0, n)
        return min(self._of(k, n) for k in range(len(self.queues)))

    def marginal(self, n: int) -> float:
        """The least of the classes' rises from n − 1 to n: a line at that rate from f(n)/u
        stays below every class's convex f/u beyond n."""
        rises = [self._of(k, n) - self._of(k, n - 1) for k in range(len(self.queues))]
        return min(r for r in rises if not math.isnan(r))


def carried(servers: int, busy: float, chunk_share: float, longest: float) -> float:
    """The prefill load y (in replicas' worth of R per mean step τ) that keeps n colocated
    replicas' prefill servers busy `busy` servers' worth; r = chunk_share = (R + C·a)/τ, the
    chunk's extra time over the mean step, and c = longest = the chunk step's budget over τ.

    A colocated replica whose mean step T̄ ≤ τ carries prompt compute P per second spends
    P·T̄ of each step on prompts, so its step without them is at most τ·(1 − P). A prompt in
    service gets R per step of at most τ·(1 − P) + R + C·a, and at most c·τ: a server's
    utilisation is at most ρ = min(y·(1 + r·(1 − y)), c·y) per replica at y = P·τ/R. Over n
    replicas sharing y·n, either bound within `busy` will do: the larger of the smaller root
    of busy = y_n·(1 + r·(1 − y_n/n)) and busy/c."""
    if chunk_share <= 0:
        return busy
    r, n = chunk_share, servers
    root = n * ((1 + r) - math.sqrt(max(0.0, (1 + r) ** 2 - 4 * r * busy / n))) / (2 * r)
    return max(root, busy / longest)


def _tail_within(pooled: _Pooled, size: int, limit: int) -> bool:
    """The line f(size)/u + Δ·(n − size), capped at n, is within LINEAR_WITHIN below g(n) for
    every n up to `limit`, and below f(n)/u wherever f is computed (convexity, checked). Once
    the line is within LINEAR_WITHIN of n and rises at least that fast, every later n passes.
    Where the line is that close to an upper bound on g(n) (`_Pooled.above`), g(n) itself is
    not computed: past the expansion, f is wanted only where the bound cannot decide."""
    start = pooled.at(size)
    rate = pooled.marginal(size)
    if size < limit and min(limit, start + rate * (limit - size)) < pooled.at_limit(limit) * (
        1 - LINEAR_WITHIN
    ):
        return False  # the line drifts furthest from g at the limit: the usual miss, found first
    for n in range(size + 1, limit + 1):
        line = start + rate * (n - size)
        if rate >= 1 - LINEAR_WITHIN and line >= n * (1 - LINEAR_WITHIN):
            return True
        if not pooled.known(n) and min(n, line) >= pooled.above(n, limit) * (1 - LINEAR_WITHIN):
            continue
        pool = pooled.at(n)
        if line > pool * (1 + 1e-12) or min(n, line) < min(n, pool) * (1 - LINEAR_WITHIN):
            return False
    return True
