"""Demand over periods (`demand_profile`) and price tiers (`pricing`): reserved GPUs paid in every
period at rho x the price, on-demand per period at the price, spot per period at sigma x the price
and at most a share f of the period's fleet.

Known optima by brute force on measured-profile instances (one GPU type, one class, colocated,
tp 1): period t needs n_t = ceil(m_t * lambda / mu) GPUs. For every reserved count R the periods
are independent, so the optimum is

    min over R of  sum_t h_t * p * (rho*R + min over (G_t, s_t) of (o_t + sigma*s_t)) / sum_t h_t

with G_t >= max(n_t, R) GPUs in service, s_t <= f*G_t spot and o_t = G_t - R - s_t >= 0 on demand.
The enumeration runs over every profile period (not the merged levels the program solves), so
it also checks that merging equal multipliers loses nothing.
"""

from __future__ import annotations

import copy
import itertools
import math
import random

import pytest
from helpers import analytic_instance, measured_instance, solve

from fleetopt.catalog import resolve
from fleetopt.instance import parse_instance
from fleetopt.verify import verify

GPU, PRICE, MU = "a10g", 1.00, 2.0


def _instance(
    rate: float,
    multipliers: list[float] | None,
    period_hours: float = 1.0,
    pricing: dict | None = None,
    price: float = PRICE,
    mu: float = MU,
) -> dict:
    data = measured_instance(
        [{"type": GPU, "price_per_gpu_hour": price}],
        [("chat", "llama-2-7b", 500, 200, rate)],
        {("llama-2-7b", GPU, "colocated"): {"chat": mu}},
    )
    if multipliers is not None:
        data["demand_profile"] = {"period_hours": period_hours, "multipliers": multipliers}
    if pricing is not None:
        data["pricing"] = pricing
    return data


def _needs(rate: float, multipliers: list[float], mu: float = MU) -> list[int]:
    return [math.ceil(m * rate / mu - 1e-9) for m in multipliers]


def brute_force(
    needs: list[int],
    price: float = PRICE,
    rho: float = 1.0,
    sigma: float = 1.0,
    spot_share: float = 0.0,
) -> float:
    """Cheapest hour-weighted mean $/h over reserved R and per-period on-demand / spot counts
    (every period the same length, so the weights are equal)."""

    def period(need: int, reserved: int) -> float:
        best = math.inf
        low = max(need, reserved)
        for in_service in range(low, low + 4):  # more GPUs never lower o + sigma*s; +3 to be safe
            for spot in range(math.floor(spot_share * in_service + 1e-9) + 1):
                on_demand = in_service - reserved - spot
                if on_demand >= 0:
                    best = min(best, on_demand + sigma * spot)
        return best

    return min(
        price * sum(rho * r + period(n, r) for n in needs) / len(needs)
        for r in range(max(needs) + 1)
    )


def _verified(data: dict):
    plan = solve(data)
    assert plan.status == "optimal"
    assert verify(plan, resolve(parse_instance(copy.deepcopy(data)))) == []
    return plan


def _check_periods(plan, data: dict) -> None:
    """One plan entry per profile period with its multiplier and hours; equal multipliers share
    one fleet; every entry's GPUs add up by tier."""
    profile = data.get("demand_profile") or {"multipliers": [1.0], "period_hours": 1.0}
    assert plan.periods is not None
    assert len(plan.periods) == len(profile["multipliers"])
    reserved = plan.reserved_gpus or {}
    for i, (p, m) in enumerate(zip(plan.periods, profile["multipliers"], strict=True)):
        assert p.index == i
        assert p.multiplier == pytest.approx(m)
        assert p.hours == pytest.approx(profile.get("period_hours", 1.0))
        if data.get("pricing"):
            for g, n in p.gpus.items():
                parts = reserved.get(g, 0) + p.on_demand_gpus.get(g, 0) + p.spot_gpus.get(g, 0)
                assert parts == n
    for a, b in itertools.combinations(plan.periods, 2):
        if a.multiplier == b.multiplier:
            assert (a.gpus, a.on_demand_gpus, a.spot_gpus, a.cost_per_hour) == (
                b.gpus,
                b.on_demand_gpus,
                b.spot_gpus,
                b.cost_per_hour,
            )
    hours = sum(p.hours for p in plan.periods)
    mean = sum(p.hours * p.cost_per_hour for p in plan.periods) / hours
    assert plan.cost_per_hour == pytest.approx(mean)


# --- known optima -------------------------------------------------------------------------------


