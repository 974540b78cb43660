"""Slot tiers: a decoding point also has configs without the classes whose long sequences
leave few batch slots, so a class made eligible by a looser target takes no room from the rest
(configs.slot_tiers, docs/formulation.md "Slot tiers")."""

from __future__ import annotations

import pytest

from fleetopt.catalog import resolve
from fleetopt.configs import enumerate_configs, limits_of, request_class, slot_tiers
from fleetopt.instance import parse_instance
from fleetopt.perf.curves import replica_for
from fleetopt.perf.operating_point import batch_slots
from fleetopt.perf.throughput import candidate_points
from fleetopt.pipeline import plan_fleet
from fleetopt.verify import verify

MODEL = "llama-3.3-70b"


def _instance(long_tpot_ms: float) -> dict:
    """Found by fuzzing (seed 76, 2026-12-06): 20,000-token prompts of two output tokens beside
    a 76 req/s chat, one GPU type; the long class's TPOT decides where it may decode."""
    return {
        "name": "slots",
        "gpus": [{"type": "h200"}],
        "models": [{"name": MODEL, "weight_dtype": "fp4"}],
        "workloads": [
            {
                "name": "long",
                "model": MODEL,
                "prefill_tokens_per_s": 1249.2,
                "input_tokens": {"mean": 20148, "p50": 11079, "p90": 32000, "p99": 32000},
                "output_tokens": 2,
                "slo": {"ttft_ms": 18558, "tpot_ms": long_tpot_ms, "percentile": 99},
            },
            {
                "name": "chat",
                "model": MODEL,
                "requests_per_s": 76.079,
                "input_tokens": {"mean": 1566, "p50": 1525, "p90": 3020, "p99": 3818},
                "output_tokens": {"mean": 613, "p99": 1252, "max": 1439},
                "slo": {"ttft_ms": 2402},
            },
        ],
        "serving": {"modes": ["disaggregated"], "tensor_parallel": [2]},
    }


def _classes_and_point(role: str):
    resolved = resolve(parse_instance(_instance(159)))
    classes = [request_class(w) for w in resolved.instance.workloads]
    replica = replica_for(resolved.models[MODEL], resolved.gpus["h200"], 2, role, [])
    limits = limits_of(resolved)
    point = candidate_points(replica, role, classes[1].shape, [2048], limits)[0]
    return replica, point, classes, limits


def test_a_decode_point_leaves_the_long_class_out_of_a_config():
    replica, point, (long, chat), limits = _classes_and_point("decode")
    few, many = (batch_slots(replica, c.shape, limits) for c in (long, chat))
    assert many >= 1.25 * few  # the 20,000-token prompts leave far fewer slots
    tiers = slot_tiers(replica, point, [long, chat], limits)
    assert [(tier, [c.name for c in members]) for tier, members in tiers] == [
        (None, ["long", "chat"]),
        (many, ["chat"]),
    ]
    assert slot_tiers(replica, point, [chat], limits) == [(None, [chat])]


def test_a_prefill_point_has_one_config_per_level():
    replica, point, classes, limits = _classes_and_point("prefill")
    assert slot_tiers(replica, point, classes, limits) == [(None, classes)]


def test_the_chat_has_more_room_without_the_long_class():
    resolved = resolve(parse_instance(_instance(159)))
    decode = [c for c in enumerate_configs(resolved).configs if c.role == "decode"]
    alone = [c for c in decode if c.slot_tier is not None]
    assert alone and all(set(c.usage) == {"chat"} for c in alone)
    for config in alone:
        shared = next(
            c for c in decode if c.op == config.op and c.slot_tier is None and "long" in c.usage
        )
        use, used = config.usage["chat"], shared.usage["chat"]
        room = {r: config.capacity[r] / use[r] for r in use if use[r]}
        less = {r: shared.capacity[r] / used[r] for r in room}
        assert all(room[r] >= less[r] for r in room) and any(room[r] > less[r] for r in room)


@pytest.mark.parametrize("tight, loose", [(39.8, 159.0), (39.8, 80.0)])
def test_a_looser_tpot_of_the_long_class_never_costs_more(tight, loose):
    # before the tiers: 288.00 $/h at 39.8 ms, 296.00 $/h at 159 ms (at 159 ms the long class
    # may decode on the chat's points, whose only config then held the chat to its slots)
    plans = {t: plan_fleet(parse_instance(_instance(t))) for t in (tight, loose)}
    assert plans[loose].cost_per_hour <= plans[tight].cost_per_hour * (1 + 1e-9)
    for t, plan in plans.items():
        assert verify(plan, resolve(parse_instance(_instance(t)))) == []
