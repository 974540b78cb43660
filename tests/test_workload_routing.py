"""Length routing: a data-given mix split into prompt-length buckets, each held to its own tail
length, priced by the program beside one pool for all lengths and the best single boundary;
a trace replayed against the plan lands each row in its bucket and the plan holds."""

from __future__ import annotations

import copy
import json
import time
from itertools import pairwise

import numpy as np
import pytest
import yaml
from click.testing import CliRunner

from fleetopt.catalog import resolve
from fleetopt.cli import main
from fleetopt.errors import Interrupted
from fleetopt.instance import TokenDistribution, parse_instance
from fleetopt.pipeline import plan_fleet
from fleetopt.plan import Plan
from fleetopt.simulate import request_stream, simulate_plan
from fleetopt.solve import SolveOptions
from fleetopt.verify import verify
from fleetopt.workload import routing
from fleetopt.workload.buckets import bucket_percentile
from fleetopt.workload.routing import Router, cost
from tests.test_interrupt import _interrupt

CELLS = [(200, 50, 0.55), (2000, 50, 0.35), (12000, 20, 0.1)]
"""Short chat (a clear majority, so a sampled trace keeps boundary 201 too), medium prompts and a
long-prompt tail (candidate boundaries 201 and 2001) at 100 req/s."""


def _instance(workload: dict) -> dict:
    return {
        "name": "lengths",
        "gpus": [{"type": "l40s"}, {"type": "h100-sxm"}],
        "models": [{"name": "llama-3.1-8b"}],
        "workloads": [
            {
                "name": "chat",
                "model": "llama-3.1-8b",
                "slo": {"ttft_ms": 1000, "tpot_ms": 40, "percentile": 99},
                **workload,
            }
        ],
        "serving": {"modes": ["colocated"], "tensor_parallel": [1]},
    }


HISTOGRAM = _instance(
    {
        "requests_per_s": 100,
        "lengths": {
            "histogram": [{"input_tokens": i, "output_tokens": o, "share": s} for i, o, s in CELLS]
        },
    }
)


@pytest.fixture(scope="module")
def plan():
    return plan_fleet(parse_instance(copy.deepcopy(HISTOGRAM)))


def test_one_pool_is_the_whole_mix_as_one_class(plan):
    """The one-pool answer is the plan of the mix written out by hand as one class."""
    by_hand = _instance(
        {
            "requests_per_s": 100,
            "input_tokens": {
                "mean": 2010,  # 0.55·200 + 0.35·2000 + 0.1·12000
                "min": 200,
                "p50": 200,
                "p90": 2000,
                "p99": 12000,
                "max": 12000,
            },
            "output_tokens": {"mean": 47, "min": 20, "p50": 50, "p90": 50, "p99": 50, "max": 50},
        }
    )
    expected = plan_fleet(parse_instance(by_hand)).cost_per_hour
    assert plan.length_routing["one_pool_cost_per_hour"] == pytest.approx(expected)


def test_the_best_two_pool_answer_is_the_cheapest_single_boundary(plan):
    instance = parse_instance(copy.deepcopy(HISTOGRAM))
    router = Router(instance, SolveOptions(), plan_fleet)
    assert router.candidates == {"chat": [201, 2001]}
    singles = [cost(router.answer({"chat": (1, edge)})) for edge in (201, 2001)]
    routing = plan.length_routing
    assert routing["best_two_pool_cost_per_hour"] == pytest.approx(min(singles))
    assert routing["best_two_pool_boundaries"]["chat"] == [[201, 2001][int(np.argmin(singles))]]


def test_the_plan_is_the_cheapest_answer_and_states_its_saving(plan):
    routing = plan.length_routing
    answers = [routing[f"{k}_cost_per_hour"] for k in ("one_pool", "best_two_pool", "optimised")]
    assert plan.cost_per_hour == pytest.approx(min(a for a in answers if a is not None))
    for key in ("one_pool", "best_two_pool"):
        saving = routing[f"saving_vs_{key}_per_hour"]
        assert saving == pytest.approx(routing[f"{key}_cost_per_hour"] - plan.cost_per_hour)
        assert saving >= 0
    assert [w.name for w in plan.workloads] == [b["name"] for b in routing["buckets"]]


def test_a_time_limit_covers_the_whole_search():
    """Each split is solved in what is left of the limit (at least MIN_SECONDS); once it is
    spent no further split is tried, and the record says the search was cut short. Here the
    first solve outlasts the limit (it sleeps past it after planning)."""
    limits = []

    def slow(instance, options):
        limits.append(options.time_limit)
        answer = plan_fleet(instance, options)
        time.sleep(0.3)
        return answer

    instance = parse_instance(copy.deepcopy(HISTOGRAM))
    plan = routing.plan_length_routing(instance, SolveOptions(time_limit=0.2), slow)
    assert len(limits) == 1 and limits[0] >= routing.MIN_SECONDS
    assert plan.length_routing["chosen"] == "one_pool"
    assert plan.length_routing["time_limit_cut_short"] is True


