"""Why no fleet can exist: per class, the target no config meets and the best any config does.

Runs before the solver. A class needs at least one config that may prefill it and one that may
decode it; when either side is empty, the explanation names the class, the target, and the best
TTFT / TPOT / KV capacity on offer, so the user knows what to relax and by how much.
"""

from __future__ import annotations

from fleetopt.catalog import Resolved
from fleetopt.configs import ConfigSet, RequestClass, limits_of, valid_tensor_parallel
from fleetopt.perf.operating_point import weights_blocker
from fleetopt.perf.replica import Replica


def blocked_classes(config_set: ConfigSet, resolved: Resolved) -> list[str]:
    """One sentence per class that no config can carry (empty when every class has a path)."""
    messages = []
    for cls in config_set.classes:
        prefill = any(cls.name in k.usage and k.op.does_prefill for k in config_set.configs)
        decode = any(cls.name in k.usage and k.op.does_decode for k in config_set.configs)
        if not (prefill and decode):
            messages.append(_explain(cls, config_set, resolved, prefill, decode))
    return messages


def _explain(
    cls: RequestClass, config_set: ConfigSet, resolved: Resolved, prefill: bool, decode: bool
) -> str:
    replicas = _replicas(cls, resolved)
    limits = limits_of(resolved)
    shape = cls.shape
    pct = f"p{cls.percentile:g}"
    if not replicas:
        kinds = {r.reason for r in config_set.rejections[cls.name]}
        return (
            f"{cls.name}: {cls.model} fits on no GPU type and tp allowed "
            f"({'; '.join(sorted(kinds))}); {_fixes(cls, resolved, 'weights')}"
        )
    longest = shape.longest_sequence(decodes=True)
    roomiest = max(replicas, key=lambda r: r.kv_capacity_tokens(limits.gpu_memory_utilization))
    room = roomiest.kv_capacity_tokens(limits.gpu_memory_utilization)
    if room < longest:
        return (
            f"{cls.name}: its longest sequence, {longest:,.0f} tokens, needs more KV cache than any "
            f"replica holds (at most {room:,.0f} tokens on {_name(roomiest)}); "
            f"{_fixes(cls, resolved, 'kv_cache')}"
        )
    if not prefill and shape.ttft_s is not None:
        fastest = min(replicas, key=lambda r: r.prefill_s(shape.input_tail))
        best = fastest.prefill_s(shape.input_tail)
        if best > shape.ttft_s:
            return (
                f"{cls.name}: TTFT {pct} {shape.ttft_s * 1e3:,.0f} ms is below the fastest prefill "
                f"of a {shape.input_tail:,.0f}-token prompt, {best * 1e3:,.0f} ms on "
                f"{_name(fastest)}; {_fixes(cls, resolved, 'ttft_ms')}"
            )
    if not decode and shape.tpot_s is not None:
        context = shape.walk_tokens
        walkers = [r.at_walk(context) for r in replicas]
        fastest = min(walkers, key=lambda r: r.step_s(decode_seqs=1, decode_context_tokens=context))
        best = fastest.step_s(decode_seqs=1, decode_context_tokens=context)
        if best > shape.tpot_s:
            return (
                f"{cls.name}: TPOT {shape.tpot_s * 1e3:,.1f} ms is below the fastest decode step "
                f"even for a single sequence, {best * 1e3:,.1f} ms on {_name(fastest)}; "
                f"{_fixes(cls, resolved, 'tpot_ms')}"
            )
    rejections = config_set.rejections[cls.name]
    measured = [r for r in rejections if r.kind == "profile"]
    if measured and len(measured) == len(rejections):
        return (
            f"{cls.name}: the measured profiles cover no config that can carry it "
            f"({measured[0].config}: {measured[0].reason}); fix: add a profiles[].table row "
            f"(or prefill/decode curve points) at or above {shape.input_mean:,.0f} input and "
            f"{shape.output_mean:,.0f} output tokens, or drop the profile to use the analytic "
            "cost model"
        )
    side = "prefill" if not prefill else "decode"
    first: dict[str, str] = {}  # the nearest miss of each kind, so no kind hides behind another
    for r in sorted(rejections, key=lambda r: (r.kind, r.miss, r.reason)):
        first.setdefault(r.kind, r.reason)
    reasons = [f"{kind}: {reason}" for kind, reason in sorted(first.items())]
    short = next((FIELDS[kind] for kind in FIELDS if kind in first), None)
    fix = f"; {_fixes(cls, resolved, short)}" if short else ""
    return f"{cls.name}: no config can {side} it within its targets ({'; '.join(reasons)}){fix}"


FIELDS = {"ttft": "ttft_ms", "tpot": "tpot_ms", "memory": "kv_cache", "weights": "weights"}
"""The kind of reason whose fix an explanation names, the first present in this order: a
latency target first, since the grid of points is tried for it."""


def _fixes(cls: RequestClass, resolved: Resolved, short: str) -> str:
    """What the user can change about what falls `short` (the memory for the weights or for
    the KV cache, or a latency target: ttft_ms, tpot_ms), leaving out what the instance already
    does."""
    model = resolved.models[cls.model]
    target = short if short in ("ttft_ms", "tpot_ms") else None
    fixes = [f"raise workloads[{cls.name}].slo.{target}"] if target else []
    usable = sorted(
        {
            tp
            for gpu in resolved.gpus.values()
            for tp in (1, 2, 4, 8, 16, 32, 64, 72)
            if valid_tensor_parallel(model, gpu, tp) is None
        }
    )
    chosen = resolved.instance.serving.tensor_parallel
    if not any(tp in usable for tp in chosen):
        fixes.append(f"use serving.tensor_parallel sizes among {usable} for these GPU types")
    if target != "ttft_ms" and model.weight_dtype == "bf16":
        fixes.append(f"set models[{cls.model}].weight_dtype: fp8")
    if short == "kv_cache" and model.kv_dtype == "bf16":
        fixes.append(f"set models[{cls.model}].kv_dtype: fp8")
    allowed = max(resolved.instance.serving.tensor_parallel)
    if allowed < max(g.spec.max_tensor_parallel for g in resolved.gpus.values()):
        fixes.append(f"allow serving.tensor_parallel above {allowed}")
    fixes.append(
        "add a faster GPU type to gpus" if target else "add a GPU type with more memory to gpus"
    )
    return "fix: " + ", or ".join(fixes)


def _replicas(cls: RequestClass, resolved: Resolved) -> list[Replica]:
    model = resolved.models[cls.model]
    limits = limits_of(resolved)
    found = []
    for gpu in resolved.gpus.values():
        for tp in resolved.instance.serving.tensor_parallel:
            if valid_tensor_parallel(model, gpu, tp) is None:
                replica = Replica(model, gpu, tp)
                if weights_blocker(replica, limits) is None:
                    found.append(replica)
    return found


def _name(replica: Replica) -> str:
    return f"{replica.gpu.name} tp{replica.tp}"
