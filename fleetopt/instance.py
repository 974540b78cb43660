"""The input contract: a pydantic schema of instance YAML, its loader and its JSON Schema.

Field docstrings are the documentation of the public interface; `fleetopt schema` exports them.
Units live in the field names (`_ms`, `_per_s`, `_per_gpu_hour`).
"""

from __future__ import annotations

import ast
import difflib
import inspect
import itertools
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Literal, get_args

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from fleetopt.dtypes import DTYPES
from fleetopt.errors import InputError

Dtype = Literal[DTYPES]
Role = Literal["colocated", "prefill", "decode"]
Mode = Literal["colocated", "disaggregated"]
Positive = Annotated[float, Field(gt=0)]


def _addressable(name: str) -> str:
    if not name.strip() or "[" in name or "]" in name:
        raise ValueError(
            f"{name!r} cannot be addressed in a field path (`workloads[NAME]`, `gpus[TYPE]`: "
            "sweep --set, pareto); give a name that is not blank and has no square brackets"
        )
    return name


Name = Annotated[str, AfterValidator(_addressable)]
"""A name the field paths of `sweep --set` and `pareto` can address (`workloads[NAME].slo`)."""


class Strict(BaseModel):
    # Fields are documented by the string under each; `json_schema` reads them when asked
    # (pydantic's `use_attribute_docstrings` read every model's source as this module loaded:
    # 50 ms of each command's start).
    model_config = ConfigDict(extra="forbid", frozen=True)


class TokenDistribution(Strict):
    """Token lengths of a request class. The mean sizes throughput; the percentile matching the
    SLO percentile sizes latency (the nearest higher one given, else `max`, else the mean)."""

    mean: Positive
    """Mean length, tokens: sizes throughput (tokens/s per request/s)."""
    min: Positive | None = None
    """Shortest length, tokens. Sets the TPOT of the shortest answers on a disaggregated decode
    pool, where a sequence joins a step already running; absent with percentiles given = as
    short as 2 tokens (1 for a prompt), absent with a plain mean = the mean."""
    p50: Positive | None = None
    """Median length, tokens; absent = not stated."""
    p90: Positive | None = None
    """90th-percentile length, tokens; absent = not stated."""
    p99: Positive | None = None
    """99th-percentile length, tokens; absent = not stated."""
    max: Positive | None = None
    """Longest length, tokens: the latency length beyond the highest percentile given, and what
    must fit the model's max_context; absent = not stated."""

    @model_validator(mode="after")
    def _ordered(self) -> TokenDistribution:
        given = [v for v in (self.min, self.p50, self.p90, self.p99, self.max) if v is not None]
        if given != sorted(given):
            raise ValueError("percentiles must not decrease: min <= p50 <= p90 <= p99 <= max")
        if self.min is not None and self.mean < self.min:
            raise ValueError("mean must not be below min")
        if self.max is not None and self.mean > self.max:
            raise ValueError("mean must not exceed max")
        return self

    @property
    def shortest(self) -> float:
        """The shortest length to plan for: min, else the mean for a plain mean, else 2 tokens
        (a distribution with percentiles reaches down to a couple of tokens)."""
        if self.min is not None:
            return self.min
        stated = (self.p50, self.p90, self.p99, self.max)
        return self.mean if all(v is None for v in stated) else min(2.0, self.mean)

    @property
    def longest(self) -> float:
        """The longest length stated: max, else the highest percentile, else the mean."""
        given = [v for v in (self.max, self.p99, self.p90, self.p50) if v is not None]
        return max([self.mean, *given])

    def at_percentile(self, percentile: float) -> float:
        """Length at (or conservatively above) the given percentile."""
        for level, value in ((50, self.p50), (90, self.p90), (99, self.p99)):
            if value is not None and level >= percentile:
                return value
        return self.max if self.max is not None else self.mean


class Slo(Strict):
    """Latency targets of a request class, met at `percentile` of requests."""

    ttft_ms: Positive | None = None
    """Time to first token target, ms (prefill + queueing + KV transfer)."""
    tpot_ms: Positive | None = None
    """Time per output token target, ms (the decode step time); none binds where every
    output is one token (the first token ends the request)."""
    percentile: float = Field(99, gt=0, lt=100)
    """Share of requests, in percent, that must meet the targets."""