@pytest.mark.parametrize(
    ("how", "chosen"), [("handed back", "best_two_pool"), ("raised", "one_pool")]
)
def test_ctrl_c_stops_the_search_with_the_best_plan_so_far(plan, how, chosen):
    """Ctrl-C during the second split's solve stops the search: no further split is begun, and
    the plan is the cheapest answer so far, marked interrupted. Where HiGHS handed back its
    best plan, that plan counts (here it is the whole solve's: the single boundary at 201,
    cheaper than one pool); where Ctrl-C came outside HiGHS, the split has no answer. The
    search had taken a handed-back plan for the split's answer and gone on."""
    calls = []

    def ctrl_c_in_the_second(instance, options):
        calls.append(len(instance.workloads))
        answer = plan_fleet(instance, options)
        if len(calls) == 2 and how == "raised":
            raise KeyboardInterrupt
        answer.interrupted = len(calls) == 2
        return answer

    instance = parse_instance(copy.deepcopy(HISTOGRAM))
    stopped = routing.plan_length_routing(instance, SolveOptions(), ctrl_c_in_the_second)
    assert calls == [1, 2]  # the one pool, then the first single boundary
    assert stopped.interrupted and stopped.length_routing["chosen"] == chosen
    assert stopped.cost_per_hour == pytest.approx(plan.length_routing[f"{chosen}_cost_per_hour"])
    assert plan.length_routing["best_two_pool_boundaries"] == {"chat": [201]}


def test_ctrl_c_before_any_plan_stops_the_command():
    def ctrl_c(instance, options):
        raise KeyboardInterrupt

    instance = parse_instance(copy.deepcopy(HISTOGRAM))
    with pytest.raises(Interrupted, match="before any length split had a plan"):
        routing.plan_length_routing(instance, SolveOptions(), ctrl_c)


SIDE_BY_SIDE_CHILD = """
import copy, json
from fleetopt.instance import parse_instance
from fleetopt.solve import SolveOptions
from fleetopt.workload import routing
from tests.test_workload_routing import HISTOGRAM, hold_in_workers
in_parallel = routing.Router._in_parallel
def announce(self, new, jobs):
    print("PRICING", flush=True)
    return in_parallel(self, new, jobs)
routing.Router._in_parallel = announce
instance = parse_instance(copy.deepcopy(HISTOGRAM))
plan = routing.plan_length_routing(instance, SolveOptions(jobs=2), hold_in_workers)
print("PLAN " + json.dumps({"interrupted": plan.interrupted, "cost": plan.cost_per_hour,
                            "chosen": plan.length_routing["chosen"]}))
"""


def hold_in_workers(instance, options):
    """`plan_fleet`, held for minutes first in a worker (where `jobs` is 1): only stopping the
    workers ends the search in time."""
    if options.jobs == 1:
        time.sleep(600)
    return plan_fleet(instance, options)


def test_ctrl_c_stops_splits_priced_side_by_side_and_keeps_the_best_plan(plan):
    """A real SIGINT while the single boundaries are priced in workers: they are stopped at
    once (held there for minutes, they would outlast the wait), and the plan is the one pool's."""
    done = _interrupt(SIDE_BY_SIDE_CHILD, ready="PRICING\n", settle_s=0.5)
    assert done.returncode == 0, done.stderr
    stopped = json.loads(done.stdout.split("PLAN ", 1)[1])
    assert stopped["interrupted"] and stopped["chosen"] == "one_pool"
    assert stopped["cost"] == pytest.approx(plan.length_routing["one_pool_cost_per_hour"])


def test_splits_priced_side_by_side_give_the_plan_priced_one_after_another(plan):
    """With jobs > 1 each search step's splits are solved in worker processes at once."""
    instance = parse_instance(copy.deepcopy(HISTOGRAM))
    side_by_side = plan_fleet(instance, SolveOptions(jobs=2)).to_dict()
    one_after_another = plan.to_dict()
    for timed in (side_by_side, one_after_another):
        del timed["solve_seconds"]  # wall time, the one field that differs
    assert side_by_side == one_after_another


def test_without_a_time_limit_every_split_is_tried(plan):
    assert plan.length_routing["time_limit_cut_short"] is False
    assert plan.length_routing["best_two_pool_cost_per_hour"] is not None


def test_buckets_cover_the_mix_and_carry_its_rate(plan):
    buckets = plan.length_routing["buckets"]
    assert sum(b["requests_share"] for b in buckets) == pytest.approx(1)
    assert sum(b["requests_per_s"] for b in buckets) == pytest.approx(100)
    assert buckets[0]["input_tokens_from"] == 1 and buckets[-1]["input_tokens_to"] is None
    for lower, upper in pairwise(buckets):
        assert upper["input_tokens_from"] == lower["input_tokens_to"] + 1


def _split_plan(instance, edge: int) -> Plan:
    """The router's answer for two buckets split at `edge`, recorded as a chosen plan is,
    whichever answer the search chooses."""
    router = Router(instance, SolveOptions(), plan_fleet)
    answers = {"one_pool": router.one_pool(), "best_two_pool": router.answer({"chat": (1, edge)})}
    edges, split, error = answers["best_two_pool"]
    assert error is None, error
    split.length_routing = routing._record(router, edges, "best_two_pool", answers)
    return split


