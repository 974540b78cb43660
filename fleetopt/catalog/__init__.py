"""Built-in GPU and model data, and the merge of an instance's choices and overrides onto it."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib import resources

import yaml
from pydantic import ValidationError

from fleetopt.calibrate.overlay import read_overlay
from fleetopt.errors import InputError
from fleetopt.instance import (
    SAFE_LOADER,
    Efficiency,
    GpuChoice,
    GpuSpec,
    Instance,
    ModelChoice,
    ModelSpec,
    describe_validation_error,
)


@cache
def _read(name: str) -> dict:
    return yaml.load(resources.files(__package__).joinpath(name).read_text(), Loader=SAFE_LOADER)


@cache
def gpu_catalog() -> dict[str, GpuSpec]:
    return {key: GpuSpec.model_validate(v) for key, v in _read("gpus.yaml").items()}


@cache
def model_catalog() -> dict[str, ModelSpec]:
    return {key: ModelSpec.model_validate(v) for key, v in _read("models.yaml").items()}


@dataclass(frozen=True)
class Gpu:
    """A GPU type as the instance buys it: catalog spec with overrides, plus purchase limits."""

    name: str
    spec: GpuSpec
    max_gpus: int | None
    gpus_per_node: int | None

    @property
    def price_per_gpu_hour(self) -> float:
        return self.spec.price_per_gpu_hour


@dataclass(frozen=True)
class Model:
    """A model as the instance serves it: architecture plus numeric formats."""

    name: str
    spec: ModelSpec
    weight_dtype: str
    kv_dtype: str


def resolve_gpu(choice: GpuChoice, calibrated: Efficiency | None = None) -> Gpu:
    """The catalog spec under, in rising precedence, calibrated factors and inline overrides."""
    overrides = dict(choice.spec or {})
    if calibrated is not None and "efficiency" not in overrides:
        overrides["efficiency"] = calibrated.model_dump()
    if choice.price_per_gpu_hour is not None:
        overrides["price_per_gpu_hour"] = choice.price_per_gpu_hour
    base = gpu_catalog().get(choice.type)
    spec = _merge(GpuSpec, base, overrides, f"gpus[{choice.type}]", "GPU type", gpu_catalog())
    return Gpu(choice.type, spec, choice.max_gpus, choice.gpus_per_node)


def resolve_model(choice: ModelChoice) -> Model:
    base = model_catalog().get(choice.name)
    spec = _merge(
        ModelSpec, base, dict(choice.spec or {}), f"models[{choice.name}]", "model", model_catalog()
    )
    return Model(choice.name, spec, choice.weight_dtype, choice.kv_dtype)


def _merge(cls, base, overrides: dict, where: str, kind: str, known: dict):
    if base is None and not overrides:
        raise InputError(
            f"{where}: unknown {kind} (known: {', '.join(sorted(known))}); "
            "or define it inline under `spec`"
        )
    data = base.model_dump() if base is not None else {}
    data.update(overrides)
    if "sources" in cls.model_fields:  # an overridden number's source is the instance
        data["sources"] = {**data.get("sources", {}), **dict.fromkeys(overrides, "instance")}
    try:
        return cls.model_validate(data)
    except ValidationError as exc:
        raise InputError(f"{where}.spec.{describe_validation_error(exc, data)}") from None


@dataclass(frozen=True)
class Resolved:
    """The instance with every GPU and model looked up: what perf and configs consume."""

    instance: Instance
    gpus: dict[str, Gpu]
    models: dict[str, Model]


def resolve(instance: Instance) -> Resolved:
    models = {m.name: resolve_model(m) for m in instance.models}
    for w in instance.workloads:
        context = models[w.model].spec.max_context
        longest = w.input.longest + w.output.longest
        if longest > context:
            raise InputError(
                f"workloads[{w.name}].input_tokens: the longest request ({w.input.longest:,.0f} "
                f"input + {w.output.longest:,.0f} output tokens) exceeds {w.model}'s max_context "
                f"of {context:,}; shorten it or set models[{w.model}].spec.max_context"
            )
    calibrated = read_overlay(instance.calibration) if instance.calibration else {}
    gpus = {g.type: resolve_gpu(g, calibrated.get(g.type)) for g in instance.gpus}
    return Resolved(instance, gpus, models)
