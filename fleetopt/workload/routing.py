"""Solve a data-given instance split into length buckets, beside the simple answers.

The program prices every split (it may share pools between buckets, so no per-bucket score
stands in for it). Answers, each a set of boundaries per data-given workload:

- one pool: no boundary, the whole mix one request class;
- best two-pool: each candidate boundary alone, the cheapest kept (per workload);
- optimised: from the cheaper of those two, add the candidate boundary that lowers the cost most,
  while it saves more than AUTO_GAIN (`buckets: auto`) or anything at all, up to N buckets
  (`buckets: N`).

The plan is the cheapest answer within `buckets`, so routing by length never costs more than
the simple answers; `length_routing` records the buckets, their tail lengths and every cost.
A time limit covers the whole search: each split is solved in what is left of it (at least
MIN_SECONDS), and once it is spent no further split is tried.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

from fleetopt.errors import InfeasibleError, Interrupted
from fleetopt.instance import Instance, TokenDistribution, Workload
from fleetopt.plan import Plan
from fleetopt.solve import SolveOptions
from fleetopt.workers import worker_pool
from fleetopt.workload.buckets import (
    Bucket,
    bucket_workload,
    buckets_between,
    candidates,
)
from fleetopt.workload.crossings import cost_crossings
from fleetopt.workload.derive import Sample, sample_of

AUTO_GAIN = 0.01
"""`buckets: auto` adds a boundary while it cuts the plan's cost by more than this share."""
MIN_SECONDS = 1.0
"""The least time limit a split is solved in once the search's own is nearly spent."""

Edges = dict[str, tuple[int, ...]]
"""Lower prompt-length edges of each data-given workload's buckets (the first is always 1)."""
Answer = tuple[Edges, Plan | None, InfeasibleError | None]


