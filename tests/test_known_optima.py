"""Small instances whose optimum the test derives itself: by hand (in comments) and by brute force.

Measured profiles (Mélange style) make one replica of GPU type g carry mu[g][c] req/s of class c,
and any fraction of a class may go to any replica, so a fleet x (replicas per type) is feasible
iff there are rates r[c][g] >= 0 with sum_g r[c][g] = lambda_c and sum_c r[c][g]/mu[g][c] <= x_g.
The brute force enumerates every x that could be optimal and decides that question exactly:

* one class: feasible iff sum_g x_g * mu[g] >= lambda;
* two GPU types: moving a unit of class c to type A uses 1/mu[A][c] of A and frees 1/mu[B][c] of B,
  so filling A with the classes of the highest mu[A][c]/mu[B][c] first (fractional knapsack)
  minimises B's load; feasible iff that minimum fits x_B;
* otherwise: a feasibility LP over the routed rates for the fixed x (HiGHS's LP solver, called
  directly; no integer variables, none of fleetopt's code).

No x_g above M_g = ceil(sum_c lambda_c / mu[g][c]) is ever needed: M_g replicas of g alone carry all
the demand, so any fleet with more is dominated by that one. The enumeration stops there.
"""

from __future__ import annotations

import itertools
import math
import random
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import analytic_instance, solve

from fleetopt.catalog import resolve
from fleetopt.configs import enumerate_configs, limits_of, request_class
from fleetopt.instance import load_instance, parse_instance
from fleetopt.perf.operating_point import PREFILL
from fleetopt.perf.replica import Replica
from fleetopt.perf.throughput import best_throughput
from fleetopt.report.text import summary_lines

INSTANCES = Path(__file__).resolve().parent.parent / "instances"
EPS = 1e-9


@dataclass
class Offer:
    """A GPU type in a profile instance: catalog key, price, per-class capacity, purchase rules."""

    type: str
    price: float
    mu: dict[str, float]  # class -> max req/s of one replica (tp 1)
    max_gpus: int | None = None
    gpus_per_node: int | None = None

    def bought(self, replicas: int) -> int:
        node = self.gpus_per_node or 1
        return math.ceil(replicas / node) * node


@dataclass
class Klass:
    name: str
    input_tokens: float
    output_tokens: float
    requests_per_s: float


def profile_instance(offers: list[Offer], classes: list[Klass]) -> dict:
    """An instance whose only configs are the measured profiles: one table row per class, at the
    class's exact lengths (an exact row is the unique nearest covering row, so it is the rate)."""
    gpus = []
    for o in offers:
        g = {"type": o.type, "price_per_gpu_hour": o.price}
        if o.max_gpus is not None:
            g["max_gpus"] = o.max_gpus
        if o.gpus_per_node is not None:
            g["gpus_per_node"] = o.gpus_per_node
        gpus.append(g)
    return {
        "name": "profiles",
        "gpus": gpus,
        "models": [{"name": "llama-2-7b"}],
        "workloads": [
            {
                "name": c.name,
                "model": "llama-2-7b",
                "requests_per_s": c.requests_per_s,
                "input_tokens": c.input_tokens,
                "output_tokens": c.output_tokens,
            }
            for c in classes
        ],
        "serving": {"modes": ["colocated"], "tensor_parallel": [1]},
        "profiles": [
            {
                "model": "llama-2-7b",
                "gpu": o.type,
                "tensor_parallel": 1,
                "role": "colocated",
                "table": [
                    {
                        "input_tokens": c.input_tokens,
                        "output_tokens": c.output_tokens,
                        "max_requests_per_s": o.mu[c.name],
                    }
                    for c in classes
                ],
            }
            for o in offers
        ],
    }


def _feasible(offers: list[Offer], classes: list[Klass], x: tuple[int, ...]) -> bool:
    if len(classes) == 1:
        c = classes[0]
        return sum(n * o.mu[c.name] for n, o in zip(x, offers, strict=True)) >= c.requests_per_s * (
            1 - EPS
        )
    if len(offers) == 1:
        return sum(c.requests_per_s / offers[0].mu[c.name] for c in classes) <= x[0] * (1 + EPS)
    if len(offers) == 2:
        a, b = offers
        room_a, load_b = float(x[0]), 0.0
        for c in sorted(classes, key=lambda c: a.mu[c.name] / b.mu[c.name], reverse=True):
            to_a = min(c.requests_per_s, room_a * a.mu[c.name])
            room_a -= to_a / a.mu[c.name]
            load_b += (c.requests_per_s - to_a) / b.mu[c.name]
        return load_b <= x[1] * (1 + EPS)
    return _feasible_lp(offers, classes, x)


