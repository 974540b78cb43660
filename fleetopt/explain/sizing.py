"""What requests/s hides: demand in tokens/s, what each class costs each GPU type, and the error
of sizing a fleet by requests/s.

Every number comes from the program's own configs and coefficients (`configs.enumerate_configs`,
`perf.operating_point.max_rate`), so the GPU-seconds shown here are the ones the planner uses.
A class's need on a path of configs is λ · Σ tp / rate: replicas (fractional, before integer
rounding and queueing) times GPUs per replica.

The requests/s rule is the sizing this tool argues against: take one average request per model
(the request-weighted mean lengths of its classes, their longest tails and tightest targets),
find the config with the lowest $ per request/s for it, and buy enough replicas for the total
requests/s. Per class, the rule's share of that fleet (λ_c / rate of the average request) is set
beside what the class really takes on the same configs (λ_c / its own rate).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from fleetopt.catalog import Resolved, resolve
from fleetopt.configs import Config, ConfigSet, enumerate_configs
from fleetopt.instance import Instance, Objective, Slo, TokenDistribution, Workload
from fleetopt.perf.operating_point import RESOURCE_LABELS, max_rate
from fleetopt.pipeline import plan_fleet
from fleetopt.solve import SolveOptions

AVERAGE = "average request"


@dataclass(frozen=True)
class Part:
    """One config of a path and the requests/s one replica of it carries of a class alone."""

    config: Config
    requests_per_s: float
    limited_by: str


Path = tuple[Part, ...]
"""Colocated: one config. Disaggregated: a prefill config and a decode config."""


@dataclass(frozen=True)
class ClassDemand:
    workload: str
    model: str
    requests_per_s: float
    input_tokens: float
    output_tokens: float
    prefill_tokens_per_s: float
    decode_tokens_per_s: float


@dataclass(frozen=True)
class ClassNeed:
    """GPU-seconds per second class `workload` needs on GPU type `gpu`, on its best path there."""

    workload: str
    gpu: str
    path: str
    gpu_seconds_per_s: float
    cost_per_hour: float
    limited_by: str


@dataclass(frozen=True)
class RuleShare:
    """One class on one pool of the requests/s rule's fleet: the GPUs the rule gives it (its
    requests/s over the average request's rate) and the GPUs it takes (over its own rate)."""

    workload: str
    pool: str  # the rule's config: GPU type, tp and role
    rule_gpus: float
    needed_gpus: float | None  # None: the class may not run on the rule's configs (latency, memory)
    over_gpus: float | None  # positive: the rule over-provisions this class; negative: short
    over_cost_per_hour: float | None


@dataclass(frozen=True)
class RequestsRule:
    model: str
    requests_per_s: float
    input_tokens: float
    output_tokens: float
    path: str
    requests_per_s_per_gpu: float
    gpus: int
    cost_per_hour: float
    shares: list[RuleShare]


@dataclass(frozen=True)
class Explanation:
    name: str
    demand: list[ClassDemand]
    needs: list[ClassNeed]
    rules: list[RequestsRule]
    plan_gpus: int
    plan_cost_per_hour: float
    plan_status: str
    """optimal, or feasible where the solve stopped early (--time-limit, Ctrl-C)."""
    plan_mip_gap: float | None
    rule_gpus: int
    rule_cost_per_hour: float
    left_out: list[str]
    """What of the instance the plan here is solved without, to compare like with like: the
    rule sizes for the stated rates at on-demand prices (`demand_profile`, `pricing`), and the
    cheapest fleet for them (an `objective` that maximises throughput for a budget)."""

    @property
    def over_gpus(self) -> int:
        """GPUs the requests/s rule buys beyond the plan (negative: fewer than needed)."""
        return self.rule_gpus - self.plan_gpus

    @property
    def over_cost_per_hour(self) -> float:
        return self.rule_cost_per_hour - self.plan_cost_per_hour

    def to_dict(self) -> dict:
        data = asdict(self)
        data["over_gpus"] = self.over_gpus
        data["over_cost_per_hour"] = self.over_cost_per_hour
        return data


