"""Enumerate the configs — (model, GPU type, tp, role, operating point) — and their coefficients.

Plain numbers only: the formulation turns them into constraints, `verify` re-derives them from
the perf functions. A config that cannot carry a class (memory, TTFT, TPOT) gets no routing
variable for it, and the reason is kept for the infeasibility explanation.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from itertools import pairwise, repeat

import numpy as np

from fleetopt.catalog import Gpu, Model, Resolved
from fleetopt.instance import Instance, Profile, Workload
from fleetopt.perf.curves import replica_for, replica_limits, uncovered
from fleetopt.perf.operating_point import (
    BATCH,
    KV,
    PROFILE,
    Blocker,
    Limits,
    OperatingPoint,
    RequestShape,
    admission_headroom,
    batch_slots,
    capacity,
    capacity_gap,
    ineligibility,
    latency,
    latency_bound,
    max_rate,
    queue_curve,
    unqueued_misses,
    usage,
    wait_budget_s,
    weights_blocker,
    with_latency_margins,
)
from fleetopt.perf.profiles import profile_rate
from fleetopt.perf.queueing import NO_QUEUEING, PoolCurve
from fleetopt.perf.replica import Replica
from fleetopt.perf.throughput import candidate_points
from fleetopt.workers import can_fork, worker_pool
from fleetopt.workload.lengths import sampler_for, tail_bins

ROLES_BY_MODE = {"colocated": ("colocated",), "disaggregated": ("prefill", "decode")}


def _roles(resolved: Resolved) -> list[str]:
    """The replica roles the instance's serving modes allow."""
    return [r for mode in resolved.instance.serving.modes for r in ROLES_BY_MODE[mode]]


@dataclass(frozen=True)
class RequestClass:
    name: str
    model: str
    requests_per_s: float
    shape: RequestShape
    percentile: float

    @property
    def prefill_tokens_per_s(self) -> float:
        return self.requests_per_s * self.shape.input_mean

    @property
    def decode_tokens_per_s(self) -> float:
        return self.requests_per_s * self.shape.output_mean


def request_class(workload: Workload) -> RequestClass:
    slo = workload.slo
    percentile = slo.percentile if slo else 99.0
    inputs, outputs = sampler_for(workload.input), sampler_for(workload.output)
    spread = inputs.cv2
    shape = RequestShape(
        input_mean=workload.input.mean,
        output_mean=workload.output.mean,
        input_tail=workload.input.at_percentile(percentile),
        output_tail=workload.output.at_percentile(percentile),
        ttft_s=slo.ttft_ms / 1e3 if slo and slo.ttft_ms else None,
        tpot_s=slo.tpot_ms / 1e3 if slo and slo.tpot_ms and _decodes(workload) else None,
        miss_share=1 - percentile / 100,
        output_shortest=workload.output.shortest,
        input_longest=workload.input.longest,
        output_longest=workload.output.longest,
        input_moments=inputs.moments() if spread else (),
        output_moments=outputs.moments() if outputs.cv2 else (),
        input_cv2=spread,
        output_cv2=outputs.cv2,
        output_steps=outputs.shares(),
        input_bins=tail_bins(workload.input, percentile, inputs),
    )
    return RequestClass(workload.name, workload.model, workload.rate, shape, percentile)


def _decodes(workload: Workload) -> bool:
    """Some request has a token after its first: a TPOT has gaps to hold. Where every output
    is one token, the first token ends each request and a TPOT target binds nothing."""
    return workload.output.longest > 1


