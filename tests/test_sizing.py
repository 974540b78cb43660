"""`formulation/sizing.py` sizes every config at once as arrays: the same replicas, config by
config, as the rule it stands for — the fewest n with n·cap ≥ load on every resource and
g(n)·cap ≥ load on the pooled prefill — and the same pooling curve values as `PoolCurve.load`."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from fleetopt.catalog import resolve
from fleetopt.configs import enumerate_configs
from fleetopt.formulation import sizing
from fleetopt.formulation.data import Period, ProgramData, Tiers
from fleetopt.formulation.sizing import (
    ROUNDING,
    columns,
    pooled,
    price_weights,
    replicas_alone,
    replicas_alone_each,
)
from fleetopt.instance import load_instance
from fleetopt.perf.operating_point import PREFILL
from fleetopt.pipeline import program_data

INSTANCES = Path(__file__).parent.parent / "instances"


def _program(name: str):
    resolved = resolve(load_instance(INSTANCES / name))
    return program_data(resolved, enumerate_configs(resolved))


def _carries(config, rates: dict[str, float], replicas: int) -> bool:
    """n replicas of one config carry these requests/s of its classes on every resource."""
    for resource, cap in config.capacity.items():
        load = sum(
            rate * config.usage[c].get(resource, 0.0)
            for c, rate in rates.items()
            if c in config.usage
        )
        held = config.queue.load(replicas) if resource == PREFILL else float(replicas)
        if held * cap < load * (1 - ROUNDING):
            return False
    return True


@pytest.mark.parametrize("name", ["chat-rag-70b.yaml", "two-model-fleet.yaml"])
def test_replicas_alone_are_the_fewest_that_carry_the_rates(name):
    """At each of several rates in one search (`replicas_alone_each`) as at each alone."""
    data = _program(name)
    cols = columns(data)
    names = [c.name for c in data.classes]
    checked = 0
    for group in [names, *([n] for n in names)]:
        scales = (0.01, 1.0, 7.0, 3000.0)  # a trickle, the stated demand, far more
        each = [
            {c.name: c.requests_per_s * scale for c in data.classes if c.name in group}
            for scale in scales
        ]
        for rates, need in zip(each, replicas_alone_each(cols, each), strict=True):
            assert need.tolist() == replicas_alone(cols, rates).tolist()
            for k, config in enumerate(data.configs):
                n = int(need[k])
                assert _carries(config, rates, n), config.key
                assert n == 0 or not _carries(config, rates, n - 1), config.key
                checked += 1
    assert checked > 1000


def test_pooled_is_the_pool_curve():
    data = _program("chat-rag-70b.yaml")
    cols = columns(data)
    assert any(not config.queue.linear for config in data.configs)
    ks = np.arange(len(data.configs))
    for n in range(0, 80):
        values = pooled(cols, ks, np.full(len(ks), n))
        expected = [config.queue.load(n) for config in data.configs]
        assert values.tolist() == expected  # the same numbers, to the last bit


def test_rates_ignore_classes_a_config_may_not_carry():
    data = _program("two-model-fleet.yaml")
    cols = columns(data)
    first = data.classes[0].name
    rates = {first: data.classes[0].requests_per_s}
    need = replicas_alone(cols, rates)
    for k, config in enumerate(data.configs):
        assert (need[k] > 0) == (first in config.usage), config.key


@pytest.mark.parametrize("name", ["two-model-fleet.yaml", "chat-rag-70b.yaml"])
def test_loads_are_the_sums_over_every_class_to_the_last_bit(name):
    """`Columns.loads` sums over the classes each config may carry: the terms it leaves out
    are zeros, so the sums are those over every class of the block."""
    data = _program(name)
    cols = columns(data)
    rng = np.random.default_rng(0)
    for _ in range(20):
        rates = {c: float(rng.uniform(0, 50) * 10 ** rng.uniform(-4, 4)) for c in cols.classes}
        rate = np.array([rates[c] for c in cols.classes])
        every = (cols.usage * rate[None, :, None]).sum(axis=1)
        assert np.array_equal(cols.loads(rates), every)


def test_a_groups_carriers_size_as_every_config_does():
    """The configs that carry every class of a group, sized on the group's classes alone:
    the same replicas as sizing every config of the block on every class."""
    data = _program("two-model-fleet.yaml")
    cols = columns(data)
    names = [c.name for c in data.classes]
    for group in [tuple(names), *((n,) for n in names), tuple(names[:2])]:
        rates = {c.name: c.requests_per_s * 1.7 for c in data.classes if c.name in group}
        carriers = cols.carriers(group)
        index = [cols.classes[c] for c in group]
        expected = np.flatnonzero(cols.carries[:, index].all(axis=1))
        assert carriers.configs.tolist() == expected.tolist()
        every = replicas_alone(cols, rates)[carriers.configs]
        assert replicas_alone(carriers.cols, rates).tolist() == every.tolist()
        assert cols.carriers(group) is carriers  # kept for the periods and scales to come


def test_price_weights_by_hand():
    """Hours of 1, 1 and 2 at multipliers 0.5, 1 and 0; reserved at 0.3, spot at 0.9. One
    period's least weight is min(h/H, 0.3, 0.9·h/H); weights summed over periods may not pass
    0.3 together, the busiest period weighed first at 0.9·h/H (the dual of R + on-demand +
    spot ≥ n)."""
    data = ProgramData(
        [],
        [],
        [],
        periods=[Period(0.5, 1.0), Period(1.0, 1.0), Period(0.0, 2.0)],
        tiers=Tiers(0.3, 0.9, 0.25),
    )
    assert price_weights(data) == pytest.approx([0.225, 0.225, 0.3])
    assert price_weights(data, summed=True) == pytest.approx([0.075, 0.225, 0.0])
    untiered = dataclasses.replace(data, tiers=None)
    assert price_weights(untiered).tolist() == price_weights(untiered, summed=True).tolist()
    assert price_weights(untiered) == pytest.approx([0.25, 0.25, 0.5])


def test_rates_searched_in_turns_give_the_same_replicas(monkeypatch):
    """`replicas_alone_each` holds at most SEARCH_CELLS cells at a time (a year of hourly
    demand levels over thousands of configs would take gigabytes): searched in turns of five
    rates, or one, the same replicas as all at once."""
    data = _program("two-model-fleet.yaml")
    cols = columns(data)
    rates = [
        {c.name: c.requests_per_s * scale for c in data.classes}
        for scale in np.linspace(0.01, 3.0, 23)
    ]
    whole = replicas_alone_each(cols, rates)
    for turn in (5, 1):
        monkeypatch.setattr(sizing, "SEARCH_CELLS", cols.capacity.size * turn)
        assert np.array_equal(replicas_alone_each(cols, rates), whole)