def _feasible_lp(offers: list[Offer], classes: list[Klass], x: tuple[int, ...]) -> bool:
    """The routing question as a pure LP feasibility problem, given to HiGHS's LP solver directly
    (a separate formulation from fleetopt's MIP: here the replicas are fixed numbers)."""
    import highspy
    import numpy as np

    pairs = [(ci, gi) for ci in range(len(classes)) for gi in range(len(offers))]
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    inf = highspy.kHighsInf
    h.addVars(len(pairs), np.zeros(len(pairs)), np.full(len(pairs), inf))
    for c, cls in enumerate(classes):  # sum_g r[c][g] = lambda_c
        idx = np.array([i for i, (ci, _) in enumerate(pairs) if ci == c], dtype=np.int32)
        h.addRow(cls.requests_per_s, cls.requests_per_s, len(idx), idx, np.ones(len(idx)))
    for g, o in enumerate(offers):  # sum_c r[c][g] / mu[g][c] <= x_g
        idx = np.array([i for i, (_, gi) in enumerate(pairs) if gi == g], dtype=np.int32)
        val = np.array([1.0 / o.mu[classes[pairs[i][0]].name] for i in idx])
        h.addRow(-inf, x[g] * (1 + 1e-7), len(idx), idx, val)
    h.run()
    status = h.getModelStatus()
    assert status in (highspy.HighsModelStatus.kOptimal, highspy.HighsModelStatus.kInfeasible)
    return status == highspy.HighsModelStatus.kOptimal


def brute_force(offers: list[Offer], classes: list[Klass]) -> float:
    """Cheapest feasible fleet by exhaustive enumeration (math.inf if none)."""
    ranges = []
    for o in offers:
        alone = math.ceil(sum(c.requests_per_s / o.mu[c.name] for c in classes) - EPS)
        top = alone
        if o.max_gpus is not None:
            while top > 0 and o.bought(top) > o.max_gpus:
                top -= 1
        ranges.append(range(top + 1))
    fleets = sorted(
        (sum(o.bought(n) * o.price for n, o in zip(x, offers, strict=True)), x)
        for x in itertools.product(*ranges)
    )
    for cost, x in fleets:  # cheapest first: the first feasible fleet is the optimum
        if _feasible(offers, classes, x):
            return cost
    return math.inf


def check(offers: list[Offer], classes: list[Klass]) -> float:
    expected = brute_force(offers, classes)
    assert math.isfinite(expected), "test instance must be feasible"
    plan = solve(profile_instance(offers, classes))
    assert plan.status == "optimal"
    assert plan.cost_per_hour == pytest.approx(expected, abs=1e-6)
    return expected


# --- one class --------------------------------------------------------------------------------

# A carries 2 req/s for 1.00 $/h (0.50 $ per req/s), B carries 5 req/s for 2.20 $/h (0.44 $).
CHEAP = Offer("a10g", 1.00, {"chat": 2.0})
BIG = Offer("a100-80gb", 2.20, {"chat": 5.0})


def test_one_class_mixes_two_types():
    # lambda = 7: 4 A = 4.00 (8 req/s); 2 B = 4.40 (10); 1 A + 1 B = 3.20 (exactly 7) is cheapest.
    classes = [Klass("chat", 500, 200, 7)]
    assert check([CHEAP, BIG], classes) == pytest.approx(3.20)


def test_availability_cap_changes_the_optimum():
    # lambda = 23. Uncapped: 3 B + 4 A = 6.60 + 4.00 = 10.60 carries 15 + 8 = 23 exactly
    # (4 B + 2 A = 10.80, 5 B = 11.00). With at most 1 B: 1 B + 9 A = 2.20 + 9.00 = 11.20.
    classes = [Klass("chat", 500, 200, 23)]
    free = check([CHEAP, BIG], classes)
    capped = check([CHEAP, Offer("a100-80gb", 2.20, {"chat": 5.0}, max_gpus=1)], classes)
    assert free == pytest.approx(10.60)
    assert capped == pytest.approx(11.20)


