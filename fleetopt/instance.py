"""The input contract: a pydantic schema of instance YAML, its loader and its JSON Schema.

Field docstrings are the documentation of the public interface; `fleetopt schema` exports them.
Units live in the field names (`_ms`, `_per_s`, `_per_gpu_hour`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from fleetopt.errors import InputError

Dtype = Literal["bf16", "fp8", "int4"]
Role = Literal["colocated", "prefill", "decode"]
Mode = Literal["colocated", "disaggregated"]
Positive = Annotated[float, Field(gt=0)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


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
    """Time per output token target, ms (the decode step time)."""
    percentile: float = Field(99, gt=0, lt=100)
    """Share of requests, in percent, that must meet the targets."""


class Efficiency(Strict):
    """Achieved share of datasheet peaks and the fixed cost of one engine step. Defaults are fitted
    to measured serving throughput (docs/cost-model.md); calibrate them to your engine."""

    compute: float = Field(gt=0, le=1)
    """Share of peak tensor FLOP/s reached by prefill and decode matmuls."""
    memory: float = Field(gt=0, le=1)
    """Share of peak HBM bandwidth reached when streaming weights and KV cache."""
    interconnect: float = Field(gt=0, le=1)
    """Share of scale-up / scale-out bandwidth reached by all-reduce and KV transfer."""
    step_overhead_ms: float = Field(ge=0)
    """Fixed time per engine step (scheduling, kernel launches, sampling), ms."""


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

    type: str
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

    name: str
    """Catalog key, or a new name whose architecture is given in `spec`."""
    weight_dtype: Dtype = "bf16"
    """Format of the weights: bf16, fp8 (FP8 compute where the GPU has it) or int4 (W4A16)."""
    kv_dtype: Dtype = "bf16"
    """Format of the KV cache."""
    spec: dict | None = None
    """Inline architecture fields (ModelSpec names) that override or define the model."""


class Workload(Strict):
    """A request class: one model, one token-length mix, one rate, one SLO."""

    name: str
    """Unique name of the class: it labels the plan, the reports and trace rows."""
    model: str
    """Name of a model in `models`."""
    requests_per_s: Positive | None = None
    """Arrival rate. Give this, or prefill_tokens_per_s and/or decode_tokens_per_s."""
    prefill_tokens_per_s: Positive | None = None
    """Prompt tokens per second (rate = this / mean input tokens)."""
    decode_tokens_per_s: Positive | None = None
    """Output tokens per second (rate = this / mean output tokens)."""
    input_tokens: Positive | TokenDistribution
    """Prompt length: a mean, or {mean, p50, p90, p99, max}."""
    output_tokens: Positive | TokenDistribution
    """Output length: a mean, or {mean, p50, p90, p99, max}."""
    slo: Slo | None = None
    """Latency targets; absent = throughput only."""

    @model_validator(mode="after")
    def _one_rate(self) -> Workload:
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
    """Engine limit on sequences in one decode batch (vLLM max_num_seqs)."""
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
    `budget_per_hour` buys (which it needs). Give this or `minimize`."""
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


class Profile(Strict):
    """Measured capacity that replaces the analytic cost model for one replica configuration."""

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
    table: list[ProfileRow] = Field(min_length=1)
    """Capacity table: the measured max rate per replica at given token lengths."""


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
    """Measured capacity tables that replace the analytic cost model for the replica
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


def _unique(field: str, names: list[str]) -> None:
    seen = {n for n in names if names.count(n) > 1}
    if seen:
        raise ValueError(f"{field}: duplicate name(s) {', '.join(sorted(seen))}")


def load_instance(path: str | Path) -> Instance:
    """Read and validate an instance file; every failure becomes one InputError line."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise InputError(f"{where}: not valid YAML ({getattr(exc, 'problem', exc)})") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a mapping of fields (name, gpus, models, workloads)")
    instance = parse_instance(data, source=str(path))
    if instance.calibration is not None:  # relative to the instance file, not the working dir
        overlay = str(path.parent / instance.calibration)
        instance = instance.model_copy(update={"calibration": overlay})
    return instance


def parse_instance(data: dict, source: str = "instance") -> Instance:
    try:
        return Instance.model_validate(data)
    except ValidationError as exc:
        raise InputError(f"{source}: {describe_validation_error(exc, data)}") from None


def describe_validation_error(exc: ValidationError, data: object = None) -> str:
    """The most telling error as `field.path: what is wrong`, list items named where possible.

    A field that takes a number or a mapping fails once per branch; the branch the input was
    meant for is the one that got past the type check, so it is preferred, then the deepest."""
    err = max(exc.errors(), key=lambda e: (not _is_type_mismatch(e["type"]), len(e["loc"])))
    path = _readable_path(err["loc"], data)
    message = err["msg"].removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        message = "unknown field (check the spelling; `fleetopt schema` lists the fields)"
    elif err["type"] == "missing":
        message = "required field is missing"
    return f"{path}: {message}" if path else message


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


def json_schema() -> dict:
    return Instance.model_json_schema()