class Efficiency(Strict):
    """Achieved share of datasheet peaks and the fixed cost of one engine step. Defaults are fitted
    to measured serving throughput (docs/cost-model.md); calibrate them to your engine."""

    compute: float = Field(gt=0, le=1)
    """Share of peak tensor FLOP/s reached by prefill and decode matmuls (BF16 or FP8)."""
    fp4_compute: float | None = Field(None, gt=0, le=1)
    """The same for NVFP4 matmuls on FP4 tensor cores, which reach a smaller share of their
    (twice as high) peak; None: the fitted default's (docs/cost-model.md)."""
    memory: float = Field(gt=0, le=1)
    """Share of peak HBM bandwidth reached when streaming weights and KV cache."""
    attention_memory: float | None = Field(None, gt=0, le=1)
    """Share of peak HBM bandwidth reached by decode attention reading the KV cache (paged
    gathers, not one dense stream); None: the `memory` share."""
    interconnect: float = Field(gt=0, le=1)
    """Share of scale-up / scale-out bandwidth reached by all-reduce and KV transfer."""
    step_overhead_ms: float = Field(ge=0)
    """Fixed time per engine step (scheduling, sampling), ms."""
    allreduce_latency_us: float | None = Field(None, gt=0)
    """Latency of one small all-reduce at tp > 1, µs; None: the fabric's order-of-magnitude
    figure (perf/replica.py `ALLREDUCE_LATENCY_S`)."""
    layer_overhead_us: float | None = Field(None, ge=0)
    """Fixed time per layer per step (its kernels' launches and ramps, whatever the batch), µs;
    None: 0."""
    sequence_overhead_us: float | None = Field(None, ge=0)
    """Host time each decode sequence takes per step (sampling, detokenisation, scheduling),
    µs, done while the GPUs run the step: a replica decodes at most 1/this tokens per second,
    however fast its GPUs; None: 0 (no ceiling)."""
    attention_latency_ns: float | None = Field(None, ge=0)
    """Time one sequence's decode attention takes per context token per layer however few
    sequences share the step, ns: kernels that walk a sequence's context on one thread block per
    head (no split-KV, "flash decoding") leave most of a GPU idle at small batches, so a step
    lasts at least the longest sequence's walk; None: 0 (split-KV kernels)."""
    moe: float | None = Field(None, gt=0, le=1)
    """MoE models: the share of these efficiencies (compute and memory) a tp-1 replica reaches;
    None: the fitted default's (docs/cost-model.md)."""
    moe_tp_loss: float | None = Field(None, ge=0)
    """MoE models: each GPU beyond the first divides that share by 1 + moe_tp_loss · (tp − 1);
    None: the fitted default's."""


class GpuSpec(Strict):
    """A GPU type's specifications and default price; every number carries a source."""

    description: str = ""
    """Free text: the product and its variant."""
    memory_gb: Positive
    """HBM capacity per GPU, GB (1e9 bytes)."""
    hbm_tb_s: Positive
    """HBM bandwidth per GPU, TB/s."""
    bf16_tflops: Positive
    """Dense BF16 tensor TFLOP/s (no sparsity)."""
    fp8_tflops: Positive | None = None
    """Dense FP8 tensor TFLOP/s; null where the GPU has no FP8 tensor cores."""
    int8_tflops: Positive | None = None
    """Dense INT8 tensor TOP/s; null where unknown."""
    fp4_tflops: Positive | None = None
    """Dense FP4 tensor TFLOP/s; null where the GPU has no FP4 tensor cores (before Blackwell)."""
    interconnect: Literal["nvlink", "pcie", "infinity-fabric"]
    """Scale-up fabric joining the GPUs of one tensor-parallel replica."""
    interconnect_gb_s: Positive
    """Scale-up bandwidth per GPU per direction, GB/s (tensor-parallel all-reduce)."""
    max_tensor_parallel: int = Field(8, ge=1)
    """Largest tensor-parallel group inside one scale-up domain."""
    gpus_per_node: int = Field(8, ge=1)
    """GPUs in the usual server; informational (purchase granularity is set per instance)."""
    network_gb_s: Positive
    """Scale-out network bandwidth per GPU per direction, GB/s (prefill-to-decode KV transfer)."""
    price_per_gpu_hour: Positive
    """Default on-demand price, $ per GPU-hour."""
    price_date: str = ""
    """When the default price was observed."""
    efficiency: Efficiency | None = None
    """Overrides of the fitted efficiency factors for this GPU type."""
    sources: dict[str, str] = Field(default_factory=dict)
    """Where each number comes from."""


class ModelSpec(Strict):
    """A model architecture (Hugging Face config.json fields)."""

    description: str = ""
    """Free text: the model and its variant."""
    params_b: Positive
    """Total parameters, billions: what must sit in memory."""
    active_params_b: Positive
    """Parameters used per token, billions (MoE: shared + top-k experts): what costs FLOPs."""
    layers: int = Field(gt=0)
    """Transformer layers (num_hidden_layers): scale the KV cache and the all-reduces."""
    hidden: int = Field(gt=0)
    """Hidden size (hidden_size): the activations each tensor-parallel all-reduce moves."""
    q_heads: int = Field(gt=0)
    """Attention heads (num_attention_heads): attention FLOPs; tensor_parallel must divide it."""
    kv_heads: int = Field(gt=0)
    """Key/value heads (num_key_value_heads; fewer than q_heads with GQA): KV cache size. A
    tensor-parallel size above it replicates them."""
    head_dim: int = Field(gt=0)
    """Dimension of one attention head (head_dim, else hidden / q_heads)."""
    ffn: int = Field(gt=0)
    """MLP intermediate size (intermediate_size); informational (params_b sizes the weights)."""
    vocab: int = Field(gt=0)
    """Vocabulary size (vocab_size); informational."""
    max_context: int = Field(131072, gt=0)
    """Longest sequence the model accepts, tokens (input + output); a workload whose longest
    request exceeds it is an input error."""
    num_experts: int | None = Field(None, gt=0)
    """MoE: routed experts per layer; absent for a dense model. Informational (active_params_b
    carries the cost)."""
    experts_per_token: int | None = Field(None, gt=0)
    """MoE: experts each token is routed to; absent for a dense model. Informational."""
    kv_lora_rank: int | None = Field(None, gt=0)
    """MLA (DeepSeek) compressed KV latent size; replaces kv_heads*head_dim in the KV cache."""
    qk_rope_head_dim: int | None = Field(None, ge=0)
    """MLA decoupled rope key dimension, cached beside the latent."""
    source: str = ""
    """Where the architecture numbers come from (usually the config.json URL)."""


