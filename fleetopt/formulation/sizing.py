"""Replicas that carry given requests/s alone, for every config of a program at once.

The replica bounds X_k (docs/formulation.md, Variables), the presolve's arithmetic plan and
its arithmetic bound (fleetopt/presolve.py, step 1 and short of time) weigh every config of a
block against all its classes together and against each class alone. One config at a time in
Python, that was most of the time of a block whose LP is skipped (docs/benchmarks.md); as
arrays, one product per group of classes.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from fleetopt.formulation.data import ProgramData
from fleetopt.perf.operating_point import PREFILL

ROUNDING = 1e-9
"""A load within this share of whole replicas needs no more: capacities and loads are sums and
products whose last bits should not buy a replica."""


@dataclass(frozen=True)
class Columns:
    """What 1 request/s of each class uses of each resource of one replica of each config, and
    each replica's capacity: configs × classes × resources, in the program's class order (the
    order each config lists its classes in, so that loads add up as one config's would)."""

    classes: dict[str, int]
    usage: np.ndarray  # [k, c, ρ]
    capacity: np.ndarray  # [k, ρ]; inf where config k has no such resource
    carries: np.ndarray  # [k, c]: k may carry c
    prefill: int | None  # the prefill resource's index, if any config has it
    heads: np.ndarray  # [k, j]: its pooling curve's f(j)/u, j = 0..N_k (`PoolCurve.heads`)
    size: np.ndarray  # [k]: N_k
    tail: np.ndarray  # [k]: the curve's tail rate beyond N_k
    roles: np.ndarray  # [k]: its role (colocated, prefill, decode)
    gpus: np.ndarray  # [k]: its GPU type
    tp: np.ndarray  # [k]: its tensor-parallel size
    least: np.ndarray  # [k]: the fewest replicas a pool of it may have (`Config.min_replicas`)
    _groups: dict[tuple[str, ...], Carriers] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def loads(self, rates: dict[str, float]) -> np.ndarray:
        """[k, ρ]: what these requests/s put on each resource of one replica of each config
        (classes a config may not carry put nothing on it). Summed over the classes each config
        may carry (`_patterns`), in the block's order: the terms left out are zeros, so the
        sums are those over every class, on a fraction of the cells where a block holds
        several models (every config carries one model's classes)."""
        rate = np.zeros(len(self.classes))
        for name, value in rates.items():
            rate[self.classes[name]] = value
        loads = np.zeros(self.capacity.shape)
        for configs, index, usage in self._patterns:
            loads[configs] = (usage * rate[index][None, :, None]).sum(axis=1)
        return loads

    @cached_property
    def _patterns(self) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """For each set of classes some configs carry: those configs, the classes' indices and
        their usage cells."""
        patterns, inverse = np.unique(self.carries, axis=0, return_inverse=True)
        found = []
        for i, carried in enumerate(patterns):
            configs, index = np.flatnonzero(inverse.ravel() == i), np.flatnonzero(carried)
            if index.size:
                found.append((configs, index, self.usage[np.ix_(configs, index)]))
        return found

    def rows(self, configs: list[int]) -> Columns:
        """The columns of these configs only (`ProgramData.restricted`)."""
        return dataclasses.replace(
            self,
            usage=self.usage[configs],
            capacity=self.capacity[configs],
            carries=self.carries[configs],
            heads=self.heads[configs],
            size=self.size[configs],
            tail=self.tail[configs],
            roles=self.roles[configs],
            gpus=self.gpus[configs],
            tp=self.tp[configs],
            least=self.least[configs],
        )

    def carriers(self, group: tuple[str, ...]) -> Carriers:
        """The configs that carry every class of `group`, with their columns over those classes
        alone. Sizing a group on every config weighed every class of the block on each: in
        throughput mode the whole program is one block, and the arithmetic plan at each scale
        tried sized 31 groups on 24,000 configs × 30 classes in every period (the large
        benchmark instance: minutes). The loads are the same sums, less terms of a zero rate
        (classes not in the group), so the same numbers. Kept per group: the scales and
        periods ask again."""
        if group not in self._groups:
            names = sorted(group, key=self.classes.__getitem__)  # the block's order: its sums
            index = [self.classes[c] for c in names]
            configs = np.flatnonzero(self.carries[:, index].all(axis=1))
            mine = self.rows(configs.tolist())
            sub = dataclasses.replace(
                mine,
                classes={c: i for i, c in enumerate(names)},
                usage=mine.usage[:, index],
                carries=mine.carries[:, index],
            )
            self._groups[group] = Carriers(configs, sub)
        return self._groups[group]


@dataclass(frozen=True)
class Carriers:
    """`Columns.carriers`: which configs (indices into the block's) and their columns."""

    configs: np.ndarray
    cols: Columns


def columns(data: ProgramData) -> Columns:
    """The program's configs as arrays: built once per block, read for every group of classes
    and every period. Filled from flat lists of positions and values, one pass over the
    configs: a block of a large program has thousands of configs and ~100,000 usage cells."""
    classes = {c.name: i for i, c in enumerate(data.classes)}
    resources: dict[str, int] = {}
    for config in data.configs:
        for resource in config.capacity:
            resources.setdefault(resource, len(resources))
    count, width = len(classes), len(resources)
    held, caps, used, amounts, pairs = [], [], [], [], []
    for k, config in enumerate(data.configs):
        mine = {resource: resources[resource] for resource in config.capacity}
        held += (k * width + r for r in mine.values())
        caps += config.capacity.values()
        for c, use in config.usage.items():
            pair = k * count + classes[c]
            pairs.append(pair)
            for resource, amount in use.items():
                if resource in mine:
                    used.append(pair * width + mine[resource])
                    amounts.append(amount)
    shape = (len(data.configs), count, width)
    usage, carries = np.zeros(shape), np.zeros(shape[:2], dtype=bool)
    capacity = np.full(shape[::2], math.inf)
    np.put(capacity, np.array(held, dtype=np.int64), np.array(caps, dtype=float))
    np.put(usage, np.array(used, dtype=np.int64), np.array(amounts, dtype=float))
    np.put(carries, np.array(pairs, dtype=np.int64), True)
    curves = [config.queue.heads for config in data.configs]
    lengths = np.array([len(heads) for heads in curves], dtype=np.int64)
    heads = np.zeros((len(curves), int(lengths.max(initial=1))))
    heads[np.arange(heads.shape[1]) < lengths[:, None]] = np.fromiter(
        itertools.chain.from_iterable(curves), dtype=float, count=int(lengths.sum())
    )
    tail = np.array([config.queue.tail_rate for config in data.configs], dtype=float)
    roles = np.array([config.role for config in data.configs], dtype=str)
    gpus = np.array([config.gpu for config in data.configs], dtype=str)
    tp = np.array([config.tp for config in data.configs], dtype=np.int64)
    least = np.array([config.min_replicas for config in data.configs], dtype=np.int64)
    prefill = resources.get(PREFILL)
    return Columns(
        classes, usage, capacity, carries, prefill, heads, lengths - 1, tail, roles, gpus, tp, least
    )


def pooled(cols: Columns, k: np.ndarray, replicas: np.ndarray) -> np.ndarray:
    """`PoolCurve.load` of configs k at these replica counts, as arrays (the same operations,
    so the same numbers: tests/test_sizing.py)."""
    size = cols.size[k]
    head = cols.heads[k, np.minimum(replicas, size)]
    line = cols.heads[k, size] + (replicas - size) * cols.tail[k]
    return np.minimum(replicas.astype(float), np.where(replicas <= size, head, line))


def replicas_alone(cols: Columns, rates: dict[str, float]) -> np.ndarray:
    """For each config, the fewest replicas that carry these requests/s of the classes it may
    carry, on every resource, the prefill pooled (n replicas carry g(n) ≤ n replicas' worth:
    the least n from ⌈load/cap⌉ up that the pooling curve says suffices), and no fewer than
    its pool's least (`Config.min_replicas`) where it carries any."""
    return replicas_alone_each(cols, [rates])[0]


SEARCH_CELLS = 1 << 22
"""The most (rate, config, resource) cells one search of `replicas_alone_each` holds: a demand
profile may have a level for each of 8,784 hours, which over thousands of configs would take
gigabytes at once. Further rates are searched in turns (the same numbers)."""


def replicas_alone_each(cols: Columns, rates: list[dict[str, float]]) -> np.ndarray:
    """[t, k]: `replicas_alone` at each of these requests/s (a block's periods), in one search
    over them all (or over as many as SEARCH_CELLS allows at a time): each step is the same
    numbers as one rate's alone, for the periods of a throughput program at once (the large
    benchmark instance's arithmetic plan at a scale sized 37 groups in 23 periods one call
    each: docs/benchmarks.md)."""
    turn = max(1, SEARCH_CELLS // max(1, cols.capacity.size))
    if len(rates) > turn:
        parts = (rates[i : i + turn] for i in range(0, len(rates), turn))
        return np.concatenate([replicas_alone_each(cols, part) for part in parts])
    loads = np.stack([cols.loads(each) for each in rates])
    need = np.ceil(loads / cols.capacity - ROUNDING).astype(np.int64)
    if cols.prefill is not None:
        _pool_prefill(cols, loads, need)
    most = need.max(axis=2, initial=0)
    return np.where(most > 0, np.maximum(most, cols.least[None, :]), 0)


def _pool_prefill(cols: Columns, loads: np.ndarray, need: np.ndarray) -> None:
    """Raise `need`'s prefill cells ([t, k, ρ]) to the replicas whose pool carries the load."""
    p = cols.prefill
    t, k = np.nonzero(np.isfinite(cols.capacity[:, p]) & (loads[:, :, p] > 0))
    target, cap = loads[t, k, p] * (1 - ROUNDING), cols.capacity[k, p]
    need[t, k, p] = np.maximum(need[t, k, p], _on_the_tail(cols, k, target / cap))
    while k.size:  # one more replica where the pool carries less than the load
        short = pooled(cols, k, need[t, k, p]) * cap < target
        need[t[short], k[short], p] += 1
        t, k, target, cap = t[short], k[short], target[short], cap[short]


def _on_the_tail(cols: Columns, k: np.ndarray, load: np.ndarray) -> np.ndarray:
    """A replica count at most the fewest that carry `load` (in replicas' worth) where that
    lies beyond the expansion, on the tail line f(N)/u + rate·(n − N) (one less, for rounding),
    so that the search above starts there, not one replica at a time from ⌈load⌉ (millions of
    steps at the largest demands); 0 elsewhere."""
    size, rate = cols.size[k], cols.tail[k]
    beyond = (load > cols.heads[k, size]) & (rate > 0)
    reach = (load - cols.heads[k, size]) / np.where(beyond, rate, 1.0)
    return np.where(beyond, size + np.floor(reach).astype(np.int64) - 1, 0)


def cost_per_request(
    cols: Columns, price: np.ndarray, capacity: np.ndarray | None = None
) -> np.ndarray:
    """[k, c]: what a request/s of class c costs alone on config k, no pooling: its replicas'
    price times the share of a replica its busiest resource gives it (inf where k may not carry
    c). `capacity`: the columns' own unless given (the scaled LP's, with the chords in it)."""
    capacity = cols.capacity if capacity is None else capacity
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.nan_to_num(cols.usage / capacity[:, None, :]).max(axis=2, initial=0.0)
    return np.where(cols.carries, price[:, None] * share, np.inf)


def cheapest_per_request(cost: np.ndarray, role: np.ndarray) -> np.ndarray:
    """[c]: each class's least cost on one colocated config, or on a prefill config plus a
    decode config (inf where neither carries it). `cost`: [k, c], a request/s of class c on
    config k, inf where k may not carry c; `role`: each config's."""
    both, prefill, decode = (
        cost[role == r].min(axis=0, initial=np.inf) for r in ("colocated", "prefill", "decode")
    )
    return np.minimum(both, prefill + decode)


def replica_prices(data: ProgramData, cols: Columns) -> np.ndarray:
    """[k]: what one replica of each config pays an hour for its GPUs, at the on-demand price
    (`cols`: `columns(data)`)."""
    return cols.tp * gpu_prices(data, cols)


def gpu_prices(data: ProgramData, cols: Columns) -> np.ndarray:
    """[k]: the on-demand price of one GPU of each config's type (`cols`: `columns(data)`), by
    the few GPU types rather than the thousands of configs."""
    names, inverse = np.unique(cols.gpus, return_inverse=True)
    price = {g.name: g.price_per_gpu_hour for g in data.gpus}
    return np.array([price[name] for name in names.tolist()], dtype=float)[inverse.ravel()]


def price_weights(data: ProgramData, summed: bool = False) -> np.ndarray:
    """[t]: the least share of a GPU's on-demand price that one in service in period t adds to
    the objective, the hour-weighted mean: h_t/H, or with tiers min(h_t/H, ρ_r, σ_s·h_t/H)
    (reserved GPUs are paid over every hour, spot at its factor).

    `summed`: weights y_t whose sum over periods bounds a fleet's cost. A reserved GPU is paid
    once for every period it serves, so the weights of one GPU's periods may not add up past
    the reserved factor ρ_r: by LP duality on R + on-demand_t + spot_t ≥ n_t, Σ_t y_t·n_t
    bounds the cost of any n where Σ_t y_t ≤ ρ_r and 0 ≤ y_t ≤ (h_t/H)·min(1, σ_s). Of those,
    the busiest periods (by multiplier) are weighed in full first, until ρ_r is spent: the
    fleet is largest there. (Each period's own least weight, summed, passed the cost of a
    reserved fleet: 15.4 against 10.8 $/h on an instance of four flat hours at ρ_r = 0.3,
    σ_s = 0.9.)"""
    tiers = data.tiers
    weights = np.array([period.hours / data.total_hours for period in data.periods])
    if tiers is None:
        return weights
    if not summed:
        return np.minimum(
            np.minimum(weights, tiers.reserved_price_factor), tiers.spot_price_factor * weights
        )
    most = weights * min(1.0, tiers.spot_price_factor)
    summed_weights, left = np.zeros(len(weights)), tiers.reserved_price_factor
    for t in sorted(range(len(weights)), key=lambda t: -data.periods[t].multiplier):
        summed_weights[t] = min(most[t], left)
        left -= summed_weights[t]
    return summed_weights