@dataclass
class Config:
    """One column family of the program: replicas of one kind, and what each class uses of them."""

    model: str
    gpu: str
    tp: int
    op: OperatingPoint
    capacity: dict[str, float]
    usage: dict[str, dict[str, float]] = field(default_factory=dict)  # class -> resource -> use
    ttft_s: dict[str, float | None] = field(default_factory=dict)
    tpot_s: dict[str, float | None] = field(default_factory=dict)
    measured: bool = False
    queue: PoolCurve = NO_QUEUEING
    """Prefill load x replicas carry, in replicas at the utilisation ceiling (perf/queueing.py)."""
    wait_budget_s: float | None = None
    """The smallest wait budget among the classes it may carry (None: no TTFT to hold)."""
    unqueued_misses: dict[str, float] = field(default_factory=dict)
    """Share of a class's requests that miss its TTFT here however idle the pool (classes with
    any): they spend its miss share before queueing does (`operating_point.unqueued_misses`)."""
    walk_tokens: float = 0.0
    """The context level: the longest context its steps walk (0: attention splits contexts;
    `walk_levels`)."""
    slot_tier: int | None = None
    """The fewest batch slots among its members where the point's classes that leave fewer
    are left out (`slot_tiers`); None: every class the point may carry at its level."""
    min_replicas: int = 1
    """The fewest replicas its pool may have where its admission headroom is sized for a pool
    of that many (`pooled_variants`); 1: one replica's own slots."""

    @property
    def role(self) -> str:
        return self.op.role

    @property
    def key(self) -> str:
        point = (
            "measured"
            if self.measured
            else f"step{self.op.step_s * 1e3:.2f}ms-chunk{self.op.chunk_tokens}"
        )
        if self.op.longest_step_s is not None:
            point += f"-longest{self.op.longest_step_s * 1e3:.2f}ms"
        queue = "" if self.wait_budget_s is None else f"-wait{self.wait_budget_s * 1e3:.0f}ms"
        walk = f"-ctx{self.walk_tokens:.0f}" if self.walk_tokens else ""
        tier = "" if self.slot_tier is None else f"-slots{self.slot_tier}"
        pool = "" if self.min_replicas == 1 else f"-pool{self.min_replicas}"
        return f"{self.model}/{self.gpu}/tp{self.tp}/{self.role}/{point}{queue}{walk}{tier}{pool}"


@dataclass
class Rejection:
    """Why a config may not carry a class."""

    config: str
    kind: str  # tensor_parallel | weights | memory | ttft | tpot | profile
    reason: str
    miss: float = math.inf
    """How far off, a ratio above 1 (`Blocker.miss`)."""
    roomless: bool = False
    """The point has no room at all (its step budget is below the shortest step it could
    take): telling only where no point of the replica has room (`_where_no_room`)."""


@dataclass
class ConfigSet:
    classes: list[RequestClass]
    configs: list[Config]
    rejections: dict[str, list[Rejection]]  # class -> why configs may not carry it


def limits_of(resolved: Resolved) -> Limits:
    s = resolved.instance.serving
    return Limits(s.max_prefill_utilization, s.max_num_seqs, s.gpu_memory_utilization)


def valid_tensor_parallel(model: Model, gpu: Gpu, tp: int) -> str | None:
    """Why this tp cannot shard the model on this GPU, or None."""
    if tp > gpu.spec.max_tensor_parallel:
        return f"tp{tp} exceeds the {gpu.spec.max_tensor_parallel}-GPU scale-up domain"
    if model.spec.q_heads % tp:
        return f"{model.spec.q_heads} attention heads do not split over tp{tp}"
    return None


PARALLEL_FROM = 400
"""(class, GPU type, tp, role) combinations from which enumeration may run in worker processes:
each costs ~3–5 ms, so fewer (under ~1.5 s of work) do not repay the workers' ~0.4 s start and
the queueing memo each fills again on its own (docs/benchmarks.md)."""
FORKED_FROM = 16
"""The same where the workers fork from this process (`workers.can_fork`): they start in ~12 ms,
which a part or two of work repays (docs/benchmarks.md)."""