_GPU_OVERRIDES = {name: (f.annotation | None, None) for name, f in GpuSpec.model_fields.items()}
_MODEL_OVERRIDES = {name: (f.annotation | None, None) for name, f in ModelSpec.model_fields.items()}


class GpuChoice(Strict):
    """A GPU type that may be bought. Any spec field given here overrides the catalog; a type
    not in the catalog must give every required spec field."""

    type: Name
    """Catalog key (see `fleetopt catalog`), or a new name defined inline."""
    price_per_gpu_hour: Positive | None = None
    """Override of the catalog price, $ per GPU-hour."""
    max_gpus: int | None = Field(None, ge=0)
    """Availability cap: at most this many GPUs of the type."""
    gpus_per_node: int | None = Field(None, ge=1)
    """Purchase granularity: buy whole nodes of this many GPUs."""
    spec: dict | None = None
    """Inline spec fields (GpuSpec names) that override or define the GPU type."""


class ModelChoice(Strict):
    """A model to serve, with its numeric formats."""

    name: Name
    """Catalog key, or a new name whose architecture is given in `spec`."""
    weight_dtype: Dtype = "bf16"
    """Format of the weights: bf16, fp8 (FP8 compute where the GPU has it), int4 (W4A16) or
    fp4 (NVFP4: FP4 compute where the GPU has it, else W4A16)."""
    kv_dtype: Dtype = "bf16"
    """Format of the KV cache."""
    spec: dict | None = None
    """Inline architecture fields (ModelSpec names) that override or define the model."""


class LengthBin(Strict):
    """One cell of a length histogram: requests of this prompt and output length."""

    input_tokens: Positive
    """Prompt length of the cell, tokens."""
    output_tokens: Positive
    """Output length of the cell, tokens."""
    share: Positive
    """Weight of the cell: a share or a count of requests (normalised over the cells)."""


class LengthData(Strict):
    """A length mix given as data: a histogram inline, or a CSV of the same three columns."""

    histogram: list[LengthBin] | None = Field(None, min_length=1)
    """Cells of (input_tokens, output_tokens, share)."""
    csv: str | None = None
    """CSV with columns input_tokens, output_tokens, share, relative to the instance file."""

    @model_validator(mode="after")
    def _one_source(self) -> LengthData:
        if (self.histogram is None) == (self.csv is None):
            raise ValueError("give histogram or csv")
        return self


