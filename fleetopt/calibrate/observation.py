"""One measured serving throughput and the cost model's prediction of it.

A measurement is output tokens/s per GPU of one replica configuration at fixed mean lengths,
optionally under latency limits (MLPerf Server, a benchmark run at a measured TPOT) and an engine
batch limit. The prediction is what the planner itself would rely on: the best operating point
of one replica for that single class (`best_throughput`), so fitting to it calibrates the program.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fleetopt.catalog import Gpu, Model, gpu_catalog, model_catalog
from fleetopt.errors import InputError
from fleetopt.instance import Efficiency, Serving
from fleetopt.perf.operating_point import Limits, RequestShape
from fleetopt.perf.replica import ACTIVATION_RESERVE_GB, Replica
from fleetopt.perf.throughput import best_throughput

CHUNKS = [256, 512, 1024, 2048, 4096, 8192, 16384]
"""Chunk budgets a measured engine may have used: the prediction takes the best of them."""
BATCH_RULES = ("trtllm-bench",)
"""Engine rules that set the batch and per-step token limits from the benchmark's lengths."""


@dataclass(frozen=True)
class Observation:
    model: str
    gpu: str
    tensor_parallel: int
    weight_dtype: str
    kv_dtype: str
    input_tokens: float
    output_tokens: float
    output_tokens_per_s_per_gpu: float
    ttft_ms: float | None = None
    tpot_ms: float | None = None
    max_num_seqs: int = 256
    label: str = ""
    kv_cache_free_fraction: float | None = None
    """TensorRT-LLM's rule for its KV cache: this share of the memory left after the weights
    and the activation reserve (`--kv_cache_free_gpu_mem_fraction`); None: the planner's rule,
    a share of all memory (`gpu_memory_utilization`, vLLM's)."""
    engine_name: str = ""
    """The engine and version that ran it (the `engine` column)."""
    closed_loop: bool = False
    """The run kept `max_num_seqs` requests in flight, each sent when one finished (a fixed
    client concurrency). Its TPOT is an outcome of that batch, not a limit the engine chose
    its batch by: the prediction is the throughput with that many in flight, and no margins
    for random arrivals (no request waits for a slot)."""
    batch_rule: str | None = None
    """'trtllm-bench': the batch and per-step token limits are what `trtllm-bench` derives
    from the dataset's lengths (`trtllm_bench_settings`), not `max_num_seqs`."""

    def shape(self) -> RequestShape:
        return RequestShape(
            self.input_tokens,
            self.output_tokens,
            self.input_tokens,
            self.output_tokens,
            None if self.ttft_ms is None or self.closed_loop else self.ttft_ms / 1e3,
            None if self.tpot_ms is None or self.closed_loop else self.tpot_ms / 1e3,
            mean_tpot=True,  # a run's TPOT is the mean of its steps
        )

    def engine(self, replica: Replica) -> tuple[Limits, list[int]]:
        """Engine limits of a saturated benchmark, and the prefill chunks it may have used.
        Prefill may use all its compute, the batch is bounded by the engine's stated limit (or
        its rule), the KV cache by the engine's memory rule — given as the share of all memory
        that leaves the same KV cache. Under trtllm-bench's `max_num_tokens` a step holds the
        decode batch and the prompt chunk together, so a chunk takes at most what a full batch
        leaves (and never less than the smallest chunk)."""
        seqs, chunks = self.max_num_seqs, CHUNKS
        memory = self.memory_utilization(replica)
        if self.batch_rule == "trtllm-bench":
            seqs, tokens = self.trtllm_bench_settings(replica)
            room = max(tokens - seqs, CHUNKS[0])
            chunks = [c for c in CHUNKS if c <= room]
            # GUARANTEED_NO_EVICT, its default: a request starts only when the KV of its whole
            # sequence is free, so no more run at once than the cache holds whole.
            whole = replica.kv_capacity_tokens(memory) / (self.input_tokens + self.output_tokens)
            seqs = max(1, min(seqs, math.floor(whole)))
        return Limits(1.0, seqs, memory), chunks

    def trtllm_bench_settings(self, replica: Replica) -> tuple[int, int]:
        """(max_batch_size, max_num_tokens) as `trtllm-bench build` sets them (TensorRT-LLM
        tensorrt_llm/bench/build/tuning.py, `calc_engine_setting` / `finetune_setting`): the
        requests whose whole sequence (input + output) fits the KV cache — 0.95 of the memory
        left after the weights — capped at 4096 and rounded up; tokens per step that batch
        times (1 + input/output), capped at 32768, rounded up, at least 2048."""
        free = replica.tp * replica.gpu.spec.memory_gb * 1e9 - replica.weight_bytes
        fraction = 0.95 if self.kv_cache_free_fraction is None else self.kv_cache_free_fraction
        sequence = replica.kv_footprint_per_token * (self.input_tokens + self.output_tokens)
        raw_batch = min(max(fraction * free, 0.0) / sequence, 4096.0)
        raw_tokens = min(raw_batch * (1 + self.input_tokens / self.output_tokens), 32768.0)
        step = 32 if raw_batch < 256 else 128 if raw_batch < 1024 else 256
        batch = max(64, step * math.ceil(raw_batch / step))
        step = 256 if raw_tokens < 4096 else 512 if raw_tokens < 8192 else 1024
        tokens = max(2048, step * math.ceil(raw_tokens / step))
        return batch, tokens

    def memory_utilization(self, replica: Replica) -> float:
        default = Serving().gpu_memory_utilization
        if self.kv_cache_free_fraction is None:
            return default
        total = replica.tp * replica.gpu.spec.memory_gb * 1e9
        reserve = replica.tp * ACTIVATION_RESERVE_GB * 1e9
        free = total - reserve - replica.weight_bytes
        if free <= 0:  # does not fit either way
            return default
        return (self.kv_cache_free_fraction * free + replica.weight_bytes + reserve) / total


