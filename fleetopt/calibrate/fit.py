"""Fit efficiency factors (compute, memory, step overhead) to observations by grid search.

Objective: median absolute log error plus a quarter of the largest, so one bad row cannot be
traded for many good ones and the median is not bought with a wild outlier. The interconnect
factor is not identified by NVLink rows at tp <= 8 (the all-reduce is a small share of a step)
and is kept at the starting value. Among equally good factors the one nearest the starting
factors wins, which keeps a fit to one or two benchmark files from wandering.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Sequence

from fleetopt.calibrate.observation import Observation, relative_error
from fleetopt.instance import Efficiency

COMPUTE_GRID = [0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8]
MEMORY_GRID = [0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9]
OVERHEAD_GRID_MS = [0.5, 1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 10.0, 12.0]


def score(observations: Sequence[Observation], efficiency: Efficiency) -> float:
    errs = [abs(math.log1p(max(relative_error(o, efficiency), -0.999))) for o in observations]
    return statistics.median(errs) + 0.25 * max(errs)


def fit(observations: Sequence[Observation], start: Efficiency) -> Efficiency:
    """The grid point with the best score; ties go to the point nearest `start`."""
    if not observations:
        raise ValueError("no observations to fit")
    best, best_key = start, (math.inf, math.inf)
    for compute, memory, overhead in itertools.product(COMPUTE_GRID, MEMORY_GRID, OVERHEAD_GRID_MS):
        eff = Efficiency(
            compute=compute,
            memory=memory,
            interconnect=start.interconnect,
            step_overhead_ms=overhead,
        )
        distance = (
            abs(compute - start.compute)
            + abs(memory - start.memory)
            + abs(overhead - start.step_overhead_ms) / 10
        )
        key = (round(score(observations, eff), 4), distance)
        if key < best_key:
            best, best_key = eff, key
    return best