class Workload(Strict):
    """A request class: one model, one token-length mix, one rate, one SLO. The mix may be given
    as data (`trace` or `lengths`); fleetopt then splits it into length buckets, one request
    class each, routed where they are cheapest (docs/user-guide.md, "Workloads from data")."""

    model_config = ConfigDict(**Strict.model_config, populate_by_name=True)

    name: Name
    """Unique name of the class: it labels the plan, the reports and trace rows."""
    model: str
    """Name of a model in `models`."""
    requests_per_s: Positive | None = None
    """Arrival rate. Give this, or prefill_tokens_per_s and/or decode_tokens_per_s, or (with a
    trace) `rate: from_trace`."""
    prefill_tokens_per_s: Positive | None = None
    """Prompt tokens per second (rate = this / mean input tokens)."""
    decode_tokens_per_s: Positive | None = None
    """Output tokens per second (rate = this / mean output tokens)."""
    input_tokens: Positive | TokenDistribution | None = None
    """Prompt length: a mean, or {mean, p50, p90, p99, max}. Derived from `trace` or `lengths`
    when one is given."""
    output_tokens: Positive | TokenDistribution | None = None
    """Output length: a mean, or {mean, p50, p90, p99, max}. Derived from `trace` or `lengths`
    when one is given."""
    slo: Slo | None = None
    """Latency targets; absent = throughput only."""
    trace: str | None = None
    """Request log CSV, relative to the instance file: arrival time, prompt tokens, output tokens
    (columns by name, docs/latency.md "Requests"; the Azure LLM trace layout TIMESTAMP,
    ContextTokens, GeneratedTokens and BurstGPT's load as they are). Its lengths replace
    input_tokens/output_tokens and are split into `buckets`."""
    lengths: LengthData | None = None
    """Length mix as a histogram or CSV of (input_tokens, output_tokens, share), instead of
    input_tokens/output_tokens; split into `buckets`. Needs a rate."""
    rate_source: Literal["from_trace"] | None = Field(None, alias="rate")
    """`from_trace`: the rate is the trace's requests over its span (or over its busiest
    `rate_window_s`), times `rate_scale`; replaces requests_per_s."""
    rate_scale: Positive = 1.0
    """Factor on the trace's rate (`rate: from_trace`): growth, or a share of the traffic."""
    rate_window_s: Positive | None = None
    """With `rate: from_trace`: size for the busiest window of this many seconds (arrivals in
    the window / its length) instead of the mean over the span; bursty traces need it for the
    plan to hold under replay. Absent = the mean rate."""
    buckets: Literal["auto"] | Annotated[int, Field(ge=1)] | None = None
    """Length buckets to split a data-given mix into: `auto` (absent) adds buckets while each
    saves over 1% of the plan's cost, up to one per candidate boundary and one more; N = at
    most N (1 = one pool for all lengths)."""

    @model_validator(mode="before")
    @classmethod
    def _from_data(cls, data: object, info: ValidationInfo) -> object:
        """Lengths (and the rate) of a data-given mix, read relative to the instance file."""
        if not isinstance(data, dict) or not (data.get("trace") or data.get("lengths")):
            return data
        from fleetopt.workload.derive import derive_fields

        source = (info.context or {}).get("source")
        base = Path(source).parent if source else Path()
        return derive_fields(data, base)

    @model_validator(mode="after")
    def _one_rate(self) -> Workload:
        if self.input_tokens is None or self.output_tokens is None:
            raise ValueError("give input_tokens and output_tokens, or trace, or lengths")
        data_only = {
            "rate": self.rate_source,
            "rate_window_s": self.rate_window_s,
            "buckets": self.buckets,
            "rate_scale": None if self.rate_scale == 1.0 else self.rate_scale,
        }
        for field, value in data_only.items():
            if value is not None and self.trace is None and self.lengths is None:
                raise ValueError(f"{field} applies to a workload given by trace or lengths")
        if self.requests_per_s is None:
            if self.prefill_tokens_per_s is None and self.decode_tokens_per_s is None:
                raise ValueError(
                    "give requests_per_s, or prefill_tokens_per_s / decode_tokens_per_s"
                )
        elif self.prefill_tokens_per_s is not None or self.decode_tokens_per_s is not None:
            raise ValueError("give requests_per_s or token rates, not both")
        if self.prefill_tokens_per_s is not None and self.decode_tokens_per_s is not None:
            from_prefill = self.prefill_tokens_per_s / self.input.mean
            from_decode = self.decode_tokens_per_s / self.output.mean
            if abs(from_prefill - from_decode) > 0.01 * max(from_prefill, from_decode):
                raise ValueError(
                    f"prefill_tokens_per_s / input mean = {from_prefill:.4g} req/s but "
                    f"decode_tokens_per_s / output mean = {from_decode:.4g} req/s; "
                    "make them agree or give one of them"
                )
        return self

    @property
    def from_data(self) -> bool:
        """Whether the length mix is data to split into buckets."""
        return self.trace is not None or self.lengths is not None

    @property
    def input(self) -> TokenDistribution:
        return _as_distribution(self.input_tokens)

    @property
    def output(self) -> TokenDistribution:
        return _as_distribution(self.output_tokens)

    @property
    def rate(self) -> float:
        """Requests per second, whichever way the demand was given."""
        if self.requests_per_s is not None:
            return self.requests_per_s
        if self.prefill_tokens_per_s is not None:
            return self.prefill_tokens_per_s / self.input.mean
        return self.decode_tokens_per_s / self.output.mean

    @property
    def rate_field(self) -> str:
        """The field `rate` comes from, in the same order, as errors about the rate name it."""
        if self.requests_per_s is not None:
            return "requests_per_s"
        if self.prefill_tokens_per_s is not None:
            return "prefill_tokens_per_s (as requests/s)"
        return "decode_tokens_per_s (as requests/s)"


def _as_distribution(value: float | TokenDistribution) -> TokenDistribution:
    return value if isinstance(value, TokenDistribution) else TokenDistribution(mean=value)


class Serving(Strict):
    """How replicas may be run, and the engine limits the cost model assumes."""

    modes: list[Mode] = Field(default_factory=lambda: ["colocated", "disaggregated"], min_length=1)
    """Serving modes allowed: colocated (chunked prefill) and/or disaggregated pools."""
    tensor_parallel: list[int] = Field(default_factory=lambda: [1, 2, 4, 8], min_length=1)
    """Tensor-parallel sizes to consider."""
    max_prefill_utilization: float = Field(0.95, gt=0, le=1)
    """Ceiling on the busy share of prefill capacity, on top of the queueing model (which keeps
    small pools well below it): headroom for what the model does not see."""
    max_num_seqs: int = Field(256, ge=1)
    """Engine limit on sequences in one decode batch (vLLM max_num_seqs). A pool's replicas
    share their slots (the router sends a request to a free one): where few slots bind, pools
    are sized at 1, 2, 4, … replicas' headroom (docs/latency.md)."""
    gpu_memory_utilization: float = Field(0.9, gt=0, le=1)
    """Share of HBM the engine may use for weights, activations and KV cache."""
    chunk_tokens: list[int] = Field(
        default_factory=lambda: [256, 512, 1024, 2048, 4096, 8192], min_length=1
    )
    """Token budgets per step (chunked prefill) to consider as operating points."""

    @model_validator(mode="after")
    def _positive_lists(self) -> Serving:
        if any(t < 1 for t in self.tensor_parallel):
            raise ValueError("tensor_parallel sizes must be >= 1")
        if any(c < 1 for c in self.chunk_tokens):
            raise ValueError("chunk_tokens must be >= 1")
        return self