def test_day_and_night_reserved_base_by_hand():
    # lambda = 10 at mu = 2: 16 h at 0.5 need 3 GPUs, 8 h at 1.0 need 5. rho = 0.6:
    #   R = 0: (16*3 + 8*5)/24                 = 3.667
    #   R = 3: (16*0.6*3 + 8*(0.6*3 + 2))/24   = (28.8 + 30.4)/24 = 2.4667   <- optimum
    #   R = 4: (16*2.4 + 8*(2.4 + 1))/24       = 2.733
    #   R = 5: 0.6*5                            = 3.000
    # Peak-sized, all on demand: 5 GPUs = 5.00 $/h, so the saving is 2.5333 $/h.
    multipliers = [0.5] * 16 + [1.0] * 8
    data = _instance(10, multipliers, pricing={"reserved_price_factor": 0.6})
    expected = brute_force(_needs(10, multipliers), rho=0.6)
    assert expected == pytest.approx(59.2 / 24)
    plan = _verified(data)
    assert plan.cost_per_hour == pytest.approx(expected, abs=1e-6)
    assert plan.reserved_gpus == {GPU: 3}
    assert plan.peak_sized_cost_per_hour == pytest.approx(5.00)
    assert plan.saving_per_hour == pytest.approx(5.00 - 59.2 / 24)
    _check_periods(plan, data)
    low = next(p for p in plan.periods if p.multiplier == 0.5)
    peak = next(p for p in plan.periods if p.multiplier == 1.0)
    assert low.gpus == {GPU: 3} and low.on_demand_gpus == {}
    assert peak.gpus == {GPU: 5} and peak.on_demand_gpus == {GPU: 2}
    # the top-level fleet is the peak period's
    assert plan.gpus == {GPU: 5}


def test_spot_by_hand():
    # lambda = 10, mu = 2, multipliers [0.5, 1.0, 0.5, 0.3] -> needs 3, 5, 3, 2.
    # rho = 0.6, sigma = 0.3, f = 0.5. With R = 2: need 3 -> 1 spot (<= 1.5) = 1.2 + 0.3 = 1.5;
    # need 5 -> 2 spot (<= 2.5) + 1 on demand = 1.2 + 0.6 + 1 = 2.8; need 2 -> 1.2.
    # Mean (1.5 + 2.8 + 1.5 + 1.2)/4 = 1.75. R = 0: 2.375, R = 1: 1.975, R = 3: 1.95.
    multipliers = [0.5, 1.0, 0.5, 0.3]
    pricing = {"reserved_price_factor": 0.6, "spot_price_factor": 0.3, "spot_max_fraction": 0.5}
    data = _instance(10, multipliers, pricing=pricing)
    expected = brute_force(_needs(10, multipliers), rho=0.6, sigma=0.3, spot_share=0.5)
    assert expected == pytest.approx(1.75)
    plan = _verified(data)
    assert plan.cost_per_hour == pytest.approx(expected, abs=1e-6)
    _check_periods(plan, data)
    for p in plan.periods:  # the spot cap holds in every period
        assert p.spot_gpus.get(GPU, 0) <= 0.5 * p.gpus[GPU]


def _random_case(seed: int) -> tuple[float, list[float], dict, float]:
    rng = random.Random(seed)
    levels = rng.sample([0.0, 0.2, 0.3, 0.5, 0.7, 1.0], rng.randint(2, 4))
    multipliers = [rng.choice(levels) for _ in range(rng.randint(3, 8))]
    if max(multipliers) == 0:
        multipliers[0] = 1.0
    pricing = {
        "reserved_price_factor": rng.choice([0.4, 0.55, 0.7, 0.9, 1.0]),
        "spot_price_factor": rng.choice([0.2, 0.35, 0.5]),
        "spot_max_fraction": rng.choice([0.0, 0.25, 0.3, 0.5, 1.0]),
    }
    return rng.randint(2, 30) / 2, multipliers, pricing, rng.choice([1.5, 2.0, 3.0])


@pytest.mark.parametrize("seed", range(16))
def test_random_tiered_profiles_match_brute_force(seed):
    rate, multipliers, pricing, mu = _random_case(seed)
    needs = _needs(rate, multipliers, mu)
    expected = brute_force(
        needs,
        rho=pricing["reserved_price_factor"],
        sigma=pricing["spot_price_factor"],
        spot_share=pricing["spot_max_fraction"],
    )
    data = _instance(rate, multipliers, period_hours=2.0, pricing=pricing, mu=mu)
    plan = _verified(data)
    assert plan.cost_per_hour == pytest.approx(expected, abs=1e-6)
    _check_periods(plan, data)
    # The baseline is one fleet for the peak, all on demand: our own count of it.
    assert plan.peak_sized_cost_per_hour == pytest.approx(PRICE * max(needs))
    assert plan.saving_per_hour >= -1e-9
    assert plan.saving_per_hour == pytest.approx(PRICE * max(needs) - expected, abs=1e-6)


def test_profile_without_pricing_is_on_demand_per_period():
    # No tiers: every period pays its own fleet. Needs 2, 4, 1 at lambda = 7, mu = 2 with
    # multipliers [0.5, 1.0, 0.2] -> (2 + 4 + 1)/3 = 2.333 $/h; the peak fleet costs 4.00.
    multipliers = [0.5, 1.0, 0.2]
    data = _instance(7, multipliers)
    plan = _verified(data)
    assert _needs(7, multipliers) == [2, 4, 1]
    assert plan.cost_per_hour == pytest.approx(7 / 3, abs=1e-6)
    assert plan.reserved_gpus is None
    assert [p.gpus for p in plan.periods] == [{GPU: 2}, {GPU: 4}, {GPU: 1}]
    assert plan.peak_sized_cost_per_hour == pytest.approx(4.00)
    assert plan.saving_per_hour == pytest.approx(4.00 - 7 / 3)
    _check_periods(plan, data)