def enumerate_configs(
    resolved: Resolved, jobs: int = 1, meanwhile: Callable[[], object] = lambda: None
) -> ConfigSet:
    """Every config of the instance, dominated ones dropped, and why each class may not use the
    others. With `jobs` > 1 and FORKED_FROM (forked workers) or PARALLEL_FROM combinations or
    more, the parts (a model on a GPU type at one tp) are enumerated `jobs` at a time, one
    worker process each (fleetopt/workers.py): the same configs in the same order either way.
    `meanwhile` runs in this process while the workers enumerate (after the parts without
    them): `fleetopt solve` imports Pyomo and HiGHS then."""
    instance = resolved.instance
    classes = [request_class(w) for w in instance.workloads]
    parts = [
        (name, mine, gpu, tp)
        for name in resolved.models
        if (mine := [c for c in classes if c.model == name])
        for gpu in resolved.gpus
        for tp in _tensor_parallel(instance, name, gpu)
    ]
    combinations = (
        len(classes)
        * len(resolved.gpus)
        * len(instance.serving.tensor_parallel)
        * len(_roles(resolved))
    )
    forked = can_fork()
    jobs = (
        min(jobs, len(parts)) if combinations >= (FORKED_FROM if forked else PARALLEL_FROM) else 1
    )
    if jobs > 1:
        with worker_pool(jobs, forked=forked) as pool:
            running = pool.map(_part_configs, repeat(resolved), *zip(*parts, strict=True))
            meanwhile()
            found = list(running)
    else:
        found = [_part_configs(resolved, *part) for part in parts]
        meanwhile()
    configs: list[Config] = []
    rejections: dict[str, list[Rejection]] = {c.name: [] for c in classes}
    for part, rejected in found:
        configs += part
        for name, reasons in rejected.items():
            rejections[name] += reasons
    return ConfigSet(classes, drop_dominated(configs), rejections)


def _tensor_parallel(instance: Instance, model_name: str, gpu_name: str) -> list[int]:
    """The tp sizes of a model on a GPU type: those served, and those a profile measures."""
    profiled = {
        p.tensor_parallel for p in instance.profiles if (p.model, p.gpu) == (model_name, gpu_name)
    }
    return sorted(set(instance.serving.tensor_parallel) | profiled)


def _part_configs(
    resolved: Resolved, model_name: str, mine: list[RequestClass], gpu_name: str, tp: int
) -> tuple[list[Config], dict[str, list[Rejection]]]:
    """One model's configs on one GPU type at one tp, every role, and why its classes may not
    use the others there."""
    instance = resolved.instance
    model = resolved.models[model_name]
    gpu = resolved.gpus[gpu_name]
    limits = limits_of(resolved)
    profiles = {(p.model, p.gpu, p.tensor_parallel, p.role): p for p in instance.profiles}
    configs: list[Config] = []
    rejections: dict[str, list[Rejection]] = {c.name: [] for c in mine}
    roles = _roles(resolved)
    if "prefill" in roles:
        floor = _slowest_decode_network(model, resolved, limits)
        mine = [replace(c, shape=replace(c.shape, decode_network_bytes_per_s=floor)) for c in mine]
    for role in roles:
        profile = profiles.get((model_name, gpu_name, tp, role))
        if profile is not None and profile.table is not None:
            configs.append(_measured_config(model_name, gpu_name, profile, mine, rejections))
            continue
        if profile is None and tp not in instance.serving.tensor_parallel:
            continue
        where = f"{model_name} on {gpu_name} tp{tp} {role}"
        kind, problem = "tensor_parallel", valid_tensor_parallel(model, gpu, tp)
        replica = replica_for(model, gpu, tp, role, instance.profiles)
        if problem is None and (blocker := weights_blocker(replica, limits)):
            kind, problem = blocker.kind, blocker.message
        if problem is not None:
            for c in mine:
                rejections[c.name].append(Rejection(where, kind, problem))
            continue
        here, covered = replica_limits(replica, limits), []
        for c in mine:
            reason = uncovered(replica, c.shape, role)
            if reason is None:
                covered.append(c)
            else:
                rejections[c.name].append(Rejection(where, "profile", reason))
        start, found = {name: len(rows) for name, rows in rejections.items()}, len(configs)
        for walker, members in walk_levels(replica, role, covered):
            for op in operating_points(walker, role, members, instance.serving.chunk_tokens, here):
                configs += _analytic_configs(walker, op, members, here, rejections)
        carried = {name for config in configs[found:] for name in config.usage}
        _where_no_room(rejections, start, carried)
    return configs, rejections