class Objective(Strict):
    """What to optimise."""

    minimize: Literal["cost"] | None = None
    """`cost`: the cheapest fleet in $/hour (hour-weighted over the periods of a demand profile)
    that serves every class in full. Give this or `maximize`."""
    maximize: Literal["throughput"] | None = None
    """`throughput`: scale every class's rate by the largest common factor that
    `budget_per_hour` buys (which it needs), at most to 1,000,000 req/s a workload at the peak
    (the supported range; a budget that buys more gets the cheapest fleet at that rate, the
    JSON's `demand_scale_limit`). Give this or `minimize`."""
    budget_per_hour: Positive | None = None
    """Budget in $/hour: a cap when minimising cost, the limit when maximising throughput."""

    @model_validator(mode="after")
    def _one_goal(self) -> Objective:
        if (self.minimize is None) == (self.maximize is None):
            raise ValueError("give exactly one of minimize: cost or maximize: throughput")
        if self.maximize is not None and self.budget_per_hour is None:
            raise ValueError("maximize: throughput needs budget_per_hour")
        return self


class DemandProfile(Strict):
    """Rate multipliers per period (e.g. 24 hourly values)."""

    period_hours: Positive = 1
    """Length of each period, hours; the cost is averaged over the periods by their hours."""
    multipliers: list[Annotated[float, Field(ge=0)]] = Field(min_length=1)
    """One factor per period, in order: every workload's rate is scaled by it in that period
    (0 = no traffic). The fleet may differ by period; reserved GPUs are kept in all of them."""

    @field_validator("multipliers")
    @classmethod
    def _some_traffic(cls, multipliers: list[float]) -> list[float]:
        """A profile of zeros has no demand to plan for (and no peak to compare a plan with)."""
        if not any(multipliers):
            raise ValueError("every period is 0 (no traffic at all); give at least one above 0")
        return multipliers


class Pricing(Strict):
    """Price tiers relative to the on-demand price."""

    reserved_price_factor: float = Field(1.0, gt=0)
    """Price of a reserved GPU as a share of the on-demand price; reserved GPUs are paid in every
    period. Default 1 (no discount)."""
    spot_price_factor: float = Field(1.0, gt=0)
    """Price of a spot GPU as a share of the on-demand price, paid per period. Default 1."""
    spot_max_fraction: float = Field(0.0, ge=0, le=1)
    """Largest share of a GPU type's fleet in a period that may be spot. Default 0 (no spot)."""


class ProfileRow(Strict):
    """One measured capacity: the largest request rate one replica sustains under the SLO."""

    input_tokens: Positive
    """Mean prompt length the row was measured at, tokens."""
    output_tokens: Positive
    """Mean output length the row was measured at, tokens."""
    max_requests_per_s: Positive
    """Largest request rate one replica sustained within the SLO at these lengths. A class
    uses the lowest rate among the nearest rows at least as long in both lengths; none: the
    profile does not cover it."""


class PrefillPoint(Strict):
    """One point of a measured prefill curve."""

    input_tokens: Positive
    """Prompt length the point was measured at, tokens."""
    tokens_per_s: Positive
    """Prompt tokens per second one replica sustained prefilling prompts of this length, the GPU
    kept busy (no decode). Between measured lengths a prompt gets the lower of its two
    neighbours' rates; shorter than the shortest, the time of the shortest prompt; longer than
    the longest: not covered."""


class DecodePoint(Strict):
    """One point of a measured decode grid."""

    batch: int = Field(ge=1)
    """Sequences in the decode step."""
    context_tokens: Positive
    """Context each sequence of the batch holds (prompt + tokens generated so far), tokens."""
    step_ms: Positive
    """Measured time of one decode step at this batch and context, ms."""


class Profile(Strict):
    """Measurements that replace the analytic cost model for one replica configuration: a
    capacity `table`, or measured curves (`prefill` and/or `decode`, as the role needs)."""

    model: str
    """Name of a model in `models`."""
    gpu: str
    """GPU type listed in `gpus`."""
    tensor_parallel: int = Field(1, ge=1)
    """Tensor-parallel size of the measured replica; considered even when not listed in
    `serving.tensor_parallel`."""
    role: Role = "colocated"
    """Role the replica was measured in: colocated, prefill or decode (the matching mode must be
    in `serving.modes`)."""
    table: list[ProfileRow] | None = Field(None, min_length=1)
    """Capacity table: the measured max rate per replica at given token lengths. Give this or
    the curves."""
    prefill: list[PrefillPoint] | None = Field(None, min_length=1)
    """Prefill curve: prompt tokens/s against prompt length; replaces the analytic prefill time
    (roles colocated and prefill)."""
    decode: list[DecodePoint] | None = Field(None, min_length=1)
    """Decode grid: step time against batch and context, every batch measured at every context
    and batch 1 among them; replaces the analytic decode step (roles colocated and decode) by
    its tightest upper bound linear in the batch's sequences and context tokens. A class whose
    mean context exceeds the grid, or a batch above its largest, is not covered."""

    @model_validator(mode="after")
    def _one_form(self) -> Profile:
        curves = {"prefill": self.prefill, "decode": self.decode}
        if self.table is not None:
            if any(v is not None for v in curves.values()):
                raise ValueError("give a capacity table or curves (prefill/decode), not both")
            return self
        needs = {"colocated": ("prefill", "decode"), "prefill": ("prefill",), "decode": ("decode",)}
        for name, points in curves.items():
            wanted = name in needs[self.role]
            if wanted and points is None:
                raise ValueError(f"a {self.role} profile needs a table or a {name} curve")
            if not wanted and points is not None:
                raise ValueError(f"a {self.role} profile has no use for a {name} curve; remove it")
        lengths = [p.input_tokens for p in self.prefill or []]
        if len(set(lengths)) < len(lengths):
            raise ValueError("prefill curve measures a prompt length twice; keep one point each")
        if self.decode is not None:
            _check_grid(self.decode)
        return self


