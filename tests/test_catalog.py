"""The catalog: every number sourced, and instances that override or define GPUs and models inline."""

from __future__ import annotations

import copy

import pytest
from helpers import analytic_instance, solve

from fleetopt.catalog import gpu_catalog, model_catalog, resolve
from fleetopt.errors import InputError
from fleetopt.instance import GpuSpec, parse_instance

REQUIRED_GPUS = [
    "a10g",
    "l4",
    "l40s",
    "a100-40gb",
    "a100-80gb",
    "h100-pcie",
    "h100-sxm",
    "h200",
    "b200",
    "mi300x",
]
REQUIRED_MODELS = [
    "llama-3.1-8b",
    "llama-3.1-70b",
    "llama-3.1-405b",
    "llama-2-7b",
    "llama-2-70b",
    "qwen2.5-72b",
    "qwen3-32b",
    "mixtral-8x7b",
]


def test_catalog_has_the_required_entries():
    assert set(REQUIRED_GPUS) <= set(gpu_catalog())
    assert set(REQUIRED_MODELS) <= set(model_catalog())


@pytest.mark.parametrize("name", sorted(gpu_catalog()))
def test_every_gpu_number_has_a_source_and_the_price_a_date(name):
    spec = gpu_catalog()[name]
    numbers = [
        f for f, info in GpuSpec.model_fields.items() if info.annotation in (float, float | None)
    ]
    for field in numbers:
        if getattr(spec, field) is not None:
            assert spec.sources.get(field), f"{name}.{field} has no source"
    assert spec.price_date


@pytest.mark.parametrize("name", sorted(model_catalog()))
def test_every_model_names_its_source(name):
    assert model_catalog()[name].source


def test_moe_models_have_fewer_active_than_total_parameters():
    mixtral = model_catalog()["mixtral-8x7b"]
    assert mixtral.active_params_b < mixtral.params_b


def test_price_override_changes_the_cost_in_proportion():
    base = analytic_instance(["h100-sxm"], requests_per_s=20)
    catalog_price = gpu_catalog()["h100-sxm"].price_per_gpu_hour
    cheap = copy.deepcopy(base)
    cheap["gpus"][0]["price_per_gpu_hour"] = catalog_price / 2
    # Same GPUs, half the price: every config keeps its capacity, so the same fleet is optimal.
    assert solve(cheap).cost_per_hour == pytest.approx(solve(base).cost_per_hour / 2)


def test_spec_override_changes_the_capacity():
    base = analytic_instance(["h100-sxm"], requests_per_s=40, tpot_ms=40)
    faster = copy.deepcopy(base)
    faster["gpus"][0]["spec"] = {"hbm_tb_s": 6.7, "bf16_tflops": 1978}  # twice the H100
    assert solve(faster).cost_per_hour < solve(base).cost_per_hour
    resolved = resolve(parse_instance(faster))
    assert resolved.gpus["h100-sxm"].spec.sources["hbm_tb_s"] == "instance"


def test_gpu_and_model_defined_inline():
    data = analytic_instance(["h100-sxm"], requests_per_s=5)
    h100 = gpu_catalog()["h100-sxm"].model_dump(exclude={"sources", "efficiency", "description"})
    data["gpus"] = [{"type": "my-accelerator", "spec": h100}]
    arch = model_catalog()["llama-3.1-8b"].model_dump(exclude={"source", "description"})
    data["models"] = [{"name": "my-8b", "spec": arch}]
    data["workloads"][0]["model"] = "my-8b"
    twin = analytic_instance(["h100-sxm"], requests_per_s=5)
    # An inline copy of a catalog entry plans exactly as the entry does.
    assert solve(data).cost_per_hour == pytest.approx(solve(twin).cost_per_hour)
    assert set(solve(data).gpus) == {"my-accelerator"}


def test_incomplete_inline_gpu_names_the_missing_field():
    data = analytic_instance(["h100-sxm"])
    data["gpus"] = [{"type": "my-accelerator", "spec": {"memory_gb": 80}}]
    with pytest.raises(InputError, match=r"gpus\[my-accelerator\]\.spec\.hbm_tb_s: required field"):
        resolve(parse_instance(data))


def test_unknown_gpu_lists_the_known_ones():
    data = analytic_instance(["h900"])
    with pytest.raises(InputError, match=r"gpus\[h900\]: unknown GPU type \(known: .*h100-sxm"):
        resolve(parse_instance(data))
