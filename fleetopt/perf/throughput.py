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
SHORTER_STEPS = (1.0, 0.8, 0.64, 0.5)
"""Steps below the best one are offered too: a shorter step runs more prefill chunks per second
and leaves more of the TTFT to queue, which a prefill-heavy class may need more than decode."""


STEP_GRID = 1.1
"""The shorter steps are rounded down to powers of 1.1 ms (the class's own best step stays
exact). A shorter step meets every target the exact one meets, and classes with nearby targets
then share points instead of multiplying them."""


def snap_down(step_s: float) -> float:
    """The largest grid step (1.1^k ms) at or below this one; exact grid values stay."""
    k = math.floor(math.log(step_s * 1e3) / math.log(STEP_GRID) + 1e-9)
    return STEP_GRID**k / 1e3


def candidate_points(
    replica: Replica, role: str, shape: RequestShape, chunks: list[int], limits: Limits
) -> list[OperatingPoint]:
    """Prefill: one point per chunk. Decode / colocated: per chunk, the (mean) step of the
    class's best throughput cut to its TPOT target; colocated, also shorter steps
    (SHORTER_STEPS) and the steps whose chunk steps spend a share of its TTFT on the prompt
    (TTFT_SHARES), on the STEP_GRID."""
    if role == "prefill":
        return [OperatingPoint(role, prefill_step_s(replica, c), c) for c in sorted(set(chunks))]
    points = []
    for chunk in [0] if role == "decode" else sorted(set(chunks)):
        # colocated, the TPOT is held by the longest step, the one with a full chunk
        longest = None
        if shape.tpot_s is not None:
            longest = shape.tpot_s / tpot_per_step(role, shape)
        held = longest if role == "colocated" and not shape.mean_tpot else None
        step = throughput_step_s(replica, role, chunk, shape, limits, held)
        if longest is not None:
            step = min(step, longest)
        if step <= 0:  # nothing fits: a point that carries nothing says why (`capacity_gap`)
            points.append(OperatingPoint(role, longest or replica.fixed_s, chunk, held))
            continue
        shorter = {step * f for f in SHORTER_STEPS[1:]} if role == "colocated" else set()
        if role == "colocated" and shape.ttft_s is not None:
            # the mean step whose chunk steps (at most step + the chunk's time) spend the share
            steps = replica.chunked_prefill_steps(shape.input_tail, chunk)
            extra = chunk_extra_s(replica, chunk)
            for share in TTFT_SHARES:
                budget = share * shape.ttft_s / steps
                if held is None or held > budget:
                    shorter.add(min(step, budget - extra))
        candidates = {step} | {snap_down(s) for s in shorter if s > 0}
        points += [OperatingPoint(role, s, chunk, held) for s in sorted(candidates)]
        if role == "colocated" and shape.ttft_s is not None:
            # or hold the chunk steps themselves to the share: a TPOT tighter than the class's
            # buys its TTFT, as a tighter class's point would
            for share in TTFT_SHARES:
                budget = snap_down(share * shape.ttft_s / steps)
                if held is None or budget < held:
                    fitting = throughput_step_s(replica, role, chunk, shape, limits, budget)
                    points.append(OperatingPoint(role, min(fitting, budget), chunk, budget))
    return points


def best_throughput(
    replica: Replica,
    role: str,
    shape: RequestShape,
    chunks: list[int],
    limits: Limits,
    pool_size: int = 1,
) -> Throughput | None:
    """Highest request rate per replica, in a pool of `pool_size` like it, among points that
    meet the class's targets (a larger pool shares its prefill queue: perf/queueing.py)."""
    best = None
    for op in candidate_points(replica, role, shape, chunks, limits):
        caps = capacity(replica, op, limits)
        if not caps or ineligibility(replica, op, shape, limits) is not None:
            continue
        margins = with_latency_margins(
            replica, op, {"class": shape}, limits, caps, {"class": usage(replica, op, shape)}
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
