"""Synthetic request streams: Poisson or bursty (gamma) arrivals per class, lengths per class.

Each class arrives independently at the rate the plan serves it (demand_scale × its stated
rate, i.e. the plan's `requests_per_s`); the streams are merged by time and cut at the
requested count.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fleetopt.errors import InputError
from fleetopt.instance import Workload
from fleetopt.workload.lengths import sampler_for


@dataclass(frozen=True)
class Requests:
    """A request stream sorted by arrival; `workload` indexes `names`."""

    names: list[str]
    arrival_s: np.ndarray
    input_tokens: np.ndarray
    output_tokens: np.ndarray
    workload: np.ndarray
    source: str
    """How the stream was made, in words (for the report)."""

    def __len__(self) -> int:
        return len(self.arrival_s)

    def head(self, n: int) -> Requests:
        return Requests(
            self.names,
            self.arrival_s[:n],
            self.input_tokens[:n],
            self.output_tokens[:n],
            self.workload[:n],
            self.source,
        )


def synthetic_requests(
    workloads: list[Workload],
    rates: list[float],
    n: int,
    seed: int,
    cv: float = 1.0,
) -> Requests:
    """n requests; inter-arrival times are gamma with coefficient of variation `cv` (1 = Poisson).

    Every class's stream covers the same horizon, long enough that the merged stream holds n
    requests, so cutting it at the n-th keeps each class's arrival process intact."""
    total = sum(rates)
    if total <= 0:
        raise InputError("the plan routes no requests: nothing to simulate")
    rng = np.random.default_rng(seed)
    shape = 1.0 / cv**2
    horizon = 1.2 * n / total
    while True:
        streams = [
            (i, _arrivals_until(rng, rate, shape, horizon))
            for i, rate in enumerate(rates)
            if rate > 0
        ]
        if sum(len(times) for _, times in streams) >= n:
            break
        horizon *= 2
    parts = [
        (
            times,
            sampler_for(workloads[i].input).sample(rng, len(times)),
            sampler_for(workloads[i].output).sample(rng, len(times)),
            np.full(len(times), i, dtype=np.int64),
        )
        for i, times in streams
    ]
    arrival, inputs, outputs, which = (np.concatenate(p) for p in zip(*parts, strict=True))
    order = np.argsort(arrival, kind="stable")[:n]
    kind = "Poisson" if cv == 1.0 else f"gamma inter-arrivals, cv {cv:g}"
    return Requests(
        [w.name for w in workloads],
        arrival[order],
        inputs[order],
        outputs[order],
        which[order],
        f"{kind} at the plan's rates, seed {seed}",
    )


def _arrivals_until(
    rng: np.random.Generator, rate: float, shape: float, horizon: float
) -> np.ndarray:
    """Arrival times of one renewal process in [0, horizon]."""
    chunk = max(16, int(rate * horizon * 1.1) + 16)
    times = np.cumsum(rng.gamma(shape, 1.0 / (rate * shape), chunk))
    while times[-1] < horizon:
        more = np.cumsum(rng.gamma(shape, 1.0 / (rate * shape), chunk)) + times[-1]
        times = np.concatenate([times, more])
    return times[times <= horizon]