def _check_grid(points: list[DecodePoint]) -> None:
    """A full rectangle of (batch, context) points with batch 1: what the upper bound needs to
    be checked cell by cell, and to be no more optimistic than the smallest batch."""
    pairs = [(p.batch, p.context_tokens) for p in points]
    if len(set(pairs)) < len(pairs):
        raise ValueError("decode grid measures a (batch, context_tokens) twice; keep one each")
    batches, contexts = sorted({b for b, _ in pairs}), sorted({c for _, c in pairs})
    missing = [(b, c) for b in batches for c in contexts if (b, c) not in set(pairs)]
    if missing:
        b, c = missing[0]
        raise ValueError(
            f"decode grid lacks batch {b} at context_tokens {c:g}: measure every batch at every "
            "context"
        )
    if batches[0] != 1:
        raise ValueError("decode grid must include batch 1 (the smallest batch a step runs)")


class Instance(Strict):
    """A fleet-sizing problem: what can be bought, what must be served, under which targets."""

    name: str = "instance"
    """Name of the problem, shown in the plan and the reports."""
    gpus: list[GpuChoice] = Field(min_length=1)
    """GPU types that may be bought (at least one); the plan uses the cheapest mix."""
    models: list[ModelChoice] = Field(min_length=1)
    """Models to serve (at least one), each named by the workloads that use it."""
    workloads: list[Workload] = Field(min_length=1)
    """Request classes (at least one): the demand the fleet must serve."""
    serving: Serving = Field(default_factory=Serving)
    """Serving modes, tensor-parallel sizes and engine limits; absent = every default."""
    objective: Objective = Field(default_factory=lambda: Objective(minimize="cost"))
    """What to optimise; absent = `{minimize: cost}`."""
    demand_profile: DemandProfile | None = None
    """Rates that vary by period (e.g. hourly); absent = one period at the stated rates."""
    pricing: Pricing | None = None
    """Reserved and spot price tiers; absent = every GPU on demand at its price."""
    profiles: list[Profile] = Field(default_factory=list)
    """Measured capacity tables or curves that replace the analytic cost model for the replica
    configurations they cover; absent = the analytic model everywhere."""
    calibration: str | None = None
    """Path of a calibration overlay (`fleetopt calibrate -o`), relative to the instance file:
    its fitted efficiency factors replace the catalog's for the GPU types it names."""

    @model_validator(mode="after")
    def _references(self) -> Instance:
        _unique("gpus", [g.type for g in self.gpus])
        _unique("models", [m.name for m in self.models])
        _unique("workloads", [w.name for w in self.workloads])
        models = {m.name for m in self.models}
        gpus = {g.type for g in self.gpus}
        for w in self.workloads:
            if w.model not in models:
                raise ValueError(
                    f"workloads[{w.name}].model: {w.model!r} is not in models "
                    f"({', '.join(sorted(models))}); add it to models or fix the name"
                )
        for p in self.profiles:
            if p.model not in models or p.gpu not in gpus:
                raise ValueError(
                    f"profiles[{p.model} on {p.gpu}]: model and gpu must be listed in models and gpus"
                )
        return self

    @property
    def length_routed(self) -> bool:
        """Whether some workload's lengths are data, split into length buckets before the
        program is built (fleetopt/workload/routing.py)."""
        return any(w.from_data for w in self.workloads)


def _unique(field: str, names: list[str]) -> None:
    seen = {n for n in names if names.count(n) > 1}
    if seen:
        raise ValueError(f"{field}: duplicate name(s) {', '.join(sorted(seen))}")


MAX_FILE_BYTES = 4_000_000
"""Largest instance file read: the instances in instances/ are 1-3 kB of YAML."""
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's safe loader where PyYAML has it (the catalog reads 7x faster, a share of start-up
that `fleetopt solve` pays every run), else the pure-Python one; both build plain data only."""

MAX_YAML_NODES = 200_000
"""Largest number of values a file may expand to, counting each use of a YAML alias in full: an
alias bomb (a few lines that expand to billions of values) is refused before it is built."""
MAX_ITEMS = {"gpus": 50, "models": 50, "workloads": 500, "profiles": 500}
"""Largest lists of an instance: beyond them the program grows past what the solver sizes in
minutes, and the file is more likely generated by mistake than on purpose."""
MAX_PERIODS = 8784
"""Most periods in a demand profile: a year of hourly multipliers (leap year)."""
RANGES = {
    "requests_per_s": (0.001, 1_000_000.0, "requests/s"),
    "price_per_gpu_hour": (0.01, 1000.0, "$ per GPU-hour"),
    "tokens": (1.0, 1_048_576.0, "tokens"),
}
"""Supported numeric ranges of rates, prices and request lengths (input + output), tested at both
ends (tests/test_numeric_range.py); values outside them are refused rather than solved untested,
since the program's coefficients scale with them."""


