"""One replica of a model on `tp` GPUs of one type: memory, and the parts of an engine step's time.

The step model is a sum of its kernels' times (docs/cost-model.md, "One engine step"): the weight
read, the matmuls, decode attention and the all-reduce run one after the other, none hidden
under another:

    step = fixed + weights + matmuls + attention + all-reduce
    weights   = weight bytes / (tp · HBM bandwidth · eff_memory)
    matmuls   = (2 · active params · tokens + prefill attention FLOPs) / (tp · peak FLOP/s · eff_compute)
    attention = context tokens · max(KV bytes / (bandwidth at eff_attention), attention FLOPs / FLOP/s)
    all-reduce = tokens · per-token all-reduce time        (zero at tp = 1)
    fixed     = step overhead + layers · layer overhead + 2 · layers · all-reduce latency
                + layers · attention latency · longest context     (the longest sequence's walk)

A roofline would overlap the weight read with the matmuls (max instead of sum); the measured
max-load rows fit the sum far better (docs/cost-model.md, "Tried"). Every term but the weight
read and the fixed time is linear in the tokens of the step, which is what lets the program hold
the step-time limit with one linear row. The walk is fixed for a replica: it is the longest
context the replica's sequences hold (`walk_tokens`, the context level of its configs). The
host's work per sequence runs beside the step, not in it (`host_s_per_token`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import cached_property

from fleetopt.catalog import Gpu, Model
from fleetopt.instance import Efficiency, GpuSpec, ModelSpec
from fleetopt.perf.efficiency import efficiency_for, factor, moe_share

BYTES_PER_VALUE = {"bf16": 2.0, "fp8": 1.0, "int4": 0.5, "fp4": 0.5625}
"""Bytes a stored value takes (fleetopt/dtypes.py); NVFP4's 4.5 bits are a 4-bit value and its
share of a block of 16's FP8 scale (NVIDIA, "Introducing NVFP4", 2025)."""

ACTIVATION_BYTES = 2.0  # all-reduce payloads are bf16 activations
ALLREDUCE_LATENCY_S = {"nvlink": 8e-6, "infinity-fabric": 12e-6, "pcie": 25e-6}
"""Latency of one small all-reduce (NCCL / custom all-reduce, order of magnitude; docs/cost-model.md),
unless the factors carry a fitted one (`Efficiency.allreduce_latency_us`)."""
ACTIVATION_RESERVE_GB = 2.0
"""Per-GPU memory held back for activations, CUDA graphs and the allocator (vLLM profiles ~1-4 GB)."""


def allreduce_latency_s(efficiency: Efficiency, spec: GpuSpec) -> float:
    """One small all-reduce's latency: the fitted one, else the fabric's figure."""
    fitted = efficiency.allreduce_latency_us
    return ALLREDUCE_LATENCY_S[spec.interconnect] if fitted is None else fitted / 1e6


def tensor_cores(spec: GpuSpec, weight_dtype: str) -> str:
    """The format a weight format's matmuls run in: FP8 (FP4) weights on FP8 (FP4) tensor
    cores where the GPU has them; INT4 weights, and FP8 or FP4 ones elsewhere, are dequantised
    to BF16 (weight-only, as vLLM's Marlin kernels run them)."""
    if weight_dtype == "fp8" and spec.fp8_tflops is not None:
        return "fp8"
    if weight_dtype == "fp4" and spec.fp4_tflops is not None:
        return "fp4"
    return "bf16"


@dataclass(frozen=True)
class StepParts:
    fixed_s: float
    weights_s: float
    matmul_s: float
    attention_s: float
    allreduce_s: float

    @property
    def total_s(self) -> float:
        return self.fixed_s + self.weights_s + self.matmul_s + self.attention_s + self.allreduce_s


def kv_bytes_per_token(spec: ModelSpec, kv_dtype: str) -> float:
    """KV cache bytes one token holds across all layers (MLA: the latent plus the rope key)."""
    size = BYTES_PER_VALUE[kv_dtype]
    if spec.kv_lora_rank is not None:
        return spec.layers * (spec.kv_lora_rank + (spec.qk_rope_head_dim or 0)) * size
    return 2 * spec.layers * spec.kv_heads * spec.head_dim * size