def _where_no_room(
    rejections: dict[str, list[Rejection]], start: dict[str, int], carried: set[str]
) -> None:
    """Drop a class's roomless points (rejections from `start` on) where another point of the
    replica had room for it: there the step budgets the grid offers below what it needs
    (shorter steps, for the TTFT) say nothing of what binds, which its configs or the other
    points' reasons tell."""
    for name, rows in rejections.items():
        new = rows[start[name] :]
        if name in carried or any(not r.roomless for r in new):
            rows[start[name] :] = [r for r in new if not r.roomless]


WALK_GRID = 1.25
"""Classes' longest contexts are rounded up to powers of 1.25 tokens before they become context
levels: conservative (a step walks a context a little longer than the class's), and classes of
nearby lengths share a level."""


def walk_levels(
    replica: Replica, role: str, classes: list[RequestClass]
) -> list[tuple[Replica, list[RequestClass]]]:
    """The replica at each context level its classes need, with the classes it may carry
    there. Where decode attention walks each sequence's context alone, every step lasts at
    least the longest walk in its batch, so a config at level W carries the classes whose
    long sequences (`RequestShape.walk_tokens`) reach at most W tokens; elsewhere (split-KV
    attention, prefill pools) one level, the replica as it is."""
    if role == "prefill" or replica.walk_s_per_token == 0 or not classes:
        return [(replica, classes)]
    level = {
        c.name: WALK_GRID ** math.ceil(math.log(c.shape.walk_tokens, WALK_GRID) - 1e-9)
        for c in classes
    }
    return [
        (replica.at_walk(w), [c for c in classes if level[c.name] <= w])
        for w in sorted(set(level.values()))
    ]


def _slowest_decode_network(model: Model, resolved: Resolved, limits: Limits) -> float | None:
    """Scale-out bandwidth of the slowest replica that could decode the model."""
    rates = [
        replica.kv_transfer_bytes_per_s
        for gpu in resolved.gpus.values()
        for tp in resolved.instance.serving.tensor_parallel
        if valid_tensor_parallel(model, gpu, tp) is None
        and weights_blocker(replica := Replica(model, gpu, tp), limits) is None
    ]
    return min(rates, default=None)


def drop_dominated(configs: list[Config]) -> list[Config]:
    """Drop a config when another of the same model, GPU, tp and role carries every class it
    carries using no larger a share of any resource: every routing the first allows, the second
    allows on as many replicas at the same price, so the optimum is unchanged."""
    groups: dict[tuple, list[Config]] = {}
    for config in configs:
        groups.setdefault(
            (config.model, config.gpu, config.tp, config.role, config.measured), []
        ).append(config)
    kept = []
    for group in groups.values():
        rivals = _no_larger_shares(group)
        for j, config in enumerate(group):
            if not any(i != j and _dominates(group[i], config) for i in rivals[j]):
                kept.append(config)
    return kept


def _no_larger_shares(group: list[Config]) -> list[np.ndarray]:
    """For each config, the configs of its group with its resources that carry every class it
    carries at no larger a share of any resource: `_dominates`'s share test, for a whole group
    at once (a class not carried counts as an infinite share), so that the exact test runs on
    these few pairs, not on every pair (groups of hundreds of configs over tens of classes)."""
    rows: dict[tuple[str, ...], list[int]] = {}
    for j, config in enumerate(group):
        rows.setdefault(tuple(sorted(config.capacity)), []).append(j)
    rivals: list[np.ndarray] = [np.empty(0, dtype=int)] * len(group)
    for resources, members in rows.items():
        classes = sorted({c for j in members for c in group[j].usage})
        shares = np.array(
            [
                [
                    group[j].usage[c].get(r, 0.0) / group[j].capacity[r]
                    if c in group[j].usage
                    else math.inf
                    for c in classes
                    for r in resources
                ]
                for j in members
            ]
        ).reshape(len(members), -1)
        index = np.array(members)
        for row, j in enumerate(members):
            rivals[j] = index[(shares <= shares[row] * (1 + 1e-12)).all(axis=1)]
    return rivals


