"""The discrete-event loop: arrivals, replica step completions and KV transfers on one clock.

Arrivals are a sorted array merged with a heap of the other events (replica step ends,
transfer completions), so the heap holds about one entry per busy replica. The plan becomes
engines here: one `Replica` (token cost model) per pool, one engine per replica.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from heapq import heappop

import numpy as np

from fleetopt.catalog import Resolved
from fleetopt.configs import limits_of
from fleetopt.errors import InputError
from fleetopt.perf.curves import replica_for
from fleetopt.perf.replica import Replica
from fleetopt.plan import Plan, PoolPlan
from fleetopt.simulate.arrivals import Requests
from fleetopt.simulate.engine import (
    BatchReplica,
    Clock,
    Counters,
    Ledger,
    PrefillReplica,
    StepModel,
)
from fleetopt.simulate.router import NO_POOL, PoolChoice, assign_pools, least_loaded

WARMUP_SHARE = 0.1
"""Share of the requests, the first by arrival, left out of every figure (the system fills up)."""


@dataclass
class Outcome:
    """What happened to each request (NaN: refused) and what each replica did in the window."""

    requests: Requests
    choice: PoolChoice
    first_s: np.ndarray
    finish_s: np.ndarray
    refused: np.ndarray
    warmup: int
    window: tuple[float, float]
    """Measured interval: first measured arrival to last arrival (or the end, if that is empty)."""
    replicas: list[list[Counters]]
    """Per pool, per replica: counters over the window."""
    totals: list[list[Counters]]
    """Per pool, per replica: counters over the whole run."""


def pool_replicas(plan: Plan, resolved: Resolved) -> list[Replica]:
    """The cost model of each pool's replicas; measured pools have none and are refused."""
    replicas = []
    for index, pool in enumerate(plan.pools):
        where = f"pool {index} ({pool.model} {pool.role} on {pool.gpu} tp{pool.tensor_parallel})"
        if pool.measured or pool.step_ms is None:
            raise InputError(
                f"{where}: measured capacity (profiles) has no step-time model to simulate; "
                "simulate a plan of analytic pools"
            )
        if pool.model not in resolved.models or pool.gpu not in resolved.gpus:
            raise InputError(f"{where}: model or GPU type not in the instance")
        model, gpu = resolved.models[pool.model], resolved.gpus[pool.gpu]
        profiles = resolved.instance.profiles
        replicas.append(replica_for(model, gpu, pool.tensor_parallel, pool.role, profiles))
    return replicas


def simulate(
    plan: Plan,
    resolved: Resolved,
    requests: Requests,
    seed: int = 0,
    warmup_share: float = WARMUP_SHARE,
) -> Outcome:
    """Run the plan's fleet on the request stream until every request is served."""
    if not len(requests):
        raise InputError("no requests to simulate")
    perf = pool_replicas(plan, resolved)
    names = {w.name for w in plan.workloads}
    for name in requests.names:
        if name not in names:
            raise InputError(f"workload {name} is not in the plan")
    choice = assign_pools(plan, requests.names, requests.workload, np.random.default_rng([seed, 1]))
    kv = resolved.instance.serving.gpu_memory_utilization
    capacity = np.array([r.kv_capacity_tokens(kv) for r in perf])
    run = _Run(plan, perf, requests, choice, _refused(requests, choice, plan.pools, capacity))
    return run.go(resolved, int(len(requests) * warmup_share))


def _refused(
    requests: Requests, choice: PoolChoice, pools: list[PoolPlan], capacity: np.ndarray
) -> np.ndarray:
    """Requests that no replica of their pools could ever hold (a trace row longer than the
    planner's longest sequence): refused up front, so that no queue waits on them forever."""
    prompt, total = requests.input_tokens, requests.input_tokens + requests.output_tokens
    colocated = choice.decode == NO_POOL
    entry_holds = np.where(colocated, total, prompt) <= capacity[choice.entry]
    decode_holds = colocated | (total <= capacity[np.maximum(choice.decode, 0)])
    return ~(entry_holds & decode_holds)


