"""Fit efficiency factors (compute, memory, step overhead; interconnect and MoE where the
observations can tell them apart) to observations on a grid.

Objective: median absolute log error plus a quarter of the largest, so one bad row cannot be
traded for many good ones and the median is not bought with a wild outlier. Search: the
attention walk and the host's ceiling where free (`FIRST`), then every point of the grid of the
three core factors (compute, memory, step overhead), then, from the best,
each free factor in turn takes the best value of its grid with the others held, until a whole
round moves none. Among equally good values the one nearest the start wins, which keeps a fit to
one or two benchmark files from wandering.

Which factors move is the caller's (`names`); by default the three core ones and those the
observations identify. The interconnect factor moves only for the observations of one GPU type,
some at tp > 1: one factor cannot serve two fabrics (and over NVLink the all-reduce is a small
share of a step, so the fit there is weak; on PCIe it is a large one). The MoE factors move only
where asked (`moe=True`) and the observations hold MoE rows. The small-batch factors
(per-layer overhead, decode attention's bandwidth share and walk, the host's time per sequence)
and (one GPU type, tp > 1) the all-reduce latency move only where closed-loop runs at a few
requests in flight tell them from the weight read; then the core grid takes the per-layer
overhead in place of the per-step one, and the search also moves the factors that trade
against each other in pairs (`PAIRS`).
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import ExitStack

from fleetopt.calibrate.observation import Observation, relative_error
from fleetopt.catalog import gpu_catalog, model_catalog
from fleetopt.instance import Efficiency
from fleetopt.perf.efficiency import factor
from fleetopt.perf.replica import allreduce_latency_s, tensor_cores
from fleetopt.workers import can_fork, default_jobs, shared, worker_pool

GRIDS: dict[str, list[float]] = {
    "compute": [0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8],
    "fp4_compute": [0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7],
    "memory": [0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9],
    "step_overhead_ms": [0.5, 1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 10.0, 12.0],
    "interconnect": [0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9],
    "allreduce_latency_us": [4.0, 6.0, 8.0, 10.0, 12.0, 15.0, 20.0, 25.0, 30.0, 40.0],
    "layer_overhead_us": [0.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 100.0, 120.0],
    "sequence_overhead_us": [10.0 * k for k in (0, 1, 2, 3, 4, 5, 6, 8, 10, 12, 15, 20, 30)],
    "attention_latency_ns": [0.0, 2.0, 4.0, 6.0, 8.0, 10.0, 12.0, 14.0, 16.0, 18.0, 20.0, 25.0],
    "attention_memory": [round(0.2 + 0.05 * i, 2) for i in range(15)],
    "moe": [0.5, 0.6, 0.7, 0.8, 0.9, 1.0],
    "moe_tp_loss": [0.0, 0.025, 0.05, 0.075, 0.1, 0.125, 0.15, 0.2],
}
CORE = ("compute", "memory", "step_overhead_ms")
PAIRS = (
    ("memory", "layer_overhead_us"),
    ("memory", "attention_memory"),
    ("compute", "memory"),
    ("layer_overhead_us", "allreduce_latency_us"),
    ("attention_memory", "attention_latency_ns"),
)
"""With the small-batch factors free, the fixed times and the bandwidth shares trade against
each other: a step moves along these pairs together, which one factor at a time cannot."""
FIRST = ("attention_latency_ns", "sequence_overhead_us")
"""Set on their own grid, the other factors at the start, before the core grid: the walk and the
host's ceiling shape the runs in ways the core's factors, moved first, mimic in part (more
per-layer time, a slower weight read) and the search then cannot undo one factor at a time."""
SMALL_BATCH = 8
"""Runs with at most this many requests in flight tell the per-layer overhead, decode
attention's bandwidth share and its walk from the weight read (at large batches they hide in
`memory`); beside them, runs at large batches tell the host's ceiling from the step."""
SMALL_BATCH_FACTORS = (
    "layer_overhead_us",
    "attention_memory",
    "attention_latency_ns",
    "sequence_overhead_us",
)
SCALE = {
    "step_overhead_ms": 10.0,
    "allreduce_latency_us": 10.0,
    "layer_overhead_us": 100.0,
    "sequence_overhead_us": 100.0,
    "attention_latency_ns": 20.0,
    "moe_tp_loss": 0.25,
}
"""How far a unit of each factor counts in the distance to the start (tie-breaks)."""


def score(observations: Sequence[Observation], efficiency: Efficiency) -> float:
    errs = [abs(math.log1p(max(relative_error(o, efficiency), -0.999))) for o in observations]
    return statistics.median(errs) + 0.25 * max(errs)


def free_factors(observations: Sequence[Observation], moe: bool = False) -> list[str]:
    """The factors these observations identify: the compute share of the formats they ran in
    (`compute` for BF16 and FP8 matmuls, `fp4_compute` for FP4 ones)."""
    models, gpus = model_catalog(), gpu_catalog()
    fp4 = [tensor_cores(gpus[o.gpu], o.weight_dtype) == "fp4" for o in observations]
    names = [n for n in CORE if n != "compute" or not all(fp4)]
    if any(fp4):
        names.append("fp4_compute")
    types = {o.gpu for o in observations}
    if len(types) == 1 and any(o.tensor_parallel > 1 for o in observations):
        names.append("interconnect")
    small = [o for o in observations if o.closed_loop and o.max_num_seqs <= SMALL_BATCH]
    if small:
        names += SMALL_BATCH_FACTORS
    if len(types) == 1 and any(o.tensor_parallel > 1 for o in small):
        names.append("allreduce_latency_us")
    if moe and any(models[o.model].num_experts is not None for o in observations):
        names += ["moe", "moe_tp_loss"]
    return names