def load_instance(path: str | Path) -> Instance:
    """Read and validate an instance file; every failure becomes one InputError line."""
    path = Path(path)
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            raise InputError(
                f"{path}: file is {path.stat().st_size:,} bytes, over the limit of "
                f"{MAX_FILE_BYTES:,}; an instance is a few kB of YAML"
            )
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror})") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    data = parse_yaml(text, str(path))
    instance = parse_instance(data, source=str(path))
    if instance.calibration is not None:  # relative to the instance file, not the working dir
        overlay = str(path.parent / instance.calibration)
        instance = instance.model_copy(update={"calibration": overlay})
    return instance


def parse_yaml(text: str, source: str = "instance") -> dict:
    """YAML text to plain data with the safe loader (no Python objects), its expanded size
    bounded, and the top level a mapping."""
    try:
        node = yaml.compose(text, Loader=SAFE_LOADER)
        if node is not None and _expanded_size(node, {}, set()) > MAX_YAML_NODES:
            raise InputError(
                f"{source}: expands to more than {MAX_YAML_NODES:,} values (YAML aliases "
                "repeated within each other?); write the instance out plainly"
            )
        data = yaml.load(text, Loader=SAFE_LOADER)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{source}:{mark.line + 1}" if mark else source
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise InputError(f"{where}: not valid YAML ({problem})") from None
    except RecursionError:
        raise InputError(f"{source}: nested too deeply to read") from None
    if not isinstance(data, dict):
        raise InputError(f"{source}: expected a mapping of fields (name, gpus, models, workloads)")
    return data


def _expanded_size(node: yaml.Node, sizes: dict[int, int], open_: set[int]) -> int:
    """Values the node stands for once every alias is expanded; shared nodes counted once per
    use, computed once each. A node inside itself (a recursive alias) counts as unbounded."""
    key = id(node)
    if key in sizes:
        return sizes[key]
    if key in open_:
        return MAX_YAML_NODES + 1
    open_.add(key)
    size = 1
    if isinstance(node, yaml.SequenceNode):
        size += sum(_expanded_size(child, sizes, open_) for child in node.value)
    elif isinstance(node, yaml.MappingNode):
        size += sum(
            _expanded_size(k, sizes, open_) + _expanded_size(v, sizes, open_) for k, v in node.value
        )
    open_.discard(key)
    sizes[key] = min(size, MAX_YAML_NODES + 1)
    return sizes[key]


def parse_instance(data: dict, source: str = "instance") -> Instance:
    """Validate plain data as an instance, within the size limits and supported ranges."""
    problem = _size_problem(data)
    if problem:
        raise InputError(f"{source}: {problem}")
    where = _first(data, _non_finite)
    if where is not None:
        raise InputError(f"{source}: {_readable_path(where, data)}: not a finite number; give one")
    where = _first(data, _boolean)
    if where is not None:
        raise InputError(
            f"{source}: {_readable_path(where, data)}: true/false is not a value it takes; give "
            "a number or the text it expects"
        )
    try:
        instance = Instance.model_validate(data, context={"source": source})
    except ValidationError as exc:
        raise InputError(f"{source}: {describe_validation_error(exc, data)}") from None
    problem = range_problem(instance)
    if problem:
        raise InputError(f"{source}: {problem}")
    return instance


def _size_problem(data: object) -> str | None:
    """A list over its limit, checked on the raw data before anything is validated."""
    if not isinstance(data, dict):
        return None
    for field, limit in MAX_ITEMS.items():
        items = data.get(field)
        if isinstance(items, list) and len(items) > limit:
            return f"{field}: {len(items):,} entries, over the limit of {limit}; split the instance"
    profile = data.get("demand_profile")
    multipliers = profile.get("multipliers") if isinstance(profile, dict) else None
    if isinstance(multipliers, list) and len(multipliers) > MAX_PERIODS:
        return (
            f"demand_profile.multipliers: {len(multipliers):,} periods, over the limit of "
            f"{MAX_PERIODS:,}; use longer periods (period_hours)"
        )
    return None


def _first(value: object, unwanted: Callable[[object], bool], loc: tuple = ()) -> tuple | None:
    """Where the first value that no field takes is, in raw data."""
    if unwanted(value):
        return loc
    if isinstance(value, dict):
        children = value.items()
    elif isinstance(value, list):
        children = enumerate(value)
    else:
        return None
    for key, child in children:
        found = _first(child, unwanted, (*loc, key))
        if found is not None:
            return found
    return None


def _non_finite(value: object) -> bool:
    """An infinite or NaN number (YAML `.inf`, `.nan`): no field takes one."""
    return isinstance(value, float) and not math.isfinite(value)


def _boolean(value: object) -> bool:
    """YAML's true/false (also yes/no, on/off): no field takes one, and the schema would read it
    as the number 1 or 0."""
    return isinstance(value, bool)


def range_problem(instance: Instance) -> str | None:
    """The first rate, price or request length outside the supported RANGES."""
    checks: list[tuple[str, str, float | None]] = []
    multipliers = instance.demand_profile.multipliers if instance.demand_profile else []
    for w in instance.workloads:
        given = f"workloads[{w.name}].{w.rate_field}"
        checks.append((given, "requests_per_s", w.rate))
        for i, m in enumerate(multipliers):  # each period's rate, where it has traffic
            where = f"demand_profile.multipliers[{i}] × {given}"
            checks.append(
                (where, "requests_per_s", None if m == 0 or w.rate is None else m * w.rate)
            )
        longest = w.input.longest + w.output.longest
        checks.append((f"workloads[{w.name}].input_tokens + output_tokens", "tokens", longest))
    for g in instance.gpus:
        spec_price = (g.spec or {}).get("price_per_gpu_hour")
        for where, price in (("", g.price_per_gpu_hour), (".spec", spec_price)):
            if isinstance(price, int | float) and not isinstance(price, bool):
                checks.append(
                    (f"gpus[{g.type}]{where}.price_per_gpu_hour", "price_per_gpu_hour", price)
                )
    for where, kind, value in checks:
        low, high, unit = RANGES[kind]
        if value is not None and not low <= value <= high:
            return (
                f"{where}: {value:,.6g} {unit} is outside the supported range "
                f"{low:,.6g} to {high:,.6g} {unit}"
            )
    return None


