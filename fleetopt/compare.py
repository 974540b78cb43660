"""`fleetopt compare`: colocated-only, disaggregated-only and mixed serving side by side, and why.

Each mode is the same instance solved with `serving.modes` restricted, so every difference
comes from what the mode may do. The mixed optimum may use any config of either pure mode, so
it never costs more than either (within the MIP gap). Cost per token is split by phase: a
prefill pool's cost goes to input tokens, a decode pool's to output tokens, and a colocated
pool's by the share of each step it reserves for prefill chunks (R/τ, docs/cost-model.md).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from fleetopt.errors import InfeasibleError, NoPlanInTime
from fleetopt.instance import Instance
from fleetopt.pipeline import plan_variant
from fleetopt.plan import Plan, PoolPlan
from fleetopt.solve import SolveOptions

MODES = {
    "colocated": ["colocated"],
    "disaggregated": ["disaggregated"],
    "mixed": ["colocated", "disaggregated"],
}


@dataclass
class ModeResult:
    mode: str
    status: str  # optimal | feasible | infeasible | no_solution (none found within the time limit)
    cost_per_hour: float | None = None
    gpus: dict[str, int] = field(default_factory=dict)
    output_tokens_per_s_per_gpu: float | None = None
    cost_per_million_input_tokens: float | None = None
    cost_per_million_output_tokens: float | None = None
    utilization: float | None = None
    """GPU-weighted mean of the pools' busiest-resource share."""
    binding: list[str] = field(default_factory=list)
    """What limits the mode's pools, or why the mode has no fleet."""
    plan: Plan | None = None


def compare_modes(instance: Instance, options: SolveOptions | None = None) -> list[ModeResult]:
    results = []
    for mode, modes in MODES.items():
        serving = instance.serving.model_copy(update={"modes": modes})
        variant = instance.model_copy(update={"serving": serving})
        try:
            plan = plan_variant(variant, options)
        except InfeasibleError as exc:
            results.append(ModeResult(mode, "infeasible", binding=[str(exc)]))
            continue
        except NoPlanInTime as exc:  # the other modes may still have a fleet
            results.append(ModeResult(mode, "no_solution", binding=[str(exc)]))
            continue
        results.append(_summarise(mode, plan, instance))
    return results


def _summarise(mode: str, plan: Plan, instance: Instance) -> ModeResult:
    gpus = sum(plan.gpus.values())
    prefill_cost = sum(_prefill_share(p) * p.cost_per_hour for p in plan.pools)
    idle = plan.cost_per_hour - sum(p.cost_per_hour for p in plan.pools)
    decode_cost = plan.cost_per_hour - prefill_cost - idle
    # GPUs bought beyond the pools (whole nodes) are charged to both phases by their split.
    split = prefill_cost / (prefill_cost + decode_cost) if prefill_cost + decode_cost else 0.5
    prefill_cost += idle * split
    decode_cost += idle * (1 - split)
    used = sum(p.gpus for p in plan.pools)
    return ModeResult(
        mode=mode,
        status=plan.status,
        cost_per_hour=plan.cost_per_hour,
        gpus=plan.gpus,
        output_tokens_per_s_per_gpu=plan.decode_tokens_per_s / gpus if gpus else None,
        cost_per_million_input_tokens=_per_million(prefill_cost, plan.prefill_tokens_per_s),
        cost_per_million_output_tokens=_per_million(decode_cost, plan.decode_tokens_per_s),
        utilization=sum(p.utilization * p.gpus for p in plan.pools) / used if used else None,
        binding=_binding(plan, instance),
        plan=plan,
    )


def _prefill_share(pool: PoolPlan) -> float:
    """Share of a pool's cost that buys prefill: all of a prefill pool, none of a decode pool,
    and for a colocated pool the share of its step time its prompts take."""
    if pool.role != "colocated":
        return 1.0 if pool.role == "prefill" else 0.0
    if pool.prefill_step_share is None:  # measured capacity: no step model to split by
        return 0.5
    return pool.prefill_step_share


def _per_million(cost_per_hour: float, tokens_per_s: float) -> float | None:
    return cost_per_hour / (tokens_per_s * 3600) * 1e6 if tokens_per_s else None


def _binding(plan: Plan, instance: Instance) -> list[str]:
    """Per pool, the busiest resource; and whole-node GPUs bought but unused."""
    notes = [
        f"{p.role} {p.gpu} tp{p.tensor_parallel}: {p.limited_by} at {p.utilization:.0%}"
        for p in plan.pools
    ]
    for gpu, bought in plan.gpus.items():
        used = sum(p.gpus for p in plan.pools if p.gpu == gpu)
        if bought > used:
            notes.append(f"whole nodes: {bought - used} {gpu} GPUs bought but idle")
    targets = {w.name: w.slo for w in instance.workloads if w.slo is not None}
    for w in plan.workloads:
        slo = targets.get(w.name)
        if slo and slo.tpot_ms and w.tpot_ms and w.tpot_ms >= slo.tpot_ms * (1 - 1e-6):
            notes.append(f"{w.name}: TPOT target {slo.tpot_ms:g} ms binds the step")
    return notes


def explain(results: list[ModeResult]) -> list[str]:
    """Sentences on where the difference between the modes comes from."""
    by_mode = {r.mode: r for r in results}
    lines = []
    for r in results:
        if r.plan is None:
            lines.append(f"{r.mode}: no fleet — {r.binding[0]}")
    feasible = [r for r in results if r.cost_per_hour is not None and r.mode != "mixed"]
    if len(feasible) == 2:
        cheap, dear = sorted(feasible, key=lambda r: r.cost_per_hour)
        if dear.cost_per_hour > cheap.cost_per_hour * (1 + 1e-6):
            lines.append(
                f"{cheap.mode} is {dear.cost_per_hour - cheap.cost_per_hour:,.2f} $/h "
                f"({1 - cheap.cost_per_hour / dear.cost_per_hour:.0%}) cheaper than {dear.mode}"
            )
        else:
            lines.append("colocated and disaggregated cost the same")
        for phase, attr in (
            ("input", "cost_per_million_input_tokens"),
            ("output", "cost_per_million_output_tokens"),
        ):
            a, b = getattr(cheap, attr), getattr(dear, attr)
            if a is not None and b is not None and abs(a - b) > 1e-9:
                lower = cheap if a < b else dear
                higher = dear if lower is cheap else cheap
                lines.append(
                    f"{phase} tokens are cheaper {lower.mode}: {getattr(lower, attr):.4f} vs "
                    f"{getattr(higher, attr):.4f} $ per million"
                )
    mixed = by_mode.get("mixed")
    if mixed and mixed.cost_per_hour is not None and feasible:
        best = min(r.cost_per_hour for r in feasible)
        if mixed.cost_per_hour < best * (1 - 1e-6):
            lines.append(
                f"mixed saves a further {best - mixed.cost_per_hour:,.2f} $/h by letting each class "
                "pick its mode"
            )
    for r in results:
        if r.plan is not None and r.binding:
            lines.append(f"{r.mode} binds on: " + "; ".join(r.binding))
    return lines


def to_dict(results: list[ModeResult]) -> dict:
    modes = {}
    for r in results:
        data = asdict(r)
        data.pop("plan")
        if r.plan is not None:
            data["plan"] = r.plan.to_dict()
        modes[r.mode] = data
    return {"modes": modes, "explanation": explain(results)}