def _start_value(start: Efficiency, name: str, observations: Sequence[Observation]) -> float:
    """A factor's value at the start; an unset all-reduce latency is the fabric's figure (one
    GPU type: `free_factors` frees it only then)."""
    if name == "allreduce_latency_us":
        return allreduce_latency_s(start, gpu_catalog()[observations[0].gpu]) * 1e6
    return factor(start, name)


def fit(
    observations: Sequence[Observation],
    start: Efficiency,
    names: Sequence[str] | None = None,
    jobs: int | None = None,
) -> Efficiency:
    """The best point found from `start`, moving only `names` (default: the core factors and
    those the observations identify, MoE excepted); ties go to the point nearest it. The
    points are scored `jobs` at a time (default: one per core), the answer the same."""
    if not observations:
        raise ValueError("no observations to fit")
    with _Scores(observations, jobs or default_jobs()) as scores:
        return _search(observations, start, names, scores)


def _search(
    observations: Sequence[Observation],
    start: Efficiency,
    names: Sequence[str] | None,
    scores: _Scores,
) -> Efficiency:
    names = list(free_factors(observations) if names is None else names)
    start = start.model_copy(update={n: _start_value(start, n, observations) for n in names})

    def key(eff: Efficiency) -> tuple[float, float]:
        distance = sum(abs(factor(eff, n) - factor(start, n)) / SCALE.get(n, 1.0) for n in names)
        return round(scores[eff], 4), distance

    core = [n for n in CORE if n in names]
    if "layer_overhead_us" in names and "step_overhead_ms" in core:
        core[core.index("step_overhead_ms")] = "layer_overhead_us"
    first = [n for n in FIRST if n in names]
    around = min(  # the terms the core's factors would otherwise mimic, set first
        scores.ready(
            start.model_copy(update=dict(zip(first, values, strict=True)))
            for values in itertools.product(*(GRIDS[n] for n in first))
        ),
        key=key,
    )
    tied = {"attention_memory": None} if "attention_memory" in names else {}
    candidates = (  # decode attention's share follows the memory share until the core is set
        around.model_copy(update=dict(zip(core, values, strict=True)) | tied)
        for values in itertools.product(*(GRIDS[n] for n in core))
    )
    best = min(scores.ready(candidates), key=key)
    best_key = key(best)
    pairs = [p for p in PAIRS if set(p) <= set(names)] if "layer_overhead_us" in names else []
    moves = [[{n: v} for v in GRIDS[n]] for n in names]
    moves += [[{a: x, b: y} for x in GRIDS[a] for y in GRIDS[b]] for a, b in pairs]
    moved = True
    while moved:
        moved = False
        for move in moves:
            # a move's updates all set the same factors, so a best found within the move
            # differs from the move's first only there: every candidate is known up front
            scores.ready(best.model_copy(update=update) for update in move)
            for update in move:
                candidate = best.model_copy(update=update)
                candidate_key = key(candidate)
                if candidate_key < best_key:
                    best, best_key, moved = candidate, candidate_key, True
    return best


class _Scores:
    """`score` of each point the search visits, each computed once (the search comes back to
    points it has scored: a move's own value, the last round's), those of a batch `jobs` at a
    time in forked workers: a point costs a prediction of every row, and the fit of
    benchmarks/fidelity.py's closed-loop engine took 460 s in one process (docs/benchmarks.md)."""

    def __init__(self, observations: Sequence[Observation], jobs: int) -> None:
        self.observations, self.jobs = list(observations), jobs
        self.known: dict[Efficiency, float] = {}
        self.pool: ProcessPoolExecutor | None = None
        self._closing = ExitStack()  # the pool, once started

    def __enter__(self) -> _Scores:
        return self

    def __exit__(self, *raised) -> None:
        self._closing.__exit__(*raised)

    def __getitem__(self, point: Efficiency) -> float:
        if point not in self.known:
            self.known[point] = score(self.observations, point)
        return self.known[point]

    def ready(self, points: Iterable[Efficiency]) -> list[Efficiency]:
        """The points, those not scored yet scored side by side where there are several."""
        points = list(points)
        new = [p for p in dict.fromkeys(points) if p not in self.known]
        if min(self.jobs, len(new)) > 1 and (self.pool is not None or can_fork()):
            if self.pool is None:
                pool = worker_pool(self.jobs, forked=True, shared=self.observations)
                self.pool = self._closing.enter_context(pool)
            chunk = max(1, len(new) // (4 * self.jobs))
            scored = self.pool.map(_shared_score, new, chunksize=chunk)
            self.known.update(zip(new, scored, strict=True))
        return points


def _shared_score(point: Efficiency) -> float:
    return score(shared(), point)