@dataclass(frozen=True)
class Replica:
    model: Model
    gpu: Gpu
    tp: int
    walk_tokens: float = 0.0
    """The longest context a sequence on this replica holds (a config's context level): where
    decode attention walks each sequence's context alone (`attention_latency_ns`), every step
    lasts at least that walk."""

    @cached_property
    def efficiency(self):
        return efficiency_for(self.gpu)

    # --- memory -----------------------------------------------------------------------------

    @cached_property
    def weight_bytes(self) -> float:
        return self.model.spec.params_b * 1e9 * BYTES_PER_VALUE[self.model.weight_dtype]

    @cached_property
    def kv_bytes_per_token(self) -> float:
        """Bytes of one token's KV cache: what a disaggregated prefill ships to decode."""
        return kv_bytes_per_token(self.model.spec, self.model.kv_dtype)

    @cached_property
    def kv_replication(self) -> float:
        """Copies of each KV head across the tp GPUs: heads split over tp while there are enough
        (GQA with tp > kv_heads replicates them); an MLA latent is held whole by every GPU."""
        spec = self.model.spec
        if spec.kv_lora_rank is not None:
            return float(self.tp)
        return max(1.0, self.tp / spec.kv_heads)

    @cached_property
    def kv_footprint_per_token(self) -> float:
        """HBM one token of context occupies (and is read every decode step) across the replica."""
        return self.kv_bytes_per_token * self.kv_replication

    def kv_capacity_bytes(self, memory_utilization: float) -> float:
        """HBM left for the KV cache across the replica; <= 0 means the model does not fit."""
        usable = self.tp * (self.gpu.spec.memory_gb * memory_utilization - ACTIVATION_RESERVE_GB)
        return usable * 1e9 - self.weight_bytes

    def kv_capacity_tokens(self, memory_utilization: float) -> float:
        return max(0.0, self.kv_capacity_bytes(memory_utilization)) / self.kv_footprint_per_token

    # --- rates ------------------------------------------------------------------------------

    @cached_property
    def flops_per_s(self) -> float:
        """Achieved FLOP/s of the replica at the tensor-core format its weights compute in."""
        spec, cores = self.gpu.spec, tensor_cores(self.gpu.spec, self.model.weight_dtype)
        peak = {"bf16": spec.bf16_tflops, "fp8": spec.fp8_tflops, "fp4": spec.fp4_tflops}[cores]
        share = (
            factor(self.efficiency, "fp4_compute") if cores == "fp4" else self.efficiency.compute
        )
        return self.tp * peak * 1e12 * share * self.moe_share

    @cached_property
    def bytes_per_s(self) -> float:
        return self.tp * self.gpu.spec.hbm_tb_s * 1e12 * self.efficiency.memory * self.moe_share

    @cached_property
    def moe_share(self) -> float:
        """1 for a dense model; an MoE model's replicas reach less of both peaks."""
        if self.model.spec.num_experts is None:
            return 1.0
        return moe_share(self.efficiency, self.tp)

    @cached_property
    def weight_read_s(self) -> float:
        """Time to stream the weights once: the floor of every step."""
        return self.weight_bytes / self.bytes_per_s

    @property
    def floor_s(self) -> float:
        """What every decode step takes before its batch: the fixed time and the weight read."""
        return self.fixed_s + self.weight_read_s

    @cached_property
    def kv_read_s_per_token(self) -> float:
        share = factor(self.efficiency, "attention_memory")
        return self.kv_footprint_per_token / self.bytes_per_s * self.efficiency.memory / share

    @cached_property
    def linear_s_per_token(self) -> float:
        """Matmul time of one token through the active parameters."""
        return 2 * self.model.spec.active_params_b * 1e9 / self.flops_per_s

    @cached_property
    def attention_s_per_pair(self) -> float:
        """Attention time of one (query token, context token) pair: QK and AV, 2 FLOPs each."""
        spec = self.model.spec
        return 4 * spec.layers * spec.q_heads * spec.head_dim / self.flops_per_s

    @cached_property
    def allreduce_s_per_token(self) -> float:
        """Ring all-reduce of one token's activations, twice per layer; zero at tp = 1."""
        if self.tp == 1:
            return 0.0
        spec = self.model.spec
        payload = 2 * spec.layers * spec.hidden * ACTIVATION_BYTES * 2 * (self.tp - 1) / self.tp
        bandwidth = self.gpu.spec.interconnect_gb_s * 1e9 * self.efficiency.interconnect
        return payload / bandwidth

    @cached_property
    def fixed_s(self) -> float:
        latency = 0.0
        if self.tp > 1:
            latency = 2 * self.model.spec.layers * self.allreduce_latency_s
        per_layer = factor(self.efficiency, "layer_overhead_us") * 1e-6 * self.model.spec.layers
        walk = self.walk_tokens * self.walk_s_per_token
        return self.efficiency.step_overhead_ms / 1e3 + per_layer + latency + walk

    @property
    def allreduce_latency_s(self) -> float:
        return allreduce_latency_s(self.efficiency, self.gpu.spec)

    @cached_property
    def kv_transfer_bytes_per_s(self) -> float:
        """Scale-out bandwidth of the replica for prefill-to-decode KV transfer."""
        return self.tp * self.gpu.spec.network_gb_s * 1e9 * self.efficiency.interconnect

    # --- per-token costs of one request class -------------------------------------------------

    def prefill_s_per_token(self, prompt_tokens: float) -> float:
        """Compute time per prompt token, attention included (causal: mean context L/2)."""
        return self.linear_s_per_token + self.attention_s_per_pair * prompt_tokens / 2

    def prompt_compute_s(self, prompt_tokens: float) -> float:
        """Compute time of a whole prompt, attention included."""
        return prompt_tokens * self.prefill_s_per_token(prompt_tokens)

    def mean_prompt_compute_s(self, mean_tokens: float, cv2: float) -> float:
        """Mean compute time of prompts whose lengths have this mean and squared coefficient of
        variation. Attention grows a prompt's compute as L²/2 per token pair, so spread prompts
        cost more than the mean one: E[f(L)] = f(μ) + a·Var(L)/2, exact for the roofline's
        quadratic f (a measured prefill curve takes the roofline's a for the spread)."""
        variance = cv2 * mean_tokens**2
        return self.prompt_compute_s(mean_tokens) + self.attention_s_per_pair * variance / 2

    @cached_property
    def context_s_per_token(self) -> float:
        """Decode attention time per context token: its own kernel after the matmuls, bound by
        the KV read or, where one KV value serves many query heads (an MLA latent), by its
        FLOPs."""
        return max(self.kv_read_s_per_token, self.attention_s_per_pair)

    @cached_property
    def host_s_per_token(self) -> float:
        """Host time per decoded token (sampling, detokenisation), spent while the GPUs run
        the step: a step lasts at least its sequences' host time, so below saturation the
        host hides under the step, and a replica decodes at most 1/this tokens per second."""
        return factor(self.efficiency, "sequence_overhead_us") * 1e-6

    @cached_property
    def walk_s_per_token(self) -> float:
        """Time the longest sequence's attention walk takes per context token, all layers."""
        return factor(self.efficiency, "attention_latency_ns") * 1e-9 * self.model.spec.layers

    def at_walk(self, walk_tokens: float) -> Replica:
        """This replica with its sequences' longest context at `walk_tokens`."""
        return replace(self, walk_tokens=walk_tokens)

    def decode_s_per_token(self, context_tokens: float) -> float:
        """What one decode sequence of this context adds to a step (its matmuls and attention;
        the weights are read once per step, whatever the batch)."""
        return self.linear_s_per_token + self.context_s_per_token * context_tokens

    # --- whole steps --------------------------------------------------------------------------

    def step_parts(
        self,
        decode_seqs: float = 0.0,
        decode_context_tokens: float = 0.0,
        prefill_tokens: float = 0.0,
        prefill_compute_s: float | None = None,
    ) -> StepParts:
        """The parts of one engine step: `decode_seqs` sequences holding `decode_context_tokens`
        in all, plus `prefill_tokens` prompt tokens (whose compute time may be given, attention
        included)."""
        if prefill_compute_s is None:
            prefill_compute_s = prefill_tokens * self.linear_s_per_token
        return StepParts(
            fixed_s=self.fixed_s,
            weights_s=self.weight_read_s,
            matmul_s=decode_seqs * self.linear_s_per_token + prefill_compute_s,
            attention_s=decode_context_tokens * self.context_s_per_token,
            allreduce_s=(decode_seqs + prefill_tokens) * self.allreduce_s_per_token,
        )

    def step_s(self, **load: float) -> float:
        """Time of one engine step (see `step_parts` for the load)."""
        return self.step_parts(**load).total_s

    def prefill_s(self, prompt_tokens: float) -> float:
        """Time to prefill one prompt alone, in one step."""
        return self.step_s(
            prefill_tokens=prompt_tokens,
            prefill_compute_s=self.prompt_compute_s(prompt_tokens),
        )

    def chunk_compute_s(self, chunk_tokens: int) -> float:
        """Compute time of a prefill chunk of this many tokens: the most a step gives prompts."""
        return chunk_tokens * self.linear_s_per_token

    def chunked_prefill_steps(self, prompt_tokens: float, chunk_tokens: int) -> int:
        """Steps a prompt takes when each step gives it the chunk's compute time, and no fewer
        than its chunks (the roofline's prompt time alone ensures that; measured curves not)."""
        per_step = self.chunk_compute_s(chunk_tokens)
        need = self.prompt_compute_s(prompt_tokens) / per_step
        return max(1, math.ceil(need), math.ceil(prompt_tokens / chunk_tokens))

    def kv_transfer_s(self, prompt_tokens: float) -> float:
        return prompt_tokens * self.kv_bytes_per_token / self.kv_transfer_bytes_per_s