def explain(instance: Instance, options: SolveOptions | None = None) -> Explanation:
    """Demand in tokens/s, GPU-seconds per class and GPU type, and the requests/s rule's error
    against the real plan (solved here, so an infeasible instance raises as `solve` does)."""
    left_out = [name for name in ("demand_profile", "pricing") if getattr(instance, name)]
    changes = dict.fromkeys(left_out)
    if instance.objective.maximize is not None:  # the rule sizes the stated demand, at any cost
        left_out.append("objective")
        changes["objective"] = Objective(minimize="cost")
    instance = instance.model_copy(update=changes)
    options = options or SolveOptions()
    resolved = resolve(instance)
    config_set = enumerate_configs(resolved, options.jobs)
    price = {name: gpu.price_per_gpu_hour for name, gpu in resolved.gpus.items()}
    plan = plan_fleet(instance, options, (resolved, config_set))
    rules = [_rule(model, resolved, config_set, price, options.jobs) for model in resolved.models]
    rules = [rule for rule in rules if rule is not None]
    return Explanation(
        name=instance.name,
        demand=[_demand(cls) for cls in config_set.classes],
        needs=[
            need
            for cls in config_set.classes
            for gpu in resolved.gpus
            if (need := _need(cls.name, cls.requests_per_s, gpu, config_set, price)) is not None
        ],
        rules=rules,
        plan_gpus=sum(plan.gpus.values()),
        plan_cost_per_hour=plan.cost_per_hour,
        plan_status=plan.status,
        plan_mip_gap=plan.mip_gap,
        rule_gpus=sum(rule.gpus for rule in rules),
        rule_cost_per_hour=sum(rule.cost_per_hour for rule in rules),
        left_out=left_out,
    )


def _demand(cls) -> ClassDemand:
    return ClassDemand(
        cls.name,
        cls.model,
        cls.requests_per_s,
        cls.shape.input_mean,
        cls.shape.output_mean,
        cls.prefill_tokens_per_s,
        cls.decode_tokens_per_s,
    )


def _need(
    workload: str, rate: float, gpu: str, config_set: ConfigSet, price: dict[str, float]
) -> ClassNeed | None:
    options = paths([k for k in config_set.configs if k.gpu == gpu], workload)
    if not options:
        return None
    path = min(options, key=_gpus_per_request)
    gpu_seconds = rate * _gpus_per_request(path)
    binding = ", ".join(dict.fromkeys(p.limited_by for p in path))
    return ClassNeed(workload, gpu, describe(path), gpu_seconds, gpu_seconds * price[gpu], binding)


def parts(configs: list[Config], workload: str) -> list[Part]:
    """The configs that may carry the class, each with what one replica carries of it alone."""
    found = []
    for config in configs:
        if workload in config.usage:
            rate, binding = max_rate(config.capacity, config.usage[workload])
            found.append(Part(config, rate, RESOURCE_LABELS[binding]))
    return found


def paths(configs: list[Config], workload: str) -> list[Path]:
    """Every way to serve the class: a colocated config, or a prefill config and a decode one."""
    by_role: dict[str, list[Part]] = {"colocated": [], "prefill": [], "decode": []}
    for part in parts(configs, workload):
        by_role[part.config.role].append(part)
    pairs = [(p, d) for p in by_role["prefill"] for d in by_role["decode"]]
    return [(p,) for p in by_role["colocated"]] + pairs


def describe(path: Path) -> str:
    """`h100-sxm tp2 colocated, 28.7 ms step, 256-token chunk`; pairs joined by `+`."""
    words = []
    for part in path:
        k = part.config
        where = f"{k.gpu} tp{k.tp} {k.role}"
        if k.measured:
            words.append(f"{where}, measured")
        elif k.role == "prefill":
            words.append(f"{where}, {k.op.chunk_tokens:,}-token chunk")
        elif k.role == "decode":
            words.append(f"{where}, {k.op.step_s * 1e3:.1f} ms step")
        else:
            words.append(
                f"{where}, {k.op.step_s * 1e3:.1f} ms step, {k.op.chunk_tokens:,}-token chunk"
            )
    return " + ".join(words)


def _gpus_per_request(path: Path) -> float:
    return sum(p.config.tp / p.requests_per_s for p in path)


