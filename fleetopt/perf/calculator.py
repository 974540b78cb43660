"""`fleetopt perf`: what one replica delivers for one request shape, and what limits it."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

from fleetopt.perf.operating_point import (
    BATCH,
    DECODE_STEP,
    HOST,
    KV,
    KV_IN,
    KV_OUT,
    LONGEST_STEP,
    PREFILL,
    Limits,
    OperatingPoint,
    RequestShape,
    latency,
    memory_blocker,
    prompt_ttft_s,
    weights_blocker,
)
from fleetopt.perf.replica import Replica
from fleetopt.perf.throughput import best_throughput

BOUND_NAMES = {
    PREFILL: "compute",
    LONGEST_STEP: "latency target (TPOT)",
    BATCH: "batch limit",
    KV: "KV capacity",
    KV_OUT: "interconnect",
    KV_IN: "interconnect",
    HOST: "host",
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
    prompt_tokens = op.chunk_tokens  # a prefill replica's step: a full chunk
    if op.role == "colocated":  # its mean step: the prompts' share of one
        prompt_tokens = rate * shape.input_mean * op.step_s
    elif op.role == "decode":
        prompt_tokens = 0
    breakdown = _breakdown(replica, shape, prompt_tokens, seqs)
    if best.limited_by == DECODE_STEP:
        limited_by = _largest_part(replica, breakdown)
    else:
        limited_by = BOUND_NAMES[best.limited_by]
    free = best_throughput(
        replica, role, replace(shape, ttft_s=None, tpot_s=None), chunks, limits, pool_size
    )
    lat = latency(replica, op, shape)
    if free is not None and free.requests_per_s > rate * (1 + 1e-9):
        tpot = lat.tpot_s is not None and shape.tpot_s is not None
        tpot_bound = tpot and lat.tpot_s >= shape.tpot_s * (1 - 1e-9)
        if tpot_bound:
            limited_by = "latency target (TPOT)"
        elif shape.ttft_s is not None:
            limited_by = "latency target (TTFT)"
        else:  # a TPOT alone: its admission queue keeps slots free (docs/latency.md)
            limited_by = "admission headroom (slots kept free for the TPOT's requests)"
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


def why_none(
    replica: Replica,
    role: str,
    shape: RequestShape,
    chunks: list[int],
    limits: Limits,
    pool_size: int = 1,
) -> str:
    """Why `replica_capacity` found no point, with the fix (its flags): the weights, one
    sequence's KV, or the latency limit that no point meets and the best the replica does."""
    if blocker := weights_blocker(replica, limits):
        return f"its {blocker.message}; fix: raise --tp" + (
            ", or a smaller --weight-dtype" if replica.model.weight_dtype != "fp4" else ""
        )
    if blocker := memory_blocker(replica, shape, role != "prefill", limits):
        return f"its {blocker.message}; fix: raise --tp" + (
            ", or --kv-dtype fp8" if replica.model.kv_dtype == "bf16" else ""
        )
    freeing = [  # the limits without which some point would carry the request
        flag
        for flag, relaxed in (
            ("--ttft-ms", replace(shape, ttft_s=None)),
            ("--tpot-ms", replace(shape, tpot_s=None)),
        )
        if best_throughput(replica, role, relaxed, chunks, limits, pool_size) is not None
    ]
    if role != "decode" and shape.ttft_s is not None and "--tpot-ms" not in freeing:
        fastest = min(  # an idle replica: every step at its floor plus the chunk
            prompt_ttft_s(
                replica, OperatingPoint(role, replica.floor_s, c), shape, shape.input_tail
            )
            for c in chunks
        )
        return (
            f"no operating point meets --ttft-ms {shape.ttft_s * 1e3:,.0f}: a "
            f"{shape.input_tail:,.0f}-token prompt's first token takes at least "
            f"{fastest * 1e3:,.1f} ms even on an idle replica (the step in progress and its own "
            "chunk steps); fix: raise --ttft-ms"
        )
    if role != "prefill" and shape.tpot_s is not None and "--ttft-ms" not in freeing:
        chunk = min(chunks) if role == "colocated" else 0
        fastest = replica.step_s(
            decode_seqs=1,
            decode_context_tokens=shape.longest_sequence(True),
            prefill_tokens=chunk,
            prefill_compute_s=replica.chunk_compute_s(chunk) if chunk else 0.0,
        )
        beside = f" beside a {chunk:,}-token prompt chunk" if chunk else ""
        return (
            f"no operating point meets --tpot-ms {shape.tpot_s * 1e3:,.1f}: a step of one "
            f"sequence{beside} takes {fastest * 1e3:,.1f} ms; fix: raise --tpot-ms"
        )
    return "no operating point meets --ttft-ms and --tpot-ms together; fix: raise either"


def _breakdown(
    replica: Replica, shape: RequestShape, prompt_tokens: float, seqs: float
) -> dict[str, float]:
    """The parts of one step at the point, ms, which sum to it (docs/cost-model.md): on a
    colocated replica the mean step, carrying the prompts' share of a chunk."""
    parts = replica.step_parts(
        decode_seqs=seqs,
        decode_context_tokens=seqs * shape.decode_context,
        prefill_tokens=prompt_tokens,
        prefill_compute_s=prompt_tokens * shape.prompt_s(replica) / shape.input_mean,
    )
    return {
        "fixed": parts.fixed_s * 1e3,
        "weights": parts.weights_s * 1e3,
        "matmuls": parts.matmul_s * 1e3,
        "attention": parts.attention_s * 1e3,
        "allreduce": parts.allreduce_s * 1e3,
    }


def _largest_part(replica: Replica, breakdown: dict[str, float]) -> str:
    """What a step-bound point spends most of its step on: reading weights and KV (memory
    bandwidth), the matmuls (compute: attention too where its FLOPs take longer than its
    KV read), or the all-reduce (interconnect)."""
    attention_reads = replica.kv_read_s_per_token >= replica.attention_s_per_pair
    memory = breakdown["weights"] + (breakdown["attention"] if attention_reads else 0.0)
    compute = breakdown["matmuls"] + (0.0 if attention_reads else breakdown["attention"])
    parts = {"memory bandwidth": memory, "compute": compute, "interconnect": breakdown["allreduce"]}
    return max(parts, key=parts.get)