def _dominates(a: Config, b: Config) -> bool:
    """a carries everything b carries, at no larger share of any resource, pools at least as well
    (its queueing curve nowhere below b's), in pools of any size b's may have, ties broken by
    key."""
    if set(a.capacity) != set(b.capacity) or not set(b.usage) <= set(a.usage):
        return False
    if a.min_replicas > b.min_replicas:
        return False
    shares = [
        (a.usage[c].get(r, 0.0) / a.capacity[r], b.usage[c].get(r, 0.0) / b.capacity[r])
        for c in b.usage
        for r in a.capacity
    ]
    if any(sa > sb * (1 + 1e-12) for sa, sb in shares):
        return False
    if not _curve_at_least(a.queue, b.queue):  # the costlier check, where the shares pass
        return False
    strictly = (
        any(sa < sb * (1 - 1e-12) for sa, sb in shares)
        or set(b.usage) < set(a.usage)
        or a.queue != b.queue
        or a.min_replicas < b.min_replicas
    )
    return strictly or a.key < b.key


def _curve_at_least(a: PoolCurve, b: PoolCurve) -> bool:
    horizon = max(len(a.increments), len(b.increments)) + 1
    return a.tail_rate >= b.tail_rate - 1e-12 and all(
        a.load(n) >= b.load(n) - 1e-12 for n in range(1, horizon + 1)
    )


def operating_points(
    replica: Replica, role: str, classes: list[RequestClass], chunks: list[int], limits: Limits
) -> list[OperatingPoint]:
    """The union of every class's candidate points (deduplicated): each class's own best point
    is on offer, and the program mixes classes on whichever points suit them all."""
    points: dict[tuple[float, int, float], OperatingPoint] = {}
    for c in classes:
        for op in candidate_points(replica, role, c.shape, chunks, limits):
            longest = math.inf if op.longest_step_s is None else round(op.longest_step_s, 9)
            points.setdefault((round(op.step_s, 9), op.chunk_tokens, longest), op)
    return [points[key] for key in sorted(points)]


def _analytic_configs(
    replica: Replica,
    op: OperatingPoint,
    classes: list[RequestClass],
    limits: Limits,
    rejections: dict[str, list[Rejection]],
) -> list[Config]:
    """The point's configs: one per queueing level where it prefills. A class whose TTFT leaves
    W seconds to queue may share a pool with classes that leave at least W, so one config per
    distinct W carries the classes at or above it, with the pooling curve of that budget."""
    caps = capacity(replica, op, limits)
    base = Config(
        replica.model.name, replica.gpu.name, replica.tp, op, caps, walk_tokens=replica.walk_tokens
    )
    if not caps:
        gap = capacity_gap(replica, op)
        for c in classes:
            rejections[c.name].append(Rejection(base.key, gap.kind, gap.message, gap.miss, True))
        return []
    budgets: dict[str, float | None] = {}
    for c in classes:
        blocker = ineligibility(replica, op, c.shape, limits)
        budget = wait_budget_s(replica, op, c.shape) if op.does_prefill else None
        if blocker is None and budget is not None and budget <= 0:
            blocker = Blocker("ttft", "no time left to queue within the TTFT target")
        if blocker is not None:
            rejections[c.name].append(
                Rejection(base.key, blocker.kind, blocker.message, blocker.miss)
            )
            continue
        budgets[c.name] = None if budget is None else _level(budget)
    by_name, headrooms = {c.name: c for c in classes}, {}
    levels = sorted({b for b in budgets.values() if b is not None}) or [None]
    if None in budgets.values() and levels != [None]:
        levels.append(None)  # a pool of classes without a TTFT target needs no queueing margin
    configs = []
    for level in levels:
        admitted = [by_name[name] for name, b in budgets.items() if _admits(level, b)]
        for tier, members in slot_tiers(replica, op, admitted, limits):
            config = _config_of(replica, op, base, members, level, tier, limits, headrooms)
            if config is not None:
                variants = pooled_variants(replica, caps, config, members, limits, headrooms)
                configs += [config, *variants]
    return configs