def describe_validation_error(exc: ValidationError, data: object = None) -> str:
    """The most telling error as `field.path: what is wrong`, list items named where possible.

    A field that takes a number or a mapping fails once per branch; the branch the input was
    meant for is the one that got past the type check, so it is preferred, then the deepest."""
    err = max(exc.errors(), key=lambda e: (not _is_type_mismatch(e["type"]), len(e["loc"])))
    path = _readable_path(err["loc"], data)
    message = err["msg"].removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        message = "unknown field" + _suggestion(err["loc"], exc.title)
    elif err["type"] == "missing":
        message = "required field is missing"
    return f"{path}: {message}" if path else message


def _suggestion(loc: tuple, title: str) -> str:
    """`; did you mean `ttft_ms`?` — the nearest field name where the unknown one was found,
    else a pointer to the schema."""
    names = _field_names(_model_at(_MODELS.get(title, Instance), loc[:-1]))
    close = difflib.get_close_matches(str(loc[-1]), names, n=1, cutoff=0.6)
    if close:
        return f"; did you mean `{close[0]}`?"
    listed = ", ".join(names) if names else "see `fleetopt schema`"
    return f" (valid here: {listed})"


def _model_at(model: type[BaseModel] | None, loc: tuple) -> type[BaseModel] | None:
    """The model class the location leads to from `model`, following list items and unions
    (by pydantic's branch tags, which name the class)."""
    for key in loc:
        if model is None:
            return None
        if isinstance(key, int) or key in model.model_fields:
            if not isinstance(key, int):
                model = _single_model(model.model_fields[key].annotation)
            continue
        tagged = re.search(r"(\w+)\]$", key) or re.fullmatch(r"(\w+)", key)
        model = _MODELS.get(tagged.group(1)) if tagged else model
    return model


def _single_model(annotation) -> type[BaseModel] | None:
    """The one pydantic model a field's annotation holds (through lists, unions, Optional)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    found = [m for a in get_args(annotation) if (m := _single_model(a)) is not None]
    return found[0] if len(found) == 1 else None


def _field_names(model: type[BaseModel] | None) -> list[str]:
    """The names a file writes: a field's alias where it has one (`rate`, not `rate_source`)."""
    if model is None:
        return []
    return [field.alias or name for name, field in model.model_fields.items()]


def _is_type_mismatch(kind: str) -> bool:
    return kind.endswith(("_type", "_parsing"))


def _is_branch_tag(key: str) -> bool:
    """Pydantic names union branches in error locations (`constrained-float`,
    `function-after[_ordered(), TokenDistribution]`); field names never look like that."""
    return not key.isidentifier() or key in {"float", "int", "str", "bool"} or key[0].isupper()


def _readable_path(loc: tuple, data: object) -> str:
    parts: list[str] = []
    node = data
    for key in loc:
        if isinstance(key, int):
            label = f"[{key}]"
            if isinstance(node, list) and key < len(node):
                node = node[key]
                name = node.get("name") or node.get("type") if isinstance(node, dict) else None
                if isinstance(name, str):
                    label = f"[{name}]"
            parts.append(label)
        elif not _is_branch_tag(key):
            node = node.get(key) if isinstance(node, dict) else None
            parts.append(("." if parts else "") + key)
    return "".join(parts)


_MODELS: dict[str, type[BaseModel]] = {cls.__name__: cls for cls in Strict.__subclasses__()}
"""Schema classes by name, to follow pydantic's error locations back to the fields."""


def json_schema() -> dict:
    """The JSON Schema of instance files, each field described by its docstring."""
    schema = Instance.model_json_schema()
    for name, node in [(Instance.__name__, schema), *schema.get("$defs", {}).items()]:
        model = _MODELS[name]
        docs = field_docs(model)
        for field_name, field in model.model_fields.items():
            key = field.alias or field_name
            if field.description is None and field_name in docs and key in node["properties"]:
                described = {**node["properties"][key], "description": docs[field_name]}
                node["properties"][key] = dict(sorted(described.items()))  # as pydantic's keys
    return schema


def field_docs(model: type[BaseModel]) -> dict[str, str]:
    """Attribute docstrings (a string right under a field) of a model class and its bases,
    cleaned as `inspect.cleandoc` does."""
    docs: dict[str, str] = {}
    for cls in reversed(model.__mro__):
        if not (isinstance(cls, type) and issubclass(cls, BaseModel)) or cls is BaseModel:
            continue
        body = ast.parse(inspect.getsource(cls)).body[0].body
        for node, after in itertools.pairwise(body):
            if (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.target, ast.Name)
                and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)
            ):
                docs[node.target.id] = inspect.cleandoc(after.value.value)
    return docs