class _Run:
    def __init__(
        self,
        plan: Plan,
        perf: list[Replica],
        requests: Requests,
        choice: PoolChoice,
        refused: np.ndarray,
    ) -> None:
        self.plan, self.perf, self.requests, self.choice, self.refused = (
            plan,
            perf,
            requests,
            choice,
            refused,
        )
        n = len(requests)
        prompt = requests.input_tokens
        per_token = np.zeros(n)
        transfer = np.zeros(n)
        for index, replica in enumerate(perf):
            mine = choice.entry == index
            if not mine.any():  # a decode pool (its measured curves may have no prefill)
                continue
            per_token[mine] = replica.prefill_s_per_token(prompt[mine].astype(float))
            for target in np.unique(choice.decode[mine & (choice.decode != NO_POOL)]):
                pair = mine & (choice.decode == target)
                transfer[pair] = np.maximum(
                    replica.kv_transfer_s(prompt[pair]), perf[target].kv_transfer_s(prompt[pair])
                )
        self.transfer = transfer.tolist()
        self.decode_pool = choice.decode.tolist()
        self.ledger = Ledger(
            input_tokens=prompt.tolist(),
            output_tokens=requests.output_tokens.tolist(),
            prefill_s_per_token=per_token.tolist(),
            prompt_left=prompt.tolist(),
            first_s=[math.nan] * n,
            finish_s=[math.nan] * n,
        )
        self.clock = Clock()

    def prefilled(self, now: float, rid: int) -> None:
        """A disaggregated prompt is done: its KV travels to the decode pool."""
        self.clock.at(now + self.transfer[rid], self.transferred, rid)

    def transferred(self, now: float, rid: int) -> None:
        """The KV has arrived: the first token is out; decode the rest."""
        ledger = self.ledger
        ledger.first_s[rid] = now
        if ledger.output_tokens[rid] == 1:
            ledger.finish_s[rid] = now
        else:
            least_loaded(self.pools[self.decode_pool[rid]]).arrive(now, rid)

    def build(self, resolved: Resolved) -> None:
        limits = limits_of(resolved)
        kv = limits.gpu_memory_utilization
        self.pools: list[list[BatchReplica | PrefillReplica]] = []
        for pool, replica in zip(self.plan.pools, self.perf, strict=True):
            model = StepModel.of(replica)
            # the compute each step gives prompts: at most the chunk's, as the planner plans it
            budget = replica.chunk_compute_s(pool.chunk_tokens or 0)
            if pool.role == "prefill":
                engines = [
                    PrefillReplica(model, budget, self.ledger, self.clock, self.prefilled)
                    for _ in range(pool.replicas)
                ]
            else:
                engines = [
                    BatchReplica(
                        model,
                        replica.kv_capacity_tokens(kv),
                        limits.max_num_seqs,
                        budget,
                        pool.role == "colocated",
                        self.ledger,
                        self.clock,
                    )
                    for _ in range(pool.replicas)
                ]
            self.pools.append(engines)

    def go(self, resolved: Resolved, warmup: int) -> Outcome:
        self.build(resolved)
        arrivals = self.requests.arrival_s.tolist()
        entry = [self.pools[p] if p != NO_POOL else [] for p in self.choice.entry.tolist()]
        refused = self.refused.tolist()
        heap = self.clock.heap
        count = len(arrivals)
        last = count - 1
        start = end = None
        i = 0
        while True:
            if i < count and (not heap or arrivals[i] <= heap[0][0]):
                now = arrivals[i]
                if i == warmup:
                    start = (now, self._snapshots(now))
                    self._reset_queue_max()
                if i == last and now > start[0]:
                    end = (now, self._snapshots(now))
                if not refused[i]:
                    least_loaded(entry[i]).arrive(now, i)
                i += 1
            elif heap:
                now, _, handler, arg = heappop(heap)
                handler(now, arg)
            else:
                break
        if end is None:  # one measured instant: measure to the end of the run instead
            now = max(start[0], float(np.nanmax(self.ledger.finish_s, initial=start[0])))
            end = (now, self._snapshots(now))
        return Outcome(
            self.requests,
            self.choice,
            np.array(self.ledger.first_s),
            np.array(self.ledger.finish_s),
            self.refused,
            warmup,
            (start[0], end[0]),
            [
                [_difference(a, b) for a, b in zip(s, e, strict=True)]
                for s, e in zip(start[1], end[1], strict=True)
            ],
            self._snapshots(now),
        )

    def _snapshots(self, now: float) -> list[list[Counters]]:
        return [[r.snapshot(now) for r in pool] for pool in self.pools]

    def _reset_queue_max(self) -> None:
        """The window's longest queue is counted from its start."""
        for pool in self.pools:
            for replica in pool:
                replica.queue_max = 0


def _difference(start: Counters, end: Counters) -> Counters:
    """The window's counters; its longest queue is the end's (the maximum restarts at the window)."""
    delta = {
        f.name: getattr(end, f.name) - getattr(start, f.name) for f in dataclasses.fields(Counters)
    }
    return Counters(**{**delta, "queue_max": end.queue_max})