def _config_of(
    replica: Replica,
    op: OperatingPoint,
    base: Config,
    members: list[RequestClass],
    level: float | None,
    tier: int | None,
    limits: Limits,
    headrooms: dict,
) -> Config | None:
    """The point's config for these members, with the margins they need (None: no room)."""
    margins = _margins(replica, op, base.capacity, members, limits, headrooms)
    if margins is None:
        return None
    shapes = {c.name: c.shape for c in members}
    config = replace(
        base,
        capacity=margins[0],
        usage=margins[1],
        ttft_s={},
        tpot_s={},
        wait_budget_s=level,
        slot_tier=tier,
    )
    if op.does_prefill:
        config.queue = queue_curve(replica, op, list(shapes.values()), limits)
    for name, shape in shapes.items():
        lat = latency(replica, op, shape)
        config.ttft_s[name] = lat.ttft_s
        config.tpot_s[name] = lat.tpot_s
        if late := unqueued_misses(replica, op, shape):
            config.unqueued_misses[name] = late
    return config


SLOT_TIER_GRID = 1.25
"""A point's classes are left out of a config for their batch slots only where the classes
kept have at least 1.25 times as many: nearby slot counts add a config for little room."""


def slot_tiers(
    replica: Replica, op: OperatingPoint, classes: list[RequestClass], limits: Limits
) -> list[tuple[int | None, list[RequestClass]]]:
    """The member sets of a point's config: all its classes (tier None), and, where it
    decodes, those that leave more batch slots than each tier of fewer (`batch_slots`), so
    that a class whose long sequences leave few slots is not in every config with the rest.

    A config's admission headroom is sized on the fewest slots among its latency-bound
    members (`admission_headroom`): a class of 20,000-token prompts beside 2,000-token chats
    cuts the chats' slots tenfold. Without the tiers the point had only the config with
    every class it may carry, so a looser target that made such a class eligible there took
    room from the others, and a looser TPOT could cost more (docs/formulation.md)."""
    if not classes:
        return []
    sets: list[tuple[int | None, list[RequestClass]]] = [(None, classes)]
    if not op.does_decode:
        return sets
    slots = {
        c.name: batch_slots(replica, c.shape, limits) for c in classes if latency_bound(c.shape)
    }
    for tier, above in pairwise(sorted(set(slots.values()))):
        if above >= SLOT_TIER_GRID * tier:
            sets.append((above, [c for c in classes if slots.get(c.name, above) > tier]))
    return sets


POOL_TIER_GRID = 1.25
"""A config's pooled variant is offered where it carries some class alone at least 1.25 times
the rate of the last one offered (or of the config itself): nearby pool sizes add a config and
a binary for little room."""
MOST_POOLED_SLOTS = 2048
"""Pooled variants stop where the pool holds more batch slots than this (a latency-bound
member's): there the headroom is near 1 (0.93 for the 4-slot replicas of
tests/test_pooled_admission.py at 1,024), and each evaluation of the Erlang tail takes time in
proportion to the slots. A larger pool is sized at the last size's headroom (conservative)."""


