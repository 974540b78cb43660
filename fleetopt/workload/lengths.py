"""Token lengths that match a class's stated mean and percentiles: the simulator samples them,
and the planner reads their spread (`LengthSampler.cv2`, the prefill queue's service variability).

A class states its lengths as a mean, or as {mean, p50, p90, p99, max}. The sampler is a
piecewise quantile function through the stated points — (0, min or 1 token), (0.5, p50), (0.9, p90),
(0.99, p99), (1, longest) — where `longest` is `max`, else the highest percentile given, so a
sample never exceeds what the planner checked against the KV cache. Between two knots the
quantile rises as v_i + (v_{i+1} − v_i)·s^γ (s the position inside the segment, 0..1). One
curvature γ, shared by every segment, is set by bisection so that the distribution's mean is
the stated mean: γ = 1 is linear interpolation, γ > 1 puts the mass low in each segment (a
long thin tail), γ < 1 high. Each segment then has mean v_i + (v_{i+1} − v_i)/(γ + 1), so the
reachable means run from Σ Δq·v_i to Σ Δq·v_{i+1}; a mean outside that range (percentiles and
mean that contradict each other) gets the nearest reachable one.

A plain mean (no percentiles) gives every request exactly that length, as the planner assumes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from fleetopt.instance import TokenDistribution

GAMMA_RANGE = (1 / 64, 64.0)
"""Curvatures the bisection may pick; the ends stand for 'mean unreachable, take the nearest'."""


@dataclass(frozen=True)
class LengthSampler:
    """A piecewise quantile function: knots (q_i, v_i) and the shared curvature γ."""

    quantiles: np.ndarray
    values: np.ndarray
    gamma: float

    @property
    def mean(self) -> float:
        return self.moment(1)

    @property
    def cv2(self) -> float:
        """Squared coefficient of variation."""
        if len(self.values) == 1:
            return 0.0
        return self.moment(2) / self.mean**2 - 1

    def moment(self, order: int) -> float:
        """E[L^order], exactly (`_moment`)."""
        return _moment(self.quantiles, self.values, self.gamma, order)

    def moments(self) -> tuple[float, float, float, float]:
        """E[L], E[L²], E[L³], E[L⁴]: a prompt's compute is quadratic in its length, so its
        spread needs the fourth (`RequestShape.service_cv2`)."""
        return tuple(self.moment(order) for order in range(1, 5))

    def quantile(self, p):
        """Length at probability p (a number or an array, 0..1): what `sample` draws from."""
        q, v = self.quantiles, self.values
        if len(v) == 1:
            return float(v[0]) if np.ndim(p) == 0 else np.full(np.shape(p), float(v[0]))
        i = np.clip(np.searchsorted(q, p, side="right") - 1, 0, len(q) - 2)
        s = (p - q[i]) / (q[i + 1] - q[i])
        lengths = v[i] + (v[i + 1] - v[i]) * s**self.gamma
        return float(lengths) if np.ndim(lengths) == 0 else lengths

    def shares(self, count: int = 16) -> tuple[tuple[float, float], ...]:
        """The lengths as `count` equal shares of requests, each at its middle quantile (empty
        for a single length)."""
        if len(self.values) == 1:
            return ()
        middles = self.quantile((np.arange(count) + 0.5) / count)
        return tuple((1 / count, float(length)) for length in middles)

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """n integer lengths (≥ 1 token)."""
        if len(self.values) == 1:
            return np.full(n, max(1, round(float(self.values[0]))), dtype=np.int64)
        return np.maximum(1, np.rint(self.quantile(rng.random(n)))).astype(np.int64)


TAIL_GRID = (50, 20, 10, 5, 2, 1, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1, 0.05, 0.01, 0)
"""Where the prompt-length bins of the TTFT queue end, in shares of requests above the bin's
end, in units of the SLO's miss share: coarse where a miss needs a long wait, fine above the
percentile, where prompts may miss with no wait at all and every tenth of the miss share
counts."""


def tail_bins(
    dist: TokenDistribution, percentile: float, sampler: LengthSampler | None = None
) -> tuple[tuple[float, float], ...]:
    """Prompt lengths by share of requests, for the TTFT queue: (upper probability p, length at
    p) for each bin of TAIL_GRID, every request of a bin counted at the bin's longest length.
    At and below the percentile, lengths never exceed the length the latency checks use there
    (`at_percentile`), above it never fall below it: the longest 1 − percentile of prompts
    count at their own lengths, up to the longest stated. `sampler`: dist's, where the caller
    has fitted it already."""
    sampler, tail = sampler or sampler_for(dist), dist.at_percentile(percentile)
    miss = 1 - percentile / 100
    bins = []
    for above in TAIL_GRID:
        if miss * above >= 1:
            continue
        p = round(1 - miss * above, 12)
        length = sampler.quantile(p)
        length = min(length, tail) if above >= 1 else max(length, tail)
        if bins and bins[-1][1] == length:  # one bin where the lengths are alike (a plain mean)
            bins.pop()
        bins.append((p, length))
    return tuple(bins)


def sampler_for(dist: TokenDistribution) -> LengthSampler:
    given = [(q, v) for q, v in ((0.5, dist.p50), (0.9, dist.p90), (0.99, dist.p99)) if v]
    if not given and dist.max is None:
        return LengthSampler(np.array([1.0]), np.array([dist.mean]), 1.0)
    knots = [(0.0, dist.min or min(1.0, dist.mean)), *given, (1.0, dist.longest)]
    q = np.array([k[0] for k in knots])
    v = np.array([k[1] for k in knots])
    return LengthSampler(q, v, _fit_gamma(q, v, dist.mean))


def _moment(q: np.ndarray, v: np.ndarray, gamma: float, order: int) -> float:
    """E[L^order] of the quantile function: a segment's length v + Δ·s^γ (s uniform) has
    E[(v + Δ·s^γ)^n] = Σ_j C(n, j)·v^(n−j)·Δ^j/(jγ + 1)."""
    if len(v) == 1:
        return float(v[0]) ** order
    low, rise = v[:-1], np.diff(v)
    terms = (
        math.comb(order, j) * low ** (order - j) * rise**j / (j * gamma + 1)
        for j in range(order + 1)
    )
    return float(np.sum(np.diff(q) * sum(terms)))


def _fit_gamma(q: np.ndarray, v: np.ndarray, mean: float) -> float:
    """Bisection on log γ: the mean falls as γ grows."""
    lo, hi = np.log(GAMMA_RANGE[0]), np.log(GAMMA_RANGE[1])
    for _ in range(60):
        mid = (lo + hi) / 2
        if _moment(q, v, float(np.exp(mid)), 1) > mean:
            lo = mid
        else:
            hi = mid
    return float(np.exp((lo + hi) / 2))
