"""`fleetopt explain`: tokens/s beside requests/s, GPU-seconds per GPU type, and the requests/s
rule's error, on the instances derived from the Azure 2023 traces."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from fleetopt.cli import main
from fleetopt.explain import explain
from fleetopt.instance import load_instance

INSTANCES = Path(__file__).resolve().parent.parent / "instances"


@pytest.fixture(scope="module")
def both():
    return explain(load_instance(INSTANCES / "azure-conv-and-code-70b.yaml"))


def test_requests_per_s_hides_the_tokens(both):
    demand = {d.workload: d for d in both.demand}
    conv, code = demand["conversation"], demand["code"]
    assert conv.requests_per_s == pytest.approx(2.15 * code.requests_per_s, rel=0.01)
    assert conv.prefill_tokens_per_s == pytest.approx(6_390, rel=0.01)
    assert code.prefill_tokens_per_s == pytest.approx(5_260, rel=0.01)
    assert conv.decode_tokens_per_s == pytest.approx(1_170, rel=0.01)
    assert code.decode_tokens_per_s == pytest.approx(72, rel=0.01)


def test_gpu_seconds_follow_the_program_coefficients(both):
    needs = {(n.workload, n.gpu): n for n in both.needs}
    assert ("conversation", "h100-sxm") in needs and ("code", "h100-sxm") in needs
    for need in both.needs:
        assert need.gpu_seconds_per_s > 0
        assert need.path.startswith(need.gpu)


def test_the_rule_misplaces_gpus_per_class_and_phase(both):
    """The average request over-sizes conversation prefill and code decode, and under-sizes
    conversation decode and code prefill."""
    (rule,) = both.rules
    over = {(s.workload, s.pool.split()[-1]): s.over_gpus for s in rule.shares}
    if ("code", "decode") in over:
        assert over["conversation", "prefill"] > 0 > over["conversation", "decode"]
        assert over["code", "prefill"] < 0 < over["code", "decode"]
    assert rule.input_tokens == pytest.approx((5.53 * 1155 + 2.57 * 2048) / 8.1, rel=1e-6)
    assert both.over_gpus == both.rule_gpus - both.plan_gpus


def test_one_class_rule_matches_its_own_sizing():
    ex = explain(load_instance(INSTANCES / "azure-code-70b.yaml"))
    assert all(s.over_gpus == pytest.approx(0, abs=1e-9) for r in ex.rules for s in r.shares)


def test_cli_table_and_json():
    path = str(INSTANCES / "azure-conv-70b.yaml")
    table = CliRunner().invoke(main, ["explain", path])
    assert table.exit_code == 0, table.output
    assert "prefill tok/s" in table.output and "GPU-s per s" in table.output
    data = json.loads(CliRunner().invoke(main, ["explain", path, "--format", "json"]).output)
    assert {"demand", "needs", "rules", "over_gpus", "plan_gpus"} <= set(data)