def pooled_variants(
    replica: Replica,
    caps: dict[str, float],
    config: Config,
    members: list[RequestClass],
    limits: Limits,
    headrooms: dict,
) -> list[Config]:
    """The config with its admission headroom sized for pools of m = 2, 4, 8, … replicas
    (`admission_headroom`), each with `min_replicas` m, while some member alone is held by
    its batch slots or KV cache: a replica of few slots (a small max_num_seqs, long contexts)
    needs a wide margin on its own and little in a pool that shares its queue. Offered at
    POOL_TIER_GRID steps, up to MOST_POOLED_SLOTS; the program keeps a variant's replicas at 0
    or at least m (docs/formulation.md §3). A larger pool changes only the slots' and KV's
    rows, which carry at most 1/h times the rate at headroom h, so the search stops where no
    member could reach POOL_TIER_GRID times its rate at the last size offered: its other rows,
    or the 1/h of its headroom there, bound it below that. `caps`: the point's capacities
    before margins."""
    shapes = [c.shape for c in members]
    timed = [shape for shape in shapes if latency_bound(shape)]
    if not config.op.does_decode or not timed:
        return []
    slots = min(batch_slots(replica, shape, limits) for shape in timed)
    variants, offered = [], _rates_alone(config)
    rates = offered
    unslotted = {r: cap for r, cap in config.capacity.items() if r not in (BATCH, KV)}
    others = {c: max_rate(unslotted, use)[0] for c, use in config.usage.items()}
    pool, last = 2, 1
    while pool * slots <= MOST_POOLED_SLOTS and any(
        binding in (BATCH, KV) for _, binding in rates.values()
    ):
        rooms = admission_headroom(replica, config.op, shapes, limits, headrooms, last)
        room = dict(zip((c.name for c in members), rooms, strict=True))
        if all(
            min(rate / room[c], others[c]) < POOL_TIER_GRID * rate
            for c, (rate, _) in offered.items()
        ):
            break
        margins = _margins(replica, config.op, caps, members, limits, headrooms, pool)
        if margins is None:
            break
        variant = replace(config, capacity=margins[0], usage=margins[1], min_replicas=pool)
        rates = _rates_alone(variant)
        if any(rates[c][0] >= POOL_TIER_GRID * offered[c][0] for c in rates):
            variants.append(variant)
            offered, last = rates, pool
        pool *= 2
    return variants


def _margins(
    replica: Replica,
    op: OperatingPoint,
    caps: dict[str, float],
    members: list[RequestClass],
    limits: Limits,
    headrooms: dict,
    pool: int = 1,
) -> tuple[dict[str, float], dict[str, dict[str, float]]] | None:
    """`with_latency_margins` of these members at the point, in pools of `pool` replicas."""
    shapes = {c.name: c.shape for c in members}
    uses = {name: usage(replica, op, shape) for name, shape in shapes.items()}
    return with_latency_margins(replica, op, shapes, limits, caps, uses, headrooms, pool)


def _rates_alone(config: Config) -> dict[str, tuple[float, str]]:
    """Each class's most requests/s on one replica of the config, alone, and what binds it."""
    return {c: max_rate(config.capacity, use) for c, use in config.usage.items()}


LEVEL_GRID = 1.25
"""Wait budgets are rounded down to powers of 1.25 ms before they become queueing levels:
conservative (a class queues against a budget a little smaller than its own), and classes
with nearby budgets share one level instead of each adding a config."""


def _level(budget_s: float) -> float:
    k = math.floor(math.log(budget_s * 1e3) / math.log(LEVEL_GRID) + 1e-9)
    return LEVEL_GRID**k / 1e3


def _admits(level: float | None, budget: float | None) -> bool:
    """A pool sized for wait budget `level` may carry a class with this budget: any class
    without a TTFT target, and any whose budget is at least the level. The None level is the
    pool of classes without targets only."""
    if level is None:
        return budget is None
    return budget is None or budget >= level


def _measured_config(
    model: str,
    gpu: str,
    profile: Profile,
    classes: list[RequestClass],
    rejections: dict[str, list[Rejection]],
) -> Config:
    op = OperatingPoint(profile.role, 0.0, 0)
    config = Config(model, gpu, profile.tensor_parallel, op, {PROFILE: 1.0}, measured=True)
    for c in classes:
        rate, reason = profile_rate(profile, c.shape.input_mean, c.shape.output_mean)
        if rate is None:
            rejections[c.name].append(Rejection(config.key, "profile", reason))
            continue
        config.usage[c.name] = {PROFILE: 1.0 / rate}
        config.ttft_s[c.name] = None
        config.tpot_s[c.name] = None
    return config
