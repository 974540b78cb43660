"""Replay against a length-routed plan: trace rows and synthetic classes become its buckets."""

from __future__ import annotations

import numpy as np

from fleetopt.errors import InputError
from fleetopt.instance import Instance, TokenDistribution, Workload
from fleetopt.plan import Plan
from fleetopt.simulate.arrivals import Requests


def sources(plan: Plan) -> list[str] | None:
    """The workloads a trace's rows belong to before bucketing; None: not length-routed."""
    if not plan.length_routing:
        return None
    names = [b["source"] for b in plan.length_routing["buckets"]]
    routed = {b["name"] for b in plan.length_routing["buckets"]}
    names += [w.name for w in plan.workloads if w.name not in routed]
    return list(dict.fromkeys(names))


def into_buckets(requests: Requests, plan: Plan) -> Requests:
    """Each row re-labelled with its bucket: its source's bucket whose prompt range holds it."""
    names = [w.name for w in plan.workloads]
    label = np.full(len(requests), -1, dtype=np.int64)
    by_source = {b["name"]: b for b in plan.length_routing["buckets"]}
    for index, name in enumerate(requests.names):
        rows = requests.workload == index
        if name in names and name not in by_source:  # a workload not split by length
            label[rows] = names.index(name)
        for b in plan.length_routing["buckets"]:
            if b["source"] != name:
                continue
            top = b["input_tokens_to"]
            inside = rows & (requests.input_tokens >= b["input_tokens_from"])
            if top is not None:
                inside &= requests.input_tokens <= top
            label[inside] = names.index(b["name"])
    if (label < 0).any():
        raise InputError(f"{requests.source}: rows of workloads the plan does not serve")
    return Requests(
        names,
        requests.arrival_s,
        requests.input_tokens,
        requests.output_tokens,
        label,
        requests.source,
    )


def bucket_workloads(plan: Plan, instance: Instance) -> list[Workload]:
    """The plan's buckets as request classes (lengths as the plan recorded them)."""
    if not plan.length_routing:
        return []
    source = {w.name: w for w in instance.workloads}
    out = []
    for b in plan.length_routing["buckets"]:
        if b["source"] not in source:
            raise InputError(f"plan bucket {b['name']}: workload {b['source']} not in the instance")
        w = source[b["source"]]
        out.append(
            Workload(
                name=b["name"],
                model=w.model,
                requests_per_s=b["requests_per_s"],
                input_tokens=TokenDistribution(**b["input_tokens"]),
                output_tokens=TokenDistribution(**b["output_tokens"]),
                slo=None
                if w.slo is None
                else w.slo.model_copy(update={"percentile": b["slo_percentile"]}),
            )
        )
    return out
