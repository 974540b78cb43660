"""Independent blocks of the program, solved one at a time and merged: exact, and much smaller.

Without price tiers, budget or throughput objective, nothing links two periods: each period's
cost is its own fleet's, and the objective is their hour-weighted sum, so each period is a
program of its own. Two models are linked only through a GPU type both may use that has an
availability cap or whole nodes (their GPUs add up in one row); elsewhere each model's fleet is
priced on its own. The optimum of the whole is the sum of the blocks' optima, and a gap of g on
every block is a gap of at most g on the whole.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np
import pyomo.core as pyo

from fleetopt.formulation.data import ProgramData
from fleetopt.formulation.sizing import (
    cheapest_per_request,
    columns,
    cost_per_request,
    replica_prices,
)
from fleetopt.formulation.tiers import period_cost


@dataclass(frozen=True)
class Block:
    """A sub-program: some models' classes and configs over some periods."""

    data: ProgramData
    configs: list[int]
    """The whole program's index of each of the block's configs."""
    periods: list[int]
    """The whole program's index of each of the block's periods."""


def independent_blocks(data: ProgramData) -> list[Block]:
    """The program split into blocks that share no variable and no row (one block when every
    period or model is linked)."""
    return [cut_block(data, models, periods) for models, periods in block_parts(data)]


def block_parts(data: ProgramData) -> list[tuple[frozenset[str], list[int]]]:
    """The models and periods of each independent block: what a worker process that holds the
    program needs to cut the block itself (`cut_block`), rather than be sent its configs."""
    assert not data.replica_bounds, "blocks are cut before any presolve bounds replicas"
    linked = data.tiers is not None or data.maximize_throughput or data.budget_per_hour is not None
    period_groups = (
        [list(range(len(data.periods)))] if linked else [[t] for t in range(len(data.periods))]
    )
    return [
        (frozenset(models), periods)
        for models in _model_groups(data, linked)
        for periods in period_groups
    ]


def whole_part(data: ProgramData) -> tuple[frozenset[str], list[int]]:
    """The whole program as one block's models and periods (to measure what the split saves)."""
    models = {c.model for c in data.classes} | {config.model for config in data.configs}
    return frozenset(models), list(range(len(data.periods)))


def cut_block(
    data: ProgramData, models: frozenset[str], periods: list[int], like: Block | None = None
) -> Block:
    """The sub-program of these models' classes and configs over these periods. `like`: a
    block of the same models over other periods, whose classes and configs it takes rather
    than sifting the program's (thousands of configs, for each of many period blocks)."""
    if like is None:
        configs = [k for k, config in enumerate(data.configs) if config.model in models]
        like = Block(
            dataclasses.replace(
                data,
                classes=[c for c in data.classes if c.model in models],
                configs=[data.configs[k] for k in configs],
            ),
            configs,
            [],
        )
    sub = dataclasses.replace(like.data, periods=[data.periods[t] for t in periods])
    return Block(sub, like.configs, periods)


def split_by_period(
    parts: list[tuple[frozenset[str], list[int]]], order: list[int]
) -> list[tuple[frozenset[str], list[int]]]:
    """The groups of models split into several blocks, one period each, and their periods: one
    LP bounds all those blocks (fleetopt/scaled_bound.py). In the order each group's first
    block comes in `order`."""
    blocks: dict[frozenset[str], list[list[int]]] = {}
    for i in order:
        models, periods = parts[i]
        blocks.setdefault(models, []).append(periods)
    return [
        (models, sorted(t for periods in split for t in periods))
        for models, split in blocks.items()
        if len(split) > 1
    ]


def _model_groups(data: ProgramData, linked: bool) -> list[set[str]]:
    """Models joined when a linking GPU type (capped, whole nodes, or any type when linked) may
    serve both."""
    models = sorted({c.model for c in data.classes})
    if linked:
        return [set(models)]
    shared = {g.name for g in data.gpus if g.max_gpus is not None or g.gpus_per_node}
    group = {m: {m} for m in models}
    users: dict[str, set[str]] = {}
    for config in data.configs:
        if config.gpu in shared:
            users.setdefault(config.gpu, set()).add(config.model)
    for together in users.values():
        merged = set().union(*(group[m] for m in together))
        for m in merged:
            group[m] = merged
    return list({id(g): g for g in group.values()}.values())


