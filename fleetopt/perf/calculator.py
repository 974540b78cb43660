"""`fleetopt perf`: what one replica delivers for one request shape, and what limits it."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

from fleetopt.perf.operating_point import (
    BATCH,
    DECODE_COMPUTE,
    DECODE_MEMORY,
    KV,
    KV_IN,
    KV_OUT,
    PREFILL,
    Limits,
    RequestShape,
    latency,
)
from fleetopt.perf.replica import Replica
from fleetopt.perf.throughput import best_throughput

BOUND_NAMES = {
    PREFILL: "compute",
    DECODE_COMPUTE: "compute",
    DECODE_MEMORY: "memory bandwidth",
    BATCH: "batch limit",
    KV: "KV capacity",
    KV_OUT: "interconnect",
    KV_IN: "interconnect",
}


@dataclass(frozen=True)
class ReplicaCapacity:
    model: str
    gpu: str
    tensor_parallel: int
    role: str
    input_tokens: float
    output_tokens: float
    requests_per_s: float
    prefill_tokens_per_s: float
    output_tokens_per_s: float
    output_tokens_per_s_per_gpu: float
    concurrent_sequences: float
    kv_capacity_tokens: float
    ttft_ms: float | None
    tpot_ms: float | None
    step_ms: float
    chunk_tokens: int
    limited_by: str
    step_breakdown_ms: dict[str, float]
    pool_size: int = 1
    """Replicas sharing the prefill queue: the figures are per replica of such a pool."""

    def to_dict(self) -> dict:
        return asdict(self)


def replica_capacity(
    replica: Replica,
    role: str,
    shape: RequestShape,
    chunks: list[int],
    limits: Limits,
    pool_size: int = 1,
) -> ReplicaCapacity | None:
    """Best operating point within the shape's targets, per replica of a pool of `pool_size`
    (None: no point meets them)."""
    best = best_throughput(replica, role, shape, chunks, limits, pool_size)
    if best is None:
        return None
    op, rate = best.op, best.requests_per_s
    decodes = op.does_decode
    seqs = rate * shape.output_mean * op.step_s if decodes else 0.0
    breakdown = _breakdown(replica, op.chunk_tokens, seqs, seqs * shape.decode_context)
    limited_by = BOUND_NAMES[best.limited_by]
    free = best_throughput(
        replica, role, replace(shape, ttft_s=None, tpot_s=None), chunks, limits, pool_size
    )
    if free is not None and free.requests_per_s > rate * (1 + 1e-9):
        tpot_bound = decodes and shape.tpot_s is not None and op.step_s >= shape.tpot_s * (1 - 1e-9)
        limited_by = "latency target (TPOT)" if tpot_bound else "latency target (TTFT)"
    elif limited_by in ("compute", "memory bandwidth") and breakdown["allreduce"] > max(
        breakdown["memory"], breakdown["compute"]
    ):
        limited_by = "interconnect"
    lat = latency(replica, op, shape)
    output = rate * shape.output_mean if decodes else 0.0
    return ReplicaCapacity(
        model=replica.model.name,
        gpu=replica.gpu.name,
        tensor_parallel=replica.tp,
        role=role,
        input_tokens=shape.input_mean,
        output_tokens=shape.output_mean,
        requests_per_s=rate,
        prefill_tokens_per_s=rate * shape.input_mean if op.does_prefill else 0.0,
        output_tokens_per_s=output,
        output_tokens_per_s_per_gpu=output / replica.tp,
        concurrent_sequences=seqs,
        kv_capacity_tokens=replica.kv_capacity_tokens(limits.gpu_memory_utilization),
        ttft_ms=None if lat.ttft_s is None else lat.ttft_s * 1e3,
        tpot_ms=None if lat.tpot_s is None else lat.tpot_s * 1e3,
        step_ms=op.step_s * 1e3,
        chunk_tokens=op.chunk_tokens,
        limited_by=limited_by,
        step_breakdown_ms=breakdown,
        pool_size=pool_size,
    )


def _breakdown(replica: Replica, chunk: int, seqs: float, context: float) -> dict[str, float]:
    """The parts of one step at the point, ms: what the step time is spent on. `memory` and
    `compute` are the two sides of the roofline, each with decode attention in it
    (docs/cost-model.md); `attention` says how much that is."""
    parts = replica.step_parts(
        decode_seqs=seqs, decode_context_tokens=context, prefill_tokens=chunk
    )
    breakdown = {
        "fixed": parts.fixed_s * 1e3,
        "memory": parts.memory_s * 1e3,
        "compute": parts.compute_s * 1e3,
        "allreduce": parts.allreduce_s * 1e3,
    }
    breakdown["attention"] = context * replica.context_s_per_token * 1e3
    return breakdown
