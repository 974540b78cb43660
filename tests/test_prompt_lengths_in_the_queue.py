"""Prompt lengths in the TTFT queue and the prompt cost: each share of requests waits against
its own budget (perf/queueing.py), the longest prompts count at their own lengths, and spread
prompts pay their attention (docs/latency.md, docs/cost-model.md)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from fleetopt.instance import TokenDistribution, parse_instance
from fleetopt.perf.operating_point import (
    Limits,
    OperatingPoint,
    RequestShape,
    by_share,
    ineligibility,
    prompt_ttft_s,
    queue_curve,
    wait_budgets_s,
)
from fleetopt.perf.queueing import sure_misses
from fleetopt.pipeline import plan_fleet
from fleetopt.plan import Plan
from fleetopt.report.text import unqueued_lines
from fleetopt.workload.lengths import sampler_for, tail_bins
from tests.helpers import analytic_instance, catalog_replica

LIMITS = Limits(0.95, 256, 0.9)
CHAT = TokenDistribution(mean=800, p50=500, p90=1800, p99=4000, max=8000)


def _shape(dist: TokenDistribution, ttft_s: float, percentile: float = 99) -> RequestShape:
    return RequestShape(
        dist.mean,
        200,
        dist.at_percentile(percentile),
        400,
        ttft_s,
        None,
        miss_share=1 - percentile / 100,
        input_longest=dist.longest,
        input_cv2=sampler_for(dist).cv2,
        input_bins=tail_bins(dist, percentile),
    )


def test_a_plain_mean_puts_every_bin_at_the_mean():
    bins = tail_bins(TokenDistribution(mean=900), 99)
    assert {length for _, length in bins} == {900}
    assert bins[-1][0] == 1.0
    assert sum(share for share, _ in by_share(bins)) == pytest.approx(1.0)


@pytest.mark.parametrize("percentile", [95, 99, 99.9])
def test_bins_hold_the_percentile_length_and_reach_the_longest(percentile):
    """At and below the percentile no bin is longer than the length the latency checks use
    there; above it none is shorter; the last bin is the longest stated prompt."""
    bins = tail_bins(CHAT, percentile)
    tail, level = CHAT.at_percentile(percentile), percentile / 100
    lengths = [length for _, length in bins]
    assert lengths == sorted(lengths)
    assert all(length <= tail for p, length in bins if p <= level + 1e-12)
    assert all(length >= tail for p, length in bins if p > level + 1e-12)
    assert any(p == pytest.approx(level) for p, _ in bins)
    assert bins[-1] == (1.0, 8000)


def test_spread_prompts_cost_their_attention_by_hand():
    """Half the prompts 2,000 tokens, half 10,000: the mean compute is the mean of the two
    (the roofline's prompt compute is quadratic), more than the 6,000-token prompt's."""
    r = catalog_replica()
    mean, variance = 6000.0, 4000.0**2
    both = (r.prompt_compute_s(2000) + r.prompt_compute_s(10000)) / 2
    assert r.mean_prompt_compute_s(mean, variance / mean**2) == pytest.approx(both, rel=1e-12)
    assert both > r.prompt_compute_s(mean)


def test_the_mean_prompt_cost_matches_sampled_prompts():
    """The class's prompt cost against 200,000 prompts drawn as the simulator draws them."""
    r = catalog_replica()
    long_context = TokenDistribution(mean=24000, p50=16000, p90=56000, p99=100000, max=120000)
    shape = _shape(long_context, 15.0)
    drawn = sampler_for(long_context).sample(np.random.default_rng(0), 200_000).astype(float)
    sampled = float(np.mean(r.prompt_compute_s(drawn)))
    assert shape.prompt_s(r) == pytest.approx(sampled, rel=0.01)
    assert shape.prompt_s(r) > r.prompt_compute_s(long_context.mean) * 1.05


def test_prompts_that_miss_unqueued_spend_the_tail_or_block_the_point():
    """A target the p99 prompt meets with time to spare, but the longest prompts not: their
    share is a sure miss. Under the 1% allowed the point carries the class, with less queue
    than its short prompts alone would give; at 1% or more it may not carry it, and says why."""
    r = catalog_replica()
    op = OperatingPoint("prefill", 0.05, 512)
    longest_ok = prompt_ttft_s(r, op, _shape(CHAT, 1.0), 4000)
    shape = _shape(CHAT, longest_ok * 1.2)
    late = sure_misses(by_share(wait_budgets_s(r, op, shape)))
    assert 0 < late < 0.01
    assert ineligibility(r, op, shape, LIMITS) is None
    without = replace(
        shape, input_longest=4000, input_bins=tail_bins(CHAT.model_copy(update={"max": 4000}), 99)
    )
    with_late, none_late = (
        queue_curve(r, op, [shape], LIMITS),
        queue_curve(r, op, [without], LIMITS),
    )
    assert all(with_late.load(n) < none_late.load(n) for n in (1, 4, 16))

    strict = replace(shape, miss_share=late)
    blocker = ineligibility(r, op, strict, LIMITS)
    assert blocker is not None and blocker.kind == "ttft"
    assert "even unqueued" in blocker.message


def test_short_prompts_wait_longer_than_the_tail_one():
    """Held at each share's own budget, a pool carries at least what it carries when every
    prompt must start within the p99 prompt's budget (the model before the bins)."""
    r = catalog_replica()
    op = OperatingPoint("prefill", 0.05, 512)
    shape = _shape(CHAT, 1.0)
    at_tail = replace(shape, input_bins=())
    binned, tail_only = queue_curve(r, op, [shape], LIMITS), queue_curve(r, op, [at_tail], LIMITS)
    assert all(binned.load(n) >= tail_only.load(n) - 1e-12 for n in range(1, 33))
    assert binned.load(2) > tail_only.load(2)


def test_a_shared_pool_holds_every_class_to_its_own_budgets():
    """Two classes in one pool: whatever their mix, the curve is no higher than either's own
    (each class's miss share within its percentile), computed with the pool's longest service."""
    r = catalog_replica()
    op = OperatingPoint("prefill", 0.05, 512)
    chat = _shape(CHAT, 1.0)
    docs = _shape(TokenDistribution(mean=3000, p50=2500, p90=6000, p99=9000), 3.0)
    shared = queue_curve(r, op, [chat, docs], LIMITS)
    for alone in (queue_curve(r, op, [chat], LIMITS), queue_curve(r, op, [docs], LIMITS)):
        assert all(shared.load(n) <= alone.load(n) + 1e-12 for n in range(1, 33))


def test_prompts_without_a_ttft_hold_the_servers_as_long():
    """A pool's service variability is the most variable class it may carry, timed or not: an
    untimed class of spread long prompts makes the timed class wait as long as a timed one
    would (before 2026-12-04 only timed classes counted, and a p99.9 class of short prompts
    sharing a pool with such prompts met its TTFT for 96.1% of requests in simulation)."""
    r = catalog_replica()
    op = OperatingPoint("prefill", 0.05, 512)
    short = _shape(TokenDistribution(mean=100, p50=79, p90=229, p99=475, max=1093), 1.0, 99.9)
    batch = TokenDistribution(mean=4000, p50=1500, p90=9000, p99=30000, max=60000)
    spread = replace(_shape(batch, 10.0), ttft_s=None, input_moments=sampler_for(batch).moments())
    plain = replace(spread, input_cv2=0.0, input_moments=())
    assert spread.service_cv2(r) > 2
    with_spread = queue_curve(r, op, [short, spread], LIMITS)
    with_plain = queue_curve(r, op, [short, plain], LIMITS)
    assert all(with_spread.load(n) <= with_plain.load(n) + 1e-12 for n in range(1, 33))
    assert with_spread.load(4) < with_plain.load(4)
    timed = replace(spread, ttft_s=100.0)  # a target so loose it binds nothing of its own
    assert queue_curve(r, op, [short, timed], LIMITS) == with_spread


SPREAD = {"mean": 1000, "p50": 700, "p90": 2000, "p99": 6000, "max": 12000}


def test_a_pool_says_what_share_of_a_class_misses_unqueued():
    """The plan carries, per pool, the share of each class that misses its TTFT there however
    idle the pool (the sure misses above), and `solve` names the pools where they take half the
    class's miss share or more. With time for every prompt there are none."""
    tight = plan_fleet(
        parse_instance(analytic_instance(["h100-sxm"], input_tokens=SPREAD, ttft_ms=300))
    )
    (pool,) = tight.pools
    late = pool.unqueued_ttft_misses["chat"]
    assert 0.005 <= late < 0.01  # half the 1% or more; all of it would make the point ineligible
    (line,) = unqueued_lines(tight)
    assert line.startswith(
        f"pool 0: prompts too long to make the TTFT here however idle the pool: {late:.2%} of chat's"
    )
    assert Plan.from_dict(tight.to_dict()).pools[0].unqueued_ttft_misses == {"chat": late}
    loose = plan_fleet(
        parse_instance(analytic_instance(["h100-sxm"], input_tokens=SPREAD, ttft_ms=800))
    )
    assert all(p.unqueued_ttft_misses is None for p in loose.pools)
    assert unqueued_lines(loose) == []


LONG = TokenDistribution(mean=8000, p50=6944, p90=15289, p99=45756, max=94208)


@pytest.mark.parametrize("dist", [CHAT, LONG, TokenDistribution(mean=3000, p50=2900, p90=3500)])
def test_length_moments_match_a_sample(dist):
    """E[L^n] by the closed form over the quantile function's segments, against 400,000
    draws from the sampler the simulator uses."""
    sampler = sampler_for(dist)
    draws = sampler.sample(np.random.default_rng(1), 400_000).astype(float)
    for order, moment in enumerate(sampler.moments(), start=1):
        assert moment == pytest.approx(np.mean(draws**order), rel=0.03)
    assert sampler.moment(1) == pytest.approx(dist.mean)


def test_the_queue_takes_the_spread_of_prompt_compute_not_of_tokens():
    """A prompt's compute is c₁·L + c₂·L² (attention), so its service time spreads more than
    its length: on llama-3.1-70b the long-prompt class's compute has cv² 2.1 where its tokens
    have 1.4 (fuzz seed 631: one prefill replica planned on the tokens' spread met the p99 TTFT
    for 98.2% of requests in simulation). The cv² the queue takes is the sampled compute's; a
    plain mean has no spread, and a spread under 1 still counts as 1."""
    replica = catalog_replica("llama-3.1-70b", tp=4)
    sampler = sampler_for(LONG)
    shape = replace(_shape(LONG, 10.0), input_moments=sampler.moments())
    compute = replica.prompt_compute_s(sampler.sample(np.random.default_rng(2), 400_000))
    assert shape.service_cv2(replica) == pytest.approx(
        compute.var() / compute.mean() ** 2, rel=0.03
    )
    assert shape.service_cv2(replica) > 1.4 * sampler.cv2
    assert shape.prompt_s(replica) == pytest.approx(compute.mean(), rel=0.01)
    narrow = TokenDistribution(mean=3000, p50=2900, p90=3500)
    assert replace(shape, input_moments=sampler_for(narrow).moments()).service_cv2(replica) == 1.0
    assert replace(shape, input_moments=()).service_cv2(replica) == 1.0