def test_cap_on_the_cheap_type_forces_the_big_one():
    # lambda = 7 with at most 1 A: 1 A + 1 B = 3.20 still fits; with max_gpus 0 on B: 4 A = 4.00.
    classes = [Klass("chat", 500, 200, 7)]
    assert check([Offer("a10g", 1.00, {"chat": 2.0}, max_gpus=1), BIG], classes) == pytest.approx(
        3.20
    )
    assert check([CHEAP, Offer("a100-80gb", 2.20, {"chat": 5.0}, max_gpus=0)], classes) == (
        pytest.approx(4.00)
    )


def test_whole_nodes_change_the_optimum():
    # lambda = 7 with B sold in nodes of 2: 1 A + 1 B now pays for 2 B = 1.00 + 4.40 = 5.40, and
    # 2 B = 4.40 carries 10; 4 A = 4.00 is the cheapest.
    classes = [Klass("chat", 500, 200, 7)]
    noded = Offer("a100-80gb", 2.20, {"chat": 5.0}, gpus_per_node=2)
    assert check([CHEAP, noded], classes) == pytest.approx(4.00)
    plan = solve(profile_instance([CHEAP, noded], classes))
    assert plan.gpus.get("a100-80gb", 0) % 2 == 0


@pytest.mark.parametrize(("rate", "replicas", "frees"), [(12, 3, 0), (22, 5, 4)])
def test_what_one_replica_fewer_frees_under_whole_nodes(rate, replicas, frees):
    """A100s in nodes of 4, 5 req/s a replica (tp 1). At 12 req/s, 3 replicas in one node: one
    fewer leaves the node bought, freeing nothing. At 22 req/s, 5 replicas in two nodes: the
    fifth holds the second node alone, and without it the 4 GPUs of that node go."""
    noded = Offer("a100-80gb", 2.20, {"chat": 5.0}, gpus_per_node=4)
    plan = solve(profile_instance([noded], [Klass("chat", 500, 200, rate)]))
    (pool,) = plan.pools
    assert (pool.replicas, pool.one_fewer_frees_gpus) == (replicas, frees)
    note = [line for line in summary_lines(plan) if line.startswith("pool 0:")]
    assert len(note) == 1 and ("no GPU" if frees == 0 else f"frees {frees} GPUs") in note[0]


def test_whole_nodes_and_cap_together():
    # lambda = 12, A in nodes of 4 capped at 4 GPUs, B uncapped: 4 A (8) + 1 B (5) = 4.00 + 2.20
    # = 6.20; 3 B = 6.60; 2 B + 4 A = 8.40. Optimum 6.20.
    classes = [Klass("chat", 500, 200, 12)]
    noded = Offer("a10g", 1.00, {"chat": 2.0}, max_gpus=4, gpus_per_node=4)
    assert check([noded, BIG], classes) == pytest.approx(6.20)


def test_three_types_one_class():
    # lambda = 9: C = 0.70 $/h for 1 req/s (0.70 $ per req/s) fills small remainders.
    # 1 B + 2 A = 4.20 (9); 1 B + 1 A + 2 C = 4.60; 2 B = 4.40 (10). Optimum 4.20.
    classes = [Klass("chat", 500, 200, 9)]
    tiny = Offer("l4", 0.70, {"chat": 1.0})
    assert check([CHEAP, BIG, tiny], classes) == pytest.approx(4.20)


# --- several classes ----------------------------------------------------------------------------


def test_two_classes_specialised_types():
    # short: A 8 req/s, B 10; long: A 1 req/s, B 4. Demand short 12, long 6.
    # A is relatively better at short (8/10 > 1/4), so A takes short first.
    # 2 B + 1 A: A takes 8 short, B gets 4/10 + 6/4 = 1.9 <= 2 -> 1.00 + 4.40 = 5.40.
    # 3 B = 6.60 (12/10 + 6/4 = 2.7); 1 B + k A: B 4 long = 1.5 > 1 needs more A: 1 B + 4 A
    # (B: 4 long, A: 12/8 + 2/1 = 3.5) = 6.20. Optimum 5.40.
    a = Offer("a10g", 1.00, {"short": 8.0, "long": 1.0})
    b = Offer("a100-80gb", 2.20, {"short": 10.0, "long": 4.0})
    classes = [Klass("short", 100, 50, 12), Klass("long", 2000, 500, 6)]
    assert check([a, b], classes) == pytest.approx(5.40)


def test_three_types_two_classes_lp():
    a = Offer("a10g", 1.00, {"short": 6.0, "long": 1.0})
    b = Offer("a100-80gb", 3.00, {"short": 12.0, "long": 5.0})
    c = Offer("l4", 0.70, {"short": 3.0, "long": 0.5})
    classes = [Klass("short", 100, 50, 14), Klass("long", 2000, 500, 7)]
    check([a, b, c], classes)