class Router:
    """The data-given workloads of an instance, and the program's price of each split."""

    def __init__(
        self,
        instance: Instance,
        options: SolveOptions,
        solve: Callable[[Instance, SolveOptions], Plan],
    ) -> None:
        self.instance, self.options, self.solve = instance, options, solve
        limit = options.time_limit
        self.deadline = None if limit is None else time.monotonic() + limit
        self.cut_short = False
        """A split was left untried because the time limit was spent."""
        self.interrupted = False
        """Ctrl-C stopped the search: its plan is the best found so far."""
        self.workloads = {w.name: w for w in instance.workloads if w.from_data}
        self.samples: dict[str, Sample] = {n: sample_of(w) for n, w in self.workloads.items()}
        self.candidates = {
            n: sorted(
                {*candidates(s), *cost_crossings(instance, self.workloads[n], s, options.jobs)}
            )
            for n, s in self.samples.items()
        }
        self.limit = {n: _limit(w, self.candidates[n]) for n, w in self.workloads.items()}
        self._answers: dict[tuple, Answer] = {}

    def answer(self, edges: Edges) -> Answer | None:
        """The split's answer, priced now where it is new, the time limit spent or not (the
        one pool must have one); None where Ctrl-C stopped the search before it."""
        key = _key(edges)
        if key not in self._answers and not self.interrupted:
            options = self._left()
            self._price(lambda: {key: _priced(self.solve, self.split(edges), options, edges)})
        return self._answers.get(key)

    def answers(self, splits: list[Edges]) -> list[Answer]:
        """The answers of a search step's splits, in order, as far as the search goes: once the
        time limit is spent or Ctrl-C has come, no further split is tried. The splits are
        independent solves: where several are new and `jobs` > 1 they run side by side, one
        worker process each (each plan the same as in this process), not one after another
        with the workers only enumerating (docs/benchmarks.md)."""
        new = {_key(edges): edges for edges in splits if _key(edges) not in self._answers}
        jobs = min(self.options.jobs, len(new))
        if jobs > 1 and not self.spent():
            self._price(lambda: self._in_parallel(new, jobs))
        tried = []
        for edges in splits:
            if _key(edges) not in self._answers and self.spent():
                break
            answer = self.answer(edges)
            if answer is None:
                break
            tried.append(answer)
        return tried

    def _price(self, pricing: Callable[[], dict[tuple, Answer]]) -> None:
        """Keep `pricing`'s answers. Ctrl-C, or a plan HiGHS handed back when it came, stops
        the search with the best plan so far (or the command, where there is none yet), as
        Ctrl-C stops a solve with its best plan so far: no further split is begun."""
        try:
            priced = pricing()
        except (KeyboardInterrupt, Interrupted):
            priced = {}
            self.interrupted = True
        self._answers.update(priced)
        self.interrupted |= any(plan.interrupted for _, plan, _ in priced.values() if plan)
        if self.interrupted and not any(plan for _, plan, _ in self._answers.values()):
            raise Interrupted("interrupted before any length split had a plan")

    def _in_parallel(self, new: dict[tuple, Edges], jobs: int) -> dict[tuple, Answer]:
        """`new`'s answers from `jobs` worker processes, each split solved in one process
        within what is left of the time limit now. Ctrl-C stops them all."""
        options = dataclasses.replace(self._left(), jobs=1)
        with worker_pool(jobs) as pool:
            running = {
                key: pool.submit(_priced, self.solve, self.split(edges), options, edges)
                for key, edges in new.items()
            }
            return {key: future.result() for key, future in running.items()}

    def _left(self) -> SolveOptions:
        """The options with what is left of the time limit, at least MIN_SECONDS."""
        if self.deadline is None:
            return self.options
        left = max(self.deadline - time.monotonic(), MIN_SECONDS)
        return dataclasses.replace(self.options, time_limit=left)

    def spent(self) -> bool:
        """No further split is tried: the time limit is spent (the record says so) or Ctrl-C
        has come."""
        if self.deadline is not None and time.monotonic() >= self.deadline:
            self.cut_short = True
        return self.cut_short or self.interrupted

    def split(self, edges: Edges) -> Instance:
        """The instance with each data-given workload replaced by its buckets."""
        workloads: list[Workload] = []
        for w in self.instance.workloads:
            if w.name not in edges:
                workloads.append(w)
                continue
            parts = buckets_between(w, self.samples[w.name], list(edges[w.name]))
            workloads += [bucket_workload(w, b, len(parts) == 1) for b in parts]
        return self.instance.model_copy(update={"workloads": workloads})

    def one_pool(self) -> Answer | None:
        """Priced first: Ctrl-C here leaves no plan, and stops the command."""
        return self.answer({n: (1,) for n in self.workloads})

    def best_two_pool(self) -> Answer | None:
        """Each workload at its cheapest single boundary (the others unsplit while it is tried)."""
        base = {n: (1,) for n in self.workloads}
        best = dict(base)
        for name, edges in self.candidates.items():
            tries = self.answers([{**base, name: (1, edge)} for edge in edges])
            if tries:
                best[name] = min(tries, key=score)[0][name]
        if best == base or (self.spent() and _key(best) not in self._answers):
            return None  # (several workloads' best boundaries together: a split not yet tried)
        return self.answer(best)

    def optimised(self, start: Answer) -> Answer:
        """Greedy: add the boundary that lowers the cost most while it pays (within limits)."""
        current = start
        while True:
            moves = [
                (name, {**current[0], name: tuple(sorted({*current[0][name], edge}))})
                for name, edges in self.candidates.items()
                for edge in edges
                if edge not in current[0][name] and len(current[0][name]) < self.limit[name]
            ]
            priced = self.answers([move for _, move in moves])
            tried = [(name, answer) for (name, _), answer in zip(moves, priced, strict=False)]
            if not tried:
                return current
            name, best = min(tried, key=lambda m: score(m[1]))
            gain = AUTO_GAIN if self.workloads[name].buckets in (None, "auto") else 0.0
            if not score(best) < score(current) - gain * abs(score(current)):
                return current
            current = best

    def within_limits(self, edges: Edges) -> bool:
        return all(len(e) <= self.limit[n] for n, e in edges.items())


def plan_length_routing(
    instance: Instance, options: SolveOptions, solve: Callable[[Instance, SolveOptions], Plan]
) -> Plan:
    """The cheapest plan over the answers within `buckets`, with `length_routing` filled in."""
    router = Router(instance, options, solve)
    answers = {"one_pool": router.one_pool()}
    two = router.best_two_pool()
    if two is not None:
        answers["best_two_pool"] = two
    start = answers["one_pool"]
    if two is not None and router.within_limits(two[0]) and score(two) < score(start):
        start = two
    answers["optimised"] = router.optimised(start)
    labels = ("one_pool", "best_two_pool", "optimised")  # in order: ties go to the simplest
    allowed = [k for k in labels if k in answers and router.within_limits(answers[k][0])]
    label = min(allowed, key=lambda k: (score(answers[k]), _count(answers[k][0])))
    edges, plan, error = answers[label]
    if plan is None and router.interrupted:
        raise Interrupted("interrupted before length routing found a plan")
    if plan is None:
        raise error
    plan.interrupted |= router.interrupted
    plan.length_routing = _record(router, edges, label, answers)
    return plan