def test_a_length_routed_plan_verifies_against_the_instance_as_written():
    """verify serves the buckets in place of the workload they split, and they must carry all
    of its requests: a bucket's rate shaved off the record is caught."""
    resolved = resolve(parse_instance(copy.deepcopy(HISTOGRAM)))
    plan = _split_plan(parse_instance(copy.deepcopy(HISTOGRAM)), 201)
    assert len(plan.length_routing["buckets"]) == 2
    assert verify(plan, resolved) == []
    shaved = Plan.from_dict(json.loads(plan.to_json()))
    shaved.length_routing["buckets"][0]["requests_per_s"] *= 0.5
    assert any("length buckets carry" in p for p in verify(shaved, resolved))


def test_each_bucket_is_sized_at_its_tail_length_not_its_mean(plan):
    """A bucket's TTFT length is its prompt length at its own percentile, and the percentiles
    leave the workload as a whole its SLO: Σ share·(100 − p_b) ≤ 100 − 99."""
    buckets = plan.length_routing["buckets"]
    for b in buckets:
        prompt = TokenDistribution(**b["input_tokens"])
        assert b["ttft_input_tokens"] == prompt.at_percentile(b["slo_percentile"])
        assert b["ttft_input_tokens"] >= prompt.mean
    misses = sum(b["requests_share"] * (100 - b["slo_percentile"]) for b in buckets)
    assert misses <= 1 + 1e-9


@pytest.mark.parametrize(
    ("share", "high", "expected"),
    [(0.3, None, 100 - (1 - 0.7 * 0.1) / 0.3), (0.3, 500, 99.9), (1.0, None, 99.0)],
)
def test_bucket_percentiles_by_hand(share, high, expected):
    assert bucket_percentile(99, share, high) == pytest.approx(expected)


def test_one_bucket_is_one_pool():
    data = copy.deepcopy(HISTOGRAM)
    data["workloads"][0]["buckets"] = 1
    plan = plan_fleet(parse_instance(data))
    assert plan.length_routing["chosen"] == "one_pool"
    assert [w.name for w in plan.workloads] == ["chat"]


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    """4,000 Poisson arrivals at 100 req/s with the histogram's lengths (seed 0)."""
    rng = np.random.default_rng(0)
    count = 4000
    arrivals = np.cumsum(rng.exponential(1 / 100, count))
    cells = rng.choice(len(CELLS), size=count, p=[c[2] for c in CELLS])
    path = tmp_path_factory.mktemp("trace") / "trace.csv"
    rows = [f"{t:.4f},{CELLS[c][0]},{CELLS[c][1]}" for t, c in zip(arrivals, cells, strict=True)]
    path.write_text("time,input_tokens,output_tokens\n" + "\n".join(rows) + "\n")
    return path


def test_a_trace_replays_into_the_buckets_and_the_plan_holds(trace):
    """Every row lands in the bucket whose prompt range holds it, and each bucket meets its
    percentile within one point."""
    instance = parse_instance(_instance({"trace": str(trace), "rate": "from_trace"}))
    plan, resolved = _split_plan(instance, 201), resolve(instance)
    requests = request_stream(plan, resolved, trace=str(trace))
    assert len(plan.length_routing["buckets"]) == 2
    for index, b in enumerate(plan.length_routing["buckets"]):
        top = b["input_tokens_to"] or np.inf
        inside = (requests.input_tokens >= b["input_tokens_from"]) & (requests.input_tokens <= top)
        assert (requests.workload[inside] == index).all() and inside.any()
    report = simulate_plan(plan, resolved, requests)
    assert report["refused"] == 0
    for w in report["workloads"]:
        assert w["slo_attainment"]["both"] >= w["slo"]["percentile"] / 100 - 0.01, w["name"]


def test_solve_and_simulate_from_the_command_line(trace, tmp_path):
    """The table shows the buckets and the answers; simulate --trace replays the plan JSON."""
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "t.csv").write_text(trace.read_text())
    instance = tmp_path / "i.yaml"
    instance.write_text(yaml.safe_dump(_instance({"trace": "data/t.csv", "rate": "from_trace"})))
    table = CliRunner().invoke(main, ["solve", str(instance)])
    assert table.exit_code == 0, table.output
    assert "length routing:" in table.output and "one pool for all lengths" in table.output
    plan = tmp_path / "plan.json"
    solved = CliRunner().invoke(main, ["solve", str(instance), "--format", "json", "-o", str(plan)])
    assert solved.exit_code == 0, solved.output
    args = ["simulate", str(plan), "--instance", str(instance), "--trace", str(trace)]
    result = CliRunner().invoke(main, [*args, "--format", "json"])
    assert result.exit_code == 0, result.output
    buckets = json.loads(plan.read_text())["length_routing"]["buckets"]
    report = json.loads(result.output)
    assert [w["name"] for w in report["workloads"]] == [b["name"] for b in buckets]