def replica_for(obs: Observation, efficiency: Efficiency) -> Replica:
    """The observation's replica with the given efficiency factors in place of the catalog's."""
    gpus, models = gpu_catalog(), model_catalog()
    if obs.gpu not in gpus:
        raise InputError(f"unknown GPU type {obs.gpu!r} (known: {', '.join(sorted(gpus))})")
    if obs.model not in models:
        raise InputError(f"unknown model {obs.model!r} (known: {', '.join(sorted(models))})")
    spec = gpus[obs.gpu].model_copy(update={"efficiency": efficiency})
    model = Model(obs.model, models[obs.model], obs.weight_dtype, obs.kv_dtype)
    return Replica(model, Gpu(obs.gpu, spec, None, None), obs.tensor_parallel)


def prediction(obs: Observation, efficiency: Efficiency) -> tuple[float, float | None]:
    """Predicted output tokens/s per GPU (0 where no operating point meets the limits) and, for
    a closed-loop run, its mean TPOT in ms: the mean step with its requests in flight (the step
    budget the prediction's batch fills, on the budgets' 1.1 grid, or the host's time for that
    batch where it is longer). Other runs' TPOT is a limit, not an outcome: None."""
    shape = obs.shape()
    replica = replica_for(obs, efficiency).at_walk(shape.walk_tokens)
    limits, chunks = obs.engine(replica)
    best = best_throughput(replica, "colocated", shape, chunks, limits)
    if best is None:
        return 0.0, None
    tpot_ms = None
    if obs.closed_loop:  # a step lasts at least its batch's host time (`host_s_per_token`)
        tpot_ms = max(best.op.step_s, obs.max_num_seqs * replica.host_s_per_token) * 1e3
    return best.output_tokens_per_s(shape) / obs.tensor_parallel, tpot_ms


def predict(obs: Observation, efficiency: Efficiency) -> float:
    """Predicted output tokens/s per GPU (0 where no operating point meets the limits)."""
    return prediction(obs, efficiency)[0]


def relative_error(obs: Observation, efficiency: Efficiency) -> float:
    """predicted / measured − 1."""
    return predict(obs, efficiency) / obs.output_tokens_per_s_per_gpu - 1
