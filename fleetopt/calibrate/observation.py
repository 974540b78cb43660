"""One measured serving throughput and the cost model's prediction of it.

A measurement is output tokens/s per GPU of one replica configuration at fixed mean lengths,
optionally under latency limits (MLPerf Server, a benchmark run at a measured TPOT) and an engine
batch limit. The prediction is what the planner itself would rely on: the best operating point
of one replica for that single class (`best_throughput`), so fitting to it calibrates the program.
"""

from __future__ import annotations

from dataclasses import dataclass

from fleetopt.catalog import Gpu, Model, gpu_catalog, model_catalog
from fleetopt.errors import InputError
from fleetopt.instance import Efficiency, Serving
from fleetopt.perf.operating_point import Limits, RequestShape
from fleetopt.perf.replica import Replica
from fleetopt.perf.throughput import best_throughput

CHUNKS = [256, 512, 1024, 2048, 4096, 8192, 16384]
"""Chunk budgets a measured engine may have used: the prediction takes the best of them."""


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

    def shape(self) -> RequestShape:
        return RequestShape(
            self.input_tokens,
            self.output_tokens,
            self.input_tokens,
            self.output_tokens,
            None if self.ttft_ms is None else self.ttft_ms / 1e3,
            None if self.tpot_ms is None else self.tpot_ms / 1e3,
        )

    def limits(self) -> Limits:
        """Engine limits of a saturated benchmark: prefill may use all its compute, the batch is
        bounded by the engine's stated limit, the KV cache by the usual 0.9 of HBM."""
        return Limits(1.0, self.max_num_seqs, Serving().gpu_memory_utilization)


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


def predict(obs: Observation, efficiency: Efficiency) -> float:
    """Predicted output tokens/s per GPU (0 where no operating point meets the limits)."""
    shape = obs.shape()
    best = best_throughput(replica_for(obs, efficiency), "colocated", shape, CHUNKS, obs.limits())
    return best.output_tokens_per_s(shape) / obs.tensor_parallel if best else 0.0


def relative_error(obs: Observation, efficiency: Efficiency) -> float:
    """predicted / measured − 1."""
    return predict(obs, efficiency) / obs.output_tokens_per_s_per_gpu - 1