@pytest.mark.parametrize(
    "pricing",
    [
        {"reserved_price_factor": 0.6},
        {"reserved_price_factor": 0.7, "spot_price_factor": 0.3, "spot_max_fraction": 0.5},
    ],
    ids=["reserved", "reserved+spot"],
)
def test_pricing_without_profile_is_one_period(pricing):
    # One period at multiplier 1: lambda = 9, mu = 2 -> 5 GPUs. Reserved only: 5 * 0.6 = 3.00.
    # With spot (<= 2 of 5): 3 reserved + 2 spot = 2.1 + 0.6 = 2.70 (brute force agrees).
    data = _instance(9, None, pricing=pricing)
    expected = brute_force(
        [5],
        rho=pricing["reserved_price_factor"],
        sigma=pricing.get("spot_price_factor", 1.0),
        spot_share=pricing.get("spot_max_fraction", 0.0),
    )
    assert expected == pytest.approx(3.00 if "spot_price_factor" not in pricing else 2.70)
    plan = _verified(data)
    assert plan.cost_per_hour == pytest.approx(expected, abs=1e-6)
    _check_periods(plan, data)
    (period,) = plan.periods
    assert period.multiplier == 1.0 and period.gpus == {GPU: 5}
    assert plan.peak_sized_cost_per_hour == pytest.approx(5.00)


# --- properties ---------------------------------------------------------------------------------

DIURNAL = [0.3, 0.3, 0.3, 0.4, 0.6, 0.8, 1.0, 1.0, 0.9, 0.7, 0.5, 0.4]


def test_cheaper_reserved_never_raises_cost():
    costs = []
    for rho in [1.0, 0.9, 0.75, 0.6, 0.45, 0.3, 0.15]:
        data = _instance(
            17,
            DIURNAL,
            pricing={
                "reserved_price_factor": rho,
                "spot_price_factor": 0.5,
                "spot_max_fraction": 0.25,
            },
        )
        plan = _verified(data)
        costs.append(plan.cost_per_hour)
        assert plan.saving_per_hour >= -1e-9
    assert all(b <= a + 1e-9 for a, b in itertools.pairwise(costs)), costs
    assert costs[-1] < costs[0]


def test_no_spot_when_spot_max_fraction_is_zero():
    # Spot at a tenth of the price would be bought if it were allowed.
    pricing = {"reserved_price_factor": 0.8, "spot_price_factor": 0.1, "spot_max_fraction": 0.0}
    plan = _verified(_instance(17, DIURNAL, pricing=pricing))
    assert all(not p.spot_gpus for p in plan.periods)
    allowed = _verified(_instance(17, DIURNAL, pricing={**pricing, "spot_max_fraction": 0.5}))
    assert any(p.spot_gpus for p in allowed.periods)
    assert allowed.cost_per_hour < plan.cost_per_hour


def test_reserved_and_on_demand_never_cost_more_than_peak_sized_analytic():
    """Analytic cost model, two GPU types, both modes: the tiered plan verifies in every period,
    and its baseline equals our own solve of the peak demand with no profile and no pricing."""
    rate = 12.0
    base = analytic_instance(
        ["l4", "l40s"],
        rate,
        1000,
        200,
        ttft_ms=2000,
        tpot_ms=60,
        modes=("colocated", "disaggregated"),
    )
    multipliers = [0.25, 0.5, 1.0, 0.75, 0.5]
    data = copy.deepcopy(base)
    data["demand_profile"] = {"period_hours": 3, "multipliers": multipliers}
    data["pricing"] = {
        "reserved_price_factor": 0.6,
        "spot_price_factor": 0.35,
        "spot_max_fraction": 0.3,
    }
    plan = _verified(data)
    _check_periods(plan, data)
    peak_only = solve(base)  # peak multiplier 1.0: the stated rate, on demand
    assert plan.peak_sized_cost_per_hour == pytest.approx(peak_only.cost_per_hour, rel=1e-4)
    assert plan.saving_per_hour >= -1e-9
    assert plan.cost_per_hour <= peak_only.cost_per_hour * (1 + 1e-4)
    # Without tiers the profile alone also never costs more than the peak fleet.
    untiered = copy.deepcopy(data)
    del untiered["pricing"]
    flat = _verified(untiered)
    assert flat.cost_per_hour <= peak_only.cost_per_hour * (1 + 1e-4)
    # Untiered periods are independent: the plan's peak fleet is the peak-sized solve's.
    assert flat.peak_sized_cost_per_hour == pytest.approx(peak_only.cost_per_hour, rel=1e-4)
    assert plan.cost_per_hour <= flat.cost_per_hour * (1 + 1e-4)  # tiers only add options