def _priced(
    solve: Callable[[Instance, SolveOptions], Plan],
    instance: Instance,
    options: SolveOptions,
    edges: Edges,
) -> Answer:
    """A split's answer: its plan, or why there is none."""
    try:
        return edges, solve(instance, options), None
    except InfeasibleError as exc:
        return edges, None, exc


def cost(answer: Answer) -> float:
    return float("inf") if answer[1] is None else answer[1].cost_per_hour


def score(answer: Answer) -> float:
    """Lower is better: the cost, or with a throughput objective the demand served, negated."""
    plan = answer[1]
    if plan is None or plan.objective != "maximize throughput":
        return cost(answer)
    return -plan.demand_scale


def _limit(workload: Workload, edges: list[int]) -> int:
    """Most buckets: N, or with auto one per candidate boundary and one more."""
    return workload.buckets if isinstance(workload.buckets, int) else len(edges) + 1


def _key(edges: Edges) -> tuple:
    """A split as the key its answer is kept under."""
    return tuple(sorted(edges.items()))


def _count(edges: Edges) -> int:
    return sum(len(e) for e in edges.values())


def _record(router: Router, edges: Edges, label: str, answers: dict[str, Answer]) -> dict:
    """The plan's `length_routing` section (JSON names are public)."""

    def priced(key: str) -> float | None:
        return None if key not in answers or answers[key][1] is None else cost(answers[key])

    def boundaries(key: str) -> dict[str, list[int]] | None:
        return None if key not in answers else {n: list(e[1:]) for n, e in answers[key][0].items()}

    buckets = []
    for name, lows in edges.items():
        w = router.workloads[name]
        parts = buckets_between(w, router.samples[name], list(lows))
        buckets += [_bucket_row(w, b, len(parts) == 1) for b in parts]
    chosen = priced(label)
    return {
        "chosen": label,
        "boundaries": {n: list(e[1:]) for n, e in edges.items()},
        "candidate_boundaries": router.candidates,
        "buckets": buckets,
        "one_pool_cost_per_hour": priced("one_pool"),
        "best_two_pool_cost_per_hour": priced("best_two_pool"),
        "best_two_pool_boundaries": boundaries("best_two_pool"),
        "optimised_cost_per_hour": priced("optimised"),
        "optimised_boundaries": boundaries("optimised"),
        "time_limit_cut_short": router.cut_short,
        **{
            f"{key}_demand_scale": None
            if key not in answers or answers[key][1] is None
            else answers[key][1].demand_scale
            for key in ("one_pool", "best_two_pool", "optimised")
        },
        **{
            f"saving_vs_{key}_per_hour": None
            if priced(key) is None
            else round(priced(key) - chosen, 9)
            for key in ("one_pool", "best_two_pool")
        },
    }


def _bucket_row(workload: Workload, bucket: Bucket, alone: bool) -> dict:
    prompt = TokenDistribution(**bucket.input_tokens)
    percentile = 99.0 if bucket.percentile is None else bucket.percentile
    return {
        "name": bucket.name(alone),
        "source": bucket.source,
        "input_tokens_from": bucket.low,
        "input_tokens_to": None if bucket.high is None else bucket.high - 1,
        "requests_share": round(bucket.share, 9),
        "requests_per_s": workload.rate * bucket.share,
        "input_tokens": bucket.input_tokens,
        "output_tokens": bucket.output_tokens,
        "slo_percentile": bucket.percentile,
        "ttft_input_tokens": prompt.at_percentile(percentile),
        "ttft_length": tail_label(prompt, percentile),
    }


def tail_label(lengths: TokenDistribution, percentile: float) -> str:
    """Which stated length `at_percentile` uses: what sizes the bucket's TTFT."""
    for level, value in ((50, lengths.p50), (90, lengths.p90), (99, lengths.p99)):
        if value is not None and level >= percentile:
            return f"p{level}"
    return "max" if lengths.max is not None else "mean"
