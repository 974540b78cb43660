"""Best throughput of one replica for one request class: the capacity calculator's core.

The same operating points and coefficients the program uses, maximised for a single class, so a
prediction compared with a measurement tests exactly what the planner would rely on.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fleetopt.perf.operating_point import (
    PREFILL,
    Limits,
    OperatingPoint,
    RequestShape,
    capacity,
    chunk_extra_s,
    ineligibility,
    max_rate,
    prefill_step_s,
    queue_curve,
    throughput_step_s,
    tpot_per_step,
    usage,
    with_latency_margins,
)
from fleetopt.perf.replica import Replica


@dataclass(frozen=True)
class Throughput:
    requests_per_s: float
    op: OperatingPoint
    limited_by: str

    def output_tokens_per_s(self, shape: RequestShape) -> float:
        return self.requests_per_s * shape.output_mean


TTFT_SHARES = (0.8, 0.5, 0.25)
"""A colocated point may spend these shares of a class's TTFT on prefill steps; the rest is
left for queueing. Shorter steps leave more time to queue but carry less decode."""
SHORTER_STEPS = (1.0, 0.8)
"""A step below the best one is offered too: a shorter step runs more prefill chunks per second
and leaves more of the TTFT to queue, which a prefill-heavy class may need more than decode.
(0.64 and 0.5 of it were offered as well until 2026-12-03; with every longest-step budget on
the grid they made no measured plan cheaper and the solves 2–5× slower: docs/benchmarks.md.)"""


STEP_GRID = 1.1
"""Longest-step budgets and the shorter steps are rounded down to powers of 1.1 ms (the best
step at each budget stays exact). A shorter step meets every target the exact one meets, and
classes with nearby targets then share points instead of multiplying them."""


def snap_down(step_s: float) -> float:
    """The largest grid step (1.1^k ms) at or below this one; exact grid values stay."""
    k = math.floor(math.log(step_s * 1e3) / math.log(STEP_GRID) + 1e-9)
    return STEP_GRID**k / 1e3


def candidate_points(
    replica: Replica, role: str, shape: RequestShape, chunks: list[int], limits: Limits
) -> list[OperatingPoint]:
    """Prefill: one point per chunk. Decode: the step of the class's best throughput cut to its
    TPOT target, and the TPOT's own step where the best one leaves no room for the TPOT's
    margin (`with_latency_margins`: a batch of one or two sequences, held by the slots or the
    KV cache, fluctuates more than the step's room beside it). Colocated, per chunk: every
    longest-step budget of `held_budgets`, each with the steps of `colocated_steps`."""
    if role == "prefill":
        return [OperatingPoint(role, prefill_step_s(replica, c), c) for c in sorted(set(chunks))]
    if role == "decode":
        longest = None if shape.tpot_s is None else shape.tpot_s / tpot_per_step(role, shape)
        step = throughput_step_s(replica, role, 0, shape, limits)
        if longest is not None:
            step = min(step, longest)
        best = OperatingPoint(role, step if step > 0 else (longest or replica.fixed_s), 0)
        if longest is None or best.step_s >= longest or _room(replica, best, shape, limits):
            return [best]
        return [best, OperatingPoint(role, longest, 0)]
    return [
        op
        for chunk in sorted(set(chunks))
        for held in held_budgets(replica, chunk, shape, limits)
        for op in colocated_steps(replica, chunk, shape, limits, held)
    ]


def _room(replica: Replica, op: OperatingPoint, shape: RequestShape, limits: Limits) -> bool:
    """The point carries some of the class alone once its latency margins are taken."""
    caps = capacity(replica, op, limits)
    uses = {"class": usage(replica, op, shape)}
    return (
        bool(caps)
        and with_latency_margins(replica, op, {"class": shape}, limits, caps, uses) is not None
    )


def held_budgets(
    replica: Replica, chunk: int, shape: RequestShape, limits: Limits
) -> list[float | None]:
    """The longest-step budgets of a colocated point for this class: every grid budget (a power
    of 1.1 ms) at or below its TPOT, from the highest down to the one whose chunk steps spend
    the least of TTFT_SHARES of the TTFT on the prompt; None (unheld) where the TPOT is held on
    the mean step, or there is none.

    A budget below the class's TPOT shortens the chunk steps a prompt waits through, buying
    TTFT with decode batch, as a stricter class's point would. Grid budgets only, not the TPOT
    itself: nothing here then depends on the TPOT but where the grid stops, and nothing in
    `colocated_steps`, so a tighter TPOT's points are a subset of a looser one's, and a looser
    target never lacks a point a tighter one had (the TPOT's own budget, off the grid, made
    chatbot-8b cost 4.71 $/h at 69 ms and 5.16 from 71.4 to 100 ms: docs/benchmarks.md). A
    target keeps at least 1/1.1 of its budget. The TPOT itself only where no grid budget lies
    between it and that bottom (a target that tight gets a point), and without a TTFT, where a
    tighter budget buys nothing. Budgets that leave no room beside a full chunk, or at or above
    the chunk step the unheld best step gives anyway, would change nothing and are left out."""
    own = None
    if shape.tpot_s is not None and not shape.mean_tpot:
        own = shape.tpot_s / tpot_per_step("colocated", shape)
    if shape.ttft_s is None:
        return [own]
    extra = chunk_extra_s(replica, chunk)
    top = throughput_step_s(replica, "colocated", chunk, shape, limits) + extra
    steps = replica.chunked_prefill_steps(shape.input_tail, chunk)
    bottom = max(
        snap_down(min(TTFT_SHARES) * shape.ttft_s / steps), replica.floor_s + extra * (1 + 1e-9)
    )
    below = []
    budget = snap_down(top if own is None else min(top, own))
    while budget >= bottom * (1 - 1e-9):
        below.append(budget)
        budget /= STEP_GRID
    if own is None:
        return [None, *below]
    return below or [own]


def colocated_steps(
    replica: Replica, chunk: int, shape: RequestShape, limits: Limits, held: float | None
) -> list[OperatingPoint]:
    """At one longest-step budget: the mean step of the class's best throughput (no longer than
    the budget), the SHORTER_STEPS of it, and the steps whose chunk steps spend a share of its
    TTFT on the prompt (TTFT_SHARES); the shorter ones on the STEP_GRID."""
    role = "colocated"
    step = throughput_step_s(replica, role, chunk, shape, limits, held)
    if held is not None:
        step = min(step, held)
    if shape.mean_tpot and shape.tpot_s is not None:  # the TPOT is held on the mean step
        step = min(step, shape.tpot_s)
    if step <= 0:  # nothing fits: a point that carries nothing says why (`capacity_gap`)
        return [OperatingPoint(role, held or replica.fixed_s, chunk, held)]
    shorter = {step * f for f in SHORTER_STEPS[1:]}
    if shape.ttft_s is not None:
        steps = replica.chunked_prefill_steps(shape.input_tail, chunk)
        extra = chunk_extra_s(replica, chunk)
        for share in TTFT_SHARES:
            budget = share * shape.ttft_s / steps
            if held is None or held > budget:
                shorter.add(min(step, budget - extra))
    candidates = {step} | {snap_down(s) for s in shorter if s > 0}
    return [OperatingPoint(role, s, chunk, held) for s in sorted(candidates)]


def best_throughput(
    replica: Replica,
    role: str,
    shape: RequestShape,
    chunks: list[int],
    limits: Limits,
    pool_size: int = 1,
) -> Throughput | None:
    """Highest request rate per replica, in a pool of `pool_size` like it, among points that
    meet the class's targets (a larger pool shares its prefill queue, perf/queueing.py, and its
    batch slots, `admission_headroom`)."""
    best = None
    for op in candidate_points(replica, role, shape, chunks, limits):
        caps = capacity(replica, op, limits)
        if not caps or ineligibility(replica, op, shape, limits) is not None:
            continue
        uses = {"class": usage(replica, op, shape)}
        margins = with_latency_margins(
            replica, op, {"class": shape}, limits, caps, uses, pooled=pool_size
        )
        if margins is None:
            continue
        caps, use = margins[0], margins[1]["class"]
        if op.does_prefill:  # what each replica carries with the pool's prefill queue shared
            curve = queue_curve(replica, op, [shape], limits)
            caps[PREFILL] *= curve.load(pool_size) / pool_size
        rate, binding = max_rate(caps, use)
        if best is None or rate > best.requests_per_s:
            best = Throughput(rate, op, binding)
    return best