def _rule(
    model: str, resolved: Resolved, config_set: ConfigSet, price: dict[str, float], jobs: int
) -> RequestsRule | None:
    """Size the model's fleet by requests/s: one average request, its cheapest path, scaled."""
    classes = [c for c in config_set.classes if c.model == model]
    if not classes:
        return None
    context = resolved.models[model].spec.max_context
    average = average_workload(model, resolved.instance, context)
    only = resolved.instance.model_copy(update={"workloads": [average]})
    average_set = enumerate_configs(resolve(only), jobs)
    total = average.rate

    def bought(path: Path) -> list[int]:
        return [math.ceil(total / p.requests_per_s - 1e-9) for p in path]

    def cost(path: Path) -> float:
        return sum(
            n * p.config.tp * price[p.config.gpu] for n, p in zip(bought(path), path, strict=True)
        )

    options = paths(average_set.configs, AVERAGE)
    if not options:
        return None
    path = min(options, key=lambda option: (cost(option), _gpus_per_request(option)))
    gpus = sum(n * p.config.tp for n, p in zip(bought(path), path, strict=True))
    return RequestsRule(
        model=model,
        requests_per_s=total,
        input_tokens=average.input.mean,
        output_tokens=average.output.mean,
        path=describe(path),
        requests_per_s_per_gpu=1 / _gpus_per_request(path),
        gpus=gpus,
        cost_per_hour=cost(path),
        shares=[
            share
            for c in classes
            for share in _shares(c.name, c.requests_per_s, path, config_set, price)
        ],
    )


def _shares(
    workload: str, rate: float, path: Path, config_set: ConfigSet, price: dict[str, float]
) -> list[RuleShare]:
    """Per pool of the rule's path: the class's slice of it, and what the class takes on the
    same GPU type, tp and role at its own best operating point."""
    shares = []
    for part in path:
        k = part.config
        rule = rate * k.tp / part.requests_per_s
        same = [
            c
            for c in config_set.configs
            if (c.gpu, c.tp, c.role, c.measured) == (k.gpu, k.tp, k.role, k.measured)
        ]
        found = parts(same, workload)
        pool = f"{k.gpu} tp{k.tp} {k.role}"
        if not found:
            shares.append(RuleShare(workload, pool, rule, None, None, None))
            continue
        needed = rate * k.tp / max(p.requests_per_s for p in found)
        over = rule - needed
        shares.append(RuleShare(workload, pool, rule, needed, over, over * price[k.gpu]))
    return shares


def average_workload(model: str, instance: Instance, max_context: float) -> Workload:
    """One request standing for all of a model's classes: request-weighted mean lengths, the
    longest tails and the tightest targets (so its configs meet every class's latency). The
    longest prompt of one class and the longest output of another may not fit the model's
    context together: then the output's tail, and if need be the prompt's, shrink to fit, no
    shorter than their means."""
    mine = [w for w in instance.workloads if w.model == model]
    total = sum(w.rate for w in mine)
    slos = [w.slo for w in mine if w.slo is not None]
    percentile = max((s.percentile for s in slos), default=99.0)
    if len(mine) == 1:  # one class is its own average request, spread and all
        inputs, outputs = mine[0].input, mine[0].output
    else:
        rates = [w.rate for w in mine]
        prompts, answers = [w.input for w in mine], [w.output for w in mine]
        prompt_mean, answer_mean = _mean(prompts, rates), _mean(answers, rates)
        longest_prompt = max(d.longest for d in prompts)
        answer_top = max(
            answer_mean, min(max(d.longest for d in answers), max_context - longest_prompt)
        )
        prompt_top = max(prompt_mean, min(longest_prompt, max_context - answer_top))
        inputs = _tails(prompt_mean, prompts, percentile, prompt_top)
        outputs = _tails(answer_mean, answers, percentile, answer_top)

    def tightest(field: str) -> float | None:
        values = [getattr(s, field) for s in slos if getattr(s, field) is not None]
        return min(values, default=None)

    slo = Slo(ttft_ms=tightest("ttft_ms"), tpot_ms=tightest("tpot_ms"), percentile=percentile)
    return Workload(
        name=AVERAGE,
        model=model,
        requests_per_s=total,
        input_tokens=inputs,
        output_tokens=outputs,
        slo=slo if slos else None,
    )


def _mean(dists: list[TokenDistribution], rates: list[float]) -> float:
    return sum(r * d.mean for r, d in zip(rates, dists, strict=True)) / sum(rates)


def _tails(
    mean: float, dists: list[TokenDistribution], percentile: float, longest: float
) -> TokenDistribution:
    """The mean, and the longest of the classes' tails up to `longest`."""
    tail = max(d.at_percentile(percentile) for d in dists)
    return TokenDistribution(mean=mean, p99=min(longest, tail), max=longest)