def test_melange_example():
    """instances/melange-example.yaml costs 1.01 + 3.67 (its header comment derives it)."""
    instance = load_instance(INSTANCES / "melange-example.yaml")
    prices = {g.type: g.price_per_gpu_hour for g in instance.gpus}
    classes = [
        Klass(w.name, w.input.mean, w.output.mean, w.requests_per_s) for w in instance.workloads
    ]
    offers = []
    for p in instance.profiles:
        mu = {}
        for c in classes:  # every bucket has an exact row in each table
            (row,) = [
                r
                for r in p.table
                if (r.input_tokens, r.output_tokens) == (c.input_tokens, c.output_tokens)
            ]
            mu[c.name] = row.max_requests_per_s
        offers.append(Offer(p.gpu, prices[p.gpu], mu))
    expected = brute_force(offers, classes)
    assert expected == pytest.approx(1.01 + 3.67)
    from fleetopt.pipeline import plan_fleet

    plan = plan_fleet(instance)
    assert plan.status == "optimal"
    assert plan.cost_per_hour == pytest.approx(expected, abs=1e-6)
    assert plan.gpus == {"a10g": 1, "a100-80gb": 1}


def test_profile_lookup_is_conservative_between_rows():
    # A class of 300 in / 80 out: rows at >= 300 in and >= 80 out are (500, 100) and (500, 500);
    # the nearest is (500, 100) at 4 req/s (the (100, 100) row at 10 req/s does not cover 300 in).
    # lambda = 10 -> ceil(10 / 4) = 3 replicas = 3.00 $/h.
    data = profile_instance(
        [Offer("a10g", 1.00, {"chat": 1.0})], [Klass("chat", 500, 500, 1)]
    )  # template, table replaced below
    data["workloads"][0].update(input_tokens=300, output_tokens=80, requests_per_s=10)
    data["profiles"][0]["table"] = [
        {"input_tokens": 100, "output_tokens": 100, "max_requests_per_s": 10},
        {"input_tokens": 500, "output_tokens": 100, "max_requests_per_s": 4},
        {"input_tokens": 500, "output_tokens": 500, "max_requests_per_s": 1},
    ]
    plan = solve(data)
    assert plan.cost_per_hour == pytest.approx(3.00)
    assert plan.gpus == {"a10g": 3}


def test_profile_without_covering_row_leaves_the_type_out():
    # B's table stops at 1000 input tokens, so B cannot carry 2000-token prompts: all 3 req/s of
    # "long" go to A (1 req/s each, 1.00 $/h) although B would be cheaper per request.
    data = profile_instance(
        [Offer("a10g", 1.00, {"long": 1.0}), Offer("a100-80gb", 2.20, {"long": 5.0})],
        [Klass("long", 2000, 200, 3)],
    )
    data["profiles"][1]["table"][0]["input_tokens"] = 1000
    plan = solve(data)
    assert plan.cost_per_hour == pytest.approx(3.00)
    assert plan.gpus == {"a10g": 3}


def _random_case(seed: int) -> tuple[list[Offer], list[Klass]]:
    rng = random.Random(seed)
    types = rng.sample(["a10g", "l4", "l40s", "a100-80gb"], rng.choice([1, 2, 2, 3]))
    n_classes = rng.choice([1, 2, 3])
    lengths = rng.sample([(100, 50), (500, 200), (1000, 100), (2000, 500)], n_classes)
    classes = [Klass(f"c{i}", inp, out, rng.randint(1, 9)) for i, (inp, out) in enumerate(lengths)]
    offers = []
    for t in types:
        offers.append(
            Offer(
                t,
                rng.randint(50, 400) / 100,
                {c.name: rng.randint(2, 16) / 2 for c in classes},
                max_gpus=rng.choice([None, None, rng.randint(1, 4)]),
                gpus_per_node=rng.choice([None, None, 2, 4]),
            )
        )
    return offers, classes


@pytest.mark.parametrize("seed", range(24))
def test_random_profile_instances_match_brute_force(seed):
    offers, classes = _random_case(seed)
    expected = brute_force(offers, classes)
    data = profile_instance(offers, classes)
    if math.isinf(expected):
        from fleetopt.errors import InfeasibleError

        with pytest.raises(InfeasibleError):
            solve(data)
        return
    plan = solve(data)
    assert plan.cost_per_hour == pytest.approx(expected, abs=1e-6)


