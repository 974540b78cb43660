"""Small builders shared by the tests: inline instances as plain dicts, and a solve shortcut."""

from __future__ import annotations

import copy
import math

from fleetopt.errors import InfeasibleError
from fleetopt.instance import parse_instance
from fleetopt.pipeline import plan_fleet
from fleetopt.plan import Plan


def analytic_instance(
    gpus: list[str],
    requests_per_s: float = 10.0,
    input_tokens: float = 1000,
    output_tokens: float = 200,
    ttft_ms: float | None = 1000,
    tpot_ms: float | None = 50,
    model: str = "llama-3.1-8b",
    modes: tuple[str, ...] = ("colocated",),
    tensor_parallel: tuple[int, ...] = (1,),
    weight_dtype: str = "bf16",
) -> dict:
    """One request class of one catalog model, analytic cost model (no profiles)."""
    slo = {k: v for k, v in (("ttft_ms", ttft_ms), ("tpot_ms", tpot_ms)) if v is not None}
    workload = {
        "name": "chat",
        "model": model,
        "requests_per_s": requests_per_s,
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
    }
    if slo:
        workload["slo"] = slo
    return {
        "name": "test",
        "gpus": [{"type": g} for g in gpus],
        "models": [{"name": model, "weight_dtype": weight_dtype}],
        "workloads": [workload],
        "serving": {"modes": list(modes), "tensor_parallel": list(tensor_parallel)},
    }


def solve(data: dict) -> Plan:
    return plan_fleet(parse_instance(copy.deepcopy(data)))


def cost_or_inf(data: dict) -> float:
    """Cost of the optimal plan; an infeasible instance costs +inf (no fleet at any price)."""
    try:
        return solve(data).cost_per_hour
    except InfeasibleError:
        return math.inf
