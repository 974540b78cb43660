"""Prompt-length buckets of a data-given length mix: candidate boundaries, the buckets between
them, and each bucket as an ordinary request class with its own tail lengths and percentile.

Candidate boundaries sit at the median, p90 and p99 of the prompt length — the body, the tail
and the far tail, where long prompts are few but cost most — and where the cheapest GPU type
changes with the prompt length (crossings.py). routing.py lets the program price the splits.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import pairwise

import numpy as np

from fleetopt.instance import TokenDistribution, Workload
from fleetopt.workload.derive import Sample, distribution

QUANTILES = (0.5, 0.9, 0.99)
"""Where candidate boundaries sit, as shares of the requests below them."""
LOWER_MISS_FACTOR = 0.1
"""A bucket below the top one may miss its targets at this share of the SLO's miss rate
(99.9% for a p99 SLO); the rest of the workload's miss budget goes to the top bucket."""


@dataclass(frozen=True)
class Bucket:
    """The requests of one source workload with prompts in [low, high) tokens."""

    source: str
    low: int
    high: int | None
    """First prompt length above the bucket; None: no upper bound (the top bucket)."""
    share: float
    """Share of the source's requests."""
    input_tokens: dict[str, float]
    output_tokens: dict[str, float]
    percentile: float | None
    """Share of the bucket's requests, in percent, held to the source's targets (None: no SLO)."""

    def name(self, alone: bool) -> str:
        if alone:
            return self.source
        top = f"-{self.high - 1}" if self.high is not None else "+"
        return f"{self.source}:{self.low}{top}"


def buckets_between(workload: Workload, sample: Sample, edges: list[int]) -> list[Bucket]:
    """The buckets between consecutive boundaries (the first edge 1, the last open)."""
    return [bucket(workload, sample, low, high) for low, high in pairwise([*edges, None])]


def bucket(workload: Workload, sample: Sample, low: int, high: int | None) -> Bucket:
    """The sample's requests with prompts in [low, high)."""
    mask = sample.input_tokens >= low
    if high is not None:
        mask &= sample.input_tokens < high
    part = sample.where(mask)
    share = float(sample.weight[mask].sum())
    return Bucket(
        workload.name,
        low,
        high,
        share,
        distribution(part.input_tokens, part.weight),
        distribution(part.output_tokens, part.weight),
        None if workload.slo is None else bucket_percentile(workload.slo.percentile, share, high),
    )


def bucket_percentile(percentile: float, share: float, high: int | None) -> float:
    """The percentile a bucket is held to, so that the workload as a whole meets its own: a
    lower bucket misses at a tenth of the allowed rate, and the top bucket (the longest
    prompts, the costliest to serve fast) takes the rest of the miss budget, never less than
    the median. One bucket (share 1) keeps the workload's percentile."""
    allowed = 100 - percentile
    lower = 100 - allowed * LOWER_MISS_FACTOR
    if high is not None:
        return lower
    top = 100 - (allowed - (1 - share) * (100 - lower)) / share
    return min(percentile, max(50.0, top))


def bucket_workload(workload: Workload, bucket: Bucket, alone: bool) -> Workload:
    """The bucket as an ordinary request class: its own length distribution, rate share and
    percentile."""
    slo = workload.slo
    return Workload(
        name=bucket.name(alone),
        model=workload.model,
        requests_per_s=workload.rate * bucket.share,
        input_tokens=TokenDistribution(**bucket.input_tokens),
        output_tokens=TokenDistribution(**bucket.output_tokens),
        slo=None if slo is None else slo.model_copy(update={"percentile": bucket.percentile}),
    )


def candidates(sample: Sample) -> list[int]:
    """Candidate boundaries: just above the prompt length at each quantile, where it splits."""
    order = np.argsort(sample.input_tokens, kind="stable")
    ordered, cumulative = sample.input_tokens[order], np.cumsum(sample.weight[order])
    found = set()
    for q in QUANTILES:
        index = min(int(np.searchsorted(cumulative, q * (1 - 1e-12))), len(ordered) - 1)
        edge = math.floor(ordered[index]) + 1
        if ordered[0] < edge <= ordered[-1]:
            found.add(edge)
    return sorted(found)
