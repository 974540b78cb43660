"""Best throughput of one replica for one request class: the capacity calculator's core.

The same operating points and coefficients the program uses, maximised for a single class, so a
prediction compared with a measurement tests exactly what the planner would rely on.
"""

from __future__ import annotations

from dataclasses import dataclass

from fleetopt.perf.operating_point import (
    Limits,
    OperatingPoint,
    RequestShape,
    capacity,
    ineligibility,
    max_rate,
    prefill_step_s,
    throughput_step_s,
    usage,
)
from fleetopt.perf.replica import Replica


@dataclass(frozen=True)
class Throughput:
    requests_per_s: float
    op: OperatingPoint
    limited_by: str

    def output_tokens_per_s(self, shape: RequestShape) -> float:
        return self.requests_per_s * shape.output_mean


def candidate_points(
    replica: Replica, role: str, shape: RequestShape, chunks: list[int], limits: Limits
) -> list[OperatingPoint]:
    """Prefill: one point per chunk. Decode / colocated: per chunk, the step of the class's best
    throughput, shortened to its TPOT target and to the longest step its TTFT allows. The rate
    rises with the step up to the best throughput and falls after it, so within the targets
    this is the class's best point for that chunk."""
    if role == "prefill":
        return [OperatingPoint(role, prefill_step_s(replica, c), c) for c in sorted(set(chunks))]
    points = []
    for chunk in [0] if role == "decode" else sorted(set(chunks)):
        step = throughput_step_s(replica, role, chunk, shape, limits)
        if shape.tpot_s is not None:
            step = min(step, shape.tpot_s)
        if role == "colocated" and shape.ttft_s is not None:
            steps = replica.chunked_prefill_steps(shape.input_tail, chunk)
            step = min(step, shape.ttft_s / steps)
        points.append(OperatingPoint(role, step, chunk))
    return points


def best_throughput(
    replica: Replica, role: str, shape: RequestShape, chunks: list[int], limits: Limits
) -> Throughput | None:
    """Highest request rate of one replica among points that meet the class's targets."""
    best = None
    for op in candidate_points(replica, role, shape, chunks, limits):
        caps = capacity(replica, op, limits)
        if not caps or ineligibility(replica, op, shape, limits) is not None:
            continue
        rate, binding = max_rate(caps, usage(replica, op, shape))
        if best is None or rate > best.requests_per_s:
            best = Throughput(rate, op, binding)
    return best