# --- analytic cost model: one class, one GPU type, tp 1, colocated ---------------------------------


def _best_rate(data: dict) -> tuple[float, float]:
    """r* of one replica for the class (as configs.py builds its inputs), and the GPU price."""
    resolved = resolve(parse_instance(data))
    instance = resolved.instance
    (gpu,) = resolved.gpus.values()
    (model,) = resolved.models.values()
    cls = request_class(instance.workloads[0])
    best = best_throughput(
        Replica(model, gpu, 1),
        "colocated",
        cls.shape,
        instance.serving.chunk_tokens,
        limits_of(resolved),
    )
    assert best is not None
    return best.requests_per_s, gpu.price_per_gpu_hour


ANALYTIC = [
    # gpu, model, weight dtype, input, output, ttft ms, tpot ms
    ("l40s", "llama-3.1-8b", "fp8", 1000, 200, 1000, 40),
    ("a100-80gb", "llama-3.1-8b", "bf16", 1000, 200, 1000, 40),
    ("h100-sxm", "llama-3.1-8b", "bf16", 1000, 200, 1000, 40),
    ("h100-sxm", "llama-3.1-8b", "fp8", 3000, 300, 2000, 30),
    ("l4", "qwen2.5-7b", "fp8", 500, 100, None, None),
    ("a100-80gb", "mistral-7b", "bf16", 200, 800, 500, 60),
]


def _fewest_replicas(data: dict, demand: float, most: int) -> int:
    """Brute force over the program's configs: with one class, pools are independent, so a
    fleet carries the demand iff the most its pools carry adds up to it. A pool of n replicas of
    config k carries R_k(n) = min over resources of capacity·h(n) / use, with h(n) = n, or the
    pooling curve g_k(n) for prefill compute. A knapsack over (config, n) then gives the fewest
    replicas, mixing configs freely."""
    config_set = enumerate_configs(resolve(parse_instance(data)))
    (cls,) = config_set.classes

    def carried(config, n: int) -> float:
        use = config.usage[cls.name]
        return min(
            cap * (config.queue.load(n) if resource == PREFILL else n) / use[resource]
            for resource, cap in config.capacity.items()
            if use.get(resource)
        )

    best = [0.0] * (most + 1)  # best[n]: most req/s n replicas carry
    for config in config_set.configs:
        pools = [carried(config, n) for n in range(most + 1)]
        best = [max(best[n - j] + pools[j] for j in range(n + 1)) for n in range(most + 1)]
    return next(n for n in range(most + 1) if best[n] >= demand * (1 - 1e-9))


@pytest.mark.parametrize("case", ANALYTIC, ids=lambda c: f"{c[0]}-{c[1]}-{c[2]}-{c[3]}x{c[4]}")
@pytest.mark.parametrize("multiple", [0.4, 2.5, 7.3])
def test_analytic_replicas_match_brute_force(case, multiple):
    """One replica carries at most r* (best_throughput), so ceil(lambda / r*) replicas always
    suffice; pooling (a shared prefill queue absorbs bursts) may let fewer do, never fewer than
    without any queueing margin. The exact count comes from the knapsack above."""
    gpu, model, dtype, inp, out, ttft, tpot = case
    template = analytic_instance([gpu], 1.0, inp, out, ttft, tpot, model=model, weight_dtype=dtype)
    rate, price = _best_rate(template)
    demand = multiple * rate
    data = analytic_instance([gpu], demand, inp, out, ttft, tpot, model=model, weight_dtype=dtype)
    plan = solve(data)
    replicas = sum(p.replicas for p in plan.pools)
    assert replicas <= math.ceil(demand / rate)
    assert replicas == _fewest_replicas(data, demand, math.ceil(demand / rate))
    assert plan.gpus == {gpu: replicas}
    assert plan.cost_per_hour == pytest.approx(replicas * price)
    if ttft is None:  # no queueing margin: exactly ceil(lambda / r*)
        assert replicas == math.ceil(demand / rate)


def test_analytic_demand_at_exactly_the_best_rate_fits_one_replica():
    template = analytic_instance(["h100-sxm"], 1.0, 1000, 200, 1000, 40)
    rate, price = _best_rate(template)
    plan = solve(analytic_instance(["h100-sxm"], rate, 1000, 200, 1000, 40))
    assert plan.gpus == {"h100-sxm": 1}
    assert plan.cost_per_hour == pytest.approx(price)