def worth_first(data: ProgramData, parts: list[tuple[frozenset[str], list[int]]]) -> list[int]:
    """The blocks in the order their LP is worth most per second when a time limit leaves LPs
    to some blocks only (pipeline.solve_program): a rough $/h of each block — every class's
    requests/s at its cheapest config alone, through that config's busiest resource for the
    class, no pooling — over its configs × periods, which its LP's time grows with. Highest
    first; equal ones in the given order. The order changes which blocks answer by arithmetic,
    never a block's answer."""
    cols = columns(data)
    cost = cost_per_request(cols, replica_prices(data, cols))
    per_request = cheapest_per_request(cost, cols.roles)
    models = np.array([config.model for config in data.configs])
    hours = data.total_hours
    worth = []
    for members, periods in parts:
        rate = sum(
            c.requests_per_s * per_request[cols.classes[c.name]]
            for c in data.classes
            if c.model in members and c.requests_per_s > 0
        )
        dollars = rate * sum(data.periods[t].multiplier * data.periods[t].hours for t in periods)
        work = max(1, int(np.isin(models, list(members)).sum()) * len(periods))
        worth.append(dollars / hours / work)
    return sorted(range(len(parts)), key=lambda i: -worth[i])


@dataclass
class Solution:
    """The values of a solved program under the model's component names, so that a plan reads
    the same whether it came from one model or from merged blocks. `x` and `r` hold only the
    nonzero values (a missing key is 0): on thousands of configs over many periods nearly all
    are 0."""

    T: list[int]
    G: list[str]
    alpha: float = 1.0
    x: dict[tuple[int, int], float] = field(default_factory=dict)
    r: dict[tuple[str, int, int], float] = field(default_factory=dict)
    gpus: dict[tuple[str, int], float] = field(default_factory=dict)
    reserved: dict[str, float] = field(default_factory=dict)
    on_demand: dict[tuple[str, int], float] = field(default_factory=dict)
    spot: dict[tuple[str, int], float] = field(default_factory=dict)
    cost_per_hour: float = 0.0


def empty_solution(data: ProgramData) -> Solution:
    """Every variable at zero: blocks add their values in."""
    periods = list(range(len(data.periods)))
    gpus = [g.name for g in data.gpus]
    return Solution(
        T=periods,
        G=gpus,
        gpus={(g, t): 0.0 for g in gpus for t in periods},
        reserved=dict.fromkeys(gpus, 0.0) if data.tiers else {},
        on_demand={(g, t): 0.0 for g in gpus for t in periods} if data.tiers else {},
        spot={(g, t): 0.0 for g in gpus for t in periods} if data.tiers else {},
    )


@dataclass
class BlockValues:
    """A solved block's values under the whole program's indices: plain numbers, so a block
    solved in another process sends these back instead of its model (`x` and `r` nonzero
    only, as in `Solution`)."""

    alpha: float
    x: dict[tuple[int, int], float]
    r: dict[tuple[str, int, int], float]
    gpus: dict[tuple[str, int], float]
    reserved: dict[str, float]
    on_demand: dict[tuple[str, int], float]
    spot: dict[tuple[str, int], float]


def block_values(block: Block, m: pyo.ConcreteModel) -> BlockValues:
    """The values of a solved block model, under the whole program's indices."""
    k_of, t_of = block.configs, block.periods
    tiered = block.data.tiers is not None
    return BlockValues(
        alpha=pyo.value(m.alpha),
        x={(k_of[k], t_of[t]): value for (k, t), var in m.x.items() if (value := var.value)},
        r={(c, k_of[k], t_of[t]): v for (c, k, t), var in m.r.items() if (v := var.value)},
        gpus={(g, t_of[t]): var.value or 0.0 for (g, t), var in m.gpus.items()},
        reserved={g: var.value or 0.0 for g, var in m.reserved.items()} if tiered else {},
        on_demand={(g, t_of[t]): v.value or 0.0 for (g, t), v in m.on_demand.items()}
        if tiered
        else {},
        spot={(g, t_of[t]): var.value or 0.0 for (g, t), var in m.spot.items()} if tiered else {},
    )


def add_block(whole: Solution, values: BlockValues) -> None:
    """Adds a solved block's values into the whole program's solution."""
    whole.alpha = values.alpha
    for name in ("x", "r", "gpus", "reserved", "on_demand", "spot"):
        merged = getattr(whole, name)
        for key, value in getattr(values, name).items():
            merged[key] = merged.get(key, 0.0) + value


def finish(whole: Solution, data: ProgramData) -> Solution:
    """The cost per hour, from the merged GPU counts."""
    hours = data.total_hours
    whole.cost_per_hour = (
        sum(p.hours * period_cost(whole, data, t) for t, p in enumerate(data.periods)) / hours
    )
    return whole
