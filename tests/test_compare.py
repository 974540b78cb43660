"""`fleetopt compare`: colocated-only, disaggregated-only and mixed, side by side.

Known optima for each mode come from measured profiles for every (GPU, role), where a fleet is a
replica count per config and feasibility is a routing LP (helpers.brute_force_fleet): a colocated
replica carries a class's prefill and decode, a prefill (decode) replica only that phase. Mixed
may use every config of both pure modes, so it never costs more than either.
"""

from __future__ import annotations

import copy
import json

import pytest
import yaml
from click.testing import CliRunner
from helpers import analytic_instance, brute_force_fleet, measured_instance

from fleetopt.cli import main
from fleetopt.compare import compare_modes, explain, to_dict
from fleetopt.errors import NoPlanInTime
from fleetopt.instance import parse_instance

MODEL = "llama-2-7b"
LENGTHS = {"short": (100, 50), "long": (2000, 500)}  # grow in both: exact rows are the rates


def _measured(
    rates: dict[str, float], mu: dict[tuple[str, str], dict[str, float]], prices: dict
) -> dict:
    return measured_instance(
        [{"type": g, "price_per_gpu_hour": p} for g, p in prices.items()],
        [(c, MODEL, *LENGTHS[c], r) for c, r in rates.items()],
        {(MODEL, g, role): m for (g, role), m in mu.items()},
        modes=("colocated", "disaggregated"),
    )


def _expected(rates, mu, prices) -> dict[str, float]:
    roles = {
        "colocated": ("colocated",),
        "disaggregated": ("prefill", "decode"),
        "mixed": ("colocated", "prefill", "decode"),
    }
    out = {}
    for mode, allowed in roles.items():
        configs = [(g, role, m) for (g, role), m in mu.items() if role in allowed]
        out[mode] = brute_force_fleet(rates, configs, prices)[0]
    return out


def _by_mode(data: dict):
    return {r.mode: r for r in compare_modes(parse_instance(copy.deepcopy(data)))}


# One GPU type (a10g, 1.00 $/h). short: colocated 4 req/s, prefill 40, decode 3 per replica;
# long: colocated 1, prefill 2, decode 10. Per request: short 0.25 colocated vs 1/40 + 1/3 =
# 0.358 split; long 1.00 colocated vs 1/2 + 1/10 = 0.60 split.
# Demand short 8, long 4:
#   colocated:     8/4 + 4/1 = 6 replicas                          -> 6.00
#   disaggregated: prefill 8/40 + 4/2 = 2.2 -> 3, decode 8/3 + 4/10 = 3.07 -> 4  -> 7.00
#   mixed: short colocated (2), long split (prefill 2, decode 0.4 -> 1)        -> 5.00
#          (fractional bound 8*0.25 + 4*0.6 = 4.4, so no 4-GPU fleet)
ONE_TYPE = (
    {"short": 8.0, "long": 4.0},
    {
        ("a10g", "colocated"): {"short": 4.0, "long": 1.0},
        ("a10g", "prefill"): {"short": 40.0, "long": 2.0},
        ("a10g", "decode"): {"short": 3.0, "long": 10.0},
    },
    {"a10g": 1.00},
)

# Two types: a10g (1.00) and a100-80gb (2.20); every (type, role) measured, some carry nothing.
TWO_TYPES = (
    {"short": 9.0, "long": 3.0},
    {
        ("a10g", "colocated"): {"short": 3.0, "long": 0.5},
        ("a10g", "prefill"): {},
        ("a10g", "decode"): {"short": 4.0, "long": 6.0},
        ("a100-80gb", "colocated"): {"short": 8.0, "long": 2.0},
        ("a100-80gb", "prefill"): {"short": 50.0, "long": 6.0},
        ("a100-80gb", "decode"): {},
    },
    {"a10g": 1.00, "a100-80gb": 2.20},
)


def test_one_type_known_optimum_of_each_mode():
    rates, mu, prices = ONE_TYPE
    expected = _expected(rates, mu, prices)
    assert expected == {"colocated": 6.0, "disaggregated": 7.0, "mixed": 5.0}
    results = _by_mode(_measured(rates, mu, prices))
    for mode, cost in expected.items():
        assert results[mode].status == "optimal"
        assert results[mode].cost_per_hour == pytest.approx(cost, abs=1e-6), mode
    # The explanation names the cheaper pure mode and the further saving of mixed.
    lines = explain(list(results.values()))
    assert any(line.startswith("colocated is 1.00 $/h") for line in lines), lines
    assert any("cheaper than disaggregated" in line for line in lines), lines
    assert any(line.startswith("mixed saves a further 1.00 $/h") for line in lines), lines


def test_two_types_known_optimum_of_each_mode():
    rates, mu, prices = TWO_TYPES
    expected = _expected(rates, mu, prices)
    results = _by_mode(_measured(rates, mu, prices))
    for mode, cost in expected.items():
        assert results[mode].cost_per_hour == pytest.approx(cost, abs=1e-6), mode
    assert expected["mixed"] <= min(expected["colocated"], expected["disaggregated"]) + 1e-9
    # Here splitting wins (a100 prefill + a10g decode); the explanation names it.
    assert expected["disaggregated"] < expected["colocated"]
    gap = expected["colocated"] - expected["disaggregated"]
    lines = explain(list(results.values()))
    assert any(
        line.startswith(f"disaggregated is {gap:,.2f} $/h") and "cheaper than colocated" in line
        for line in lines
    ), lines


ANALYTIC = {
    "8b-h100": dict(gpus=["h100-sxm"], requests_per_s=10, input_tokens=1000, output_tokens=200),
    "8b-l40s-h100": dict(
        gpus=["l40s", "h100-sxm"], requests_per_s=10, input_tokens=1000, output_tokens=200
    ),
    "8b-long-prompts": dict(
        gpus=["l4", "l40s"],
        requests_per_s=4,
        input_tokens=4000,
        output_tokens=150,
        ttft_ms=3000,
        tpot_ms=60,
    ),
    "8b-fp8-tp12": dict(
        gpus=["l40s", "h100-sxm"],
        requests_per_s=25,
        input_tokens=2500,
        output_tokens=300,
        ttft_ms=1500,
        tpot_ms=60,
        tensor_parallel=(1, 2),
        weight_dtype="fp8",
    ),
    "no-slo": dict(
        gpus=["l4", "a100-80gb"],
        requests_per_s=30,
        input_tokens=800,
        output_tokens=400,
        ttft_ms=None,
        tpot_ms=None,
    ),
}


@pytest.mark.parametrize("case", list(ANALYTIC))
def test_mixed_never_costs_more_than_either_pure_mode_analytic(case):
    data = analytic_instance(modes=("colocated", "disaggregated"), **ANALYTIC[case])
    results = _by_mode(data)
    assert set(results) == {"colocated", "disaggregated", "mixed"}
    mixed = results["mixed"]
    assert mixed.status in ("optimal", "feasible")
    pure = [r.cost_per_hour for m, r in results.items() if m != "mixed" and r.cost_per_hour]
    assert pure, "at least one pure mode must be feasible"
    # within the MIP gap (1e-4 relative)
    assert mixed.cost_per_hour <= min(pure) * (1 + 1e-4)
    for r in results.values():
        if r.plan is not None:
            assert r.cost_per_hour == pytest.approx(r.plan.cost_per_hour)
            assert sum(r.gpus.values()) > 0


def _slow_network() -> dict:
    """Only colocated meets TTFT: a disaggregated prompt of 1,000 tokens ships 1000 x 128 KiB of
    bf16 KV (llama-3.1-8b: 2 * 32 layers * 8 kv heads * 128 * 2 bytes) over 1 MB/s — minutes,
    against a 1 s TTFT target."""
    data = analytic_instance(
        ["h100-sxm"], 10, 1000, 200, ttft_ms=1000, tpot_ms=50, modes=("colocated", "disaggregated")
    )
    data["gpus"][0]["spec"] = {"network_gb_s": 0.001}
    return data


def test_infeasible_mode_shows_its_reason_while_the_others_solve():
    results = _by_mode(_slow_network())
    assert results["disaggregated"].status == "infeasible"
    assert results["disaggregated"].cost_per_hour is None
    reason = results["disaggregated"].binding[0]
    assert "ttft" in reason.lower() and "chat" in reason
    for mode in ("colocated", "mixed"):
        assert results[mode].status == "optimal"
        assert results[mode].cost_per_hour > 0
    assert results["mixed"].cost_per_hour == pytest.approx(
        results["colocated"].cost_per_hour, rel=1e-4
    )
    mixed_roles = {p.role for p in results["mixed"].plan.pools}
    assert mixed_roles == {"colocated"}
    lines = explain(list(results.values()))
    assert any(line.startswith("disaggregated: no fleet") for line in lines), lines


# --- JSON through the command line ------------------------------------------------------------

MODE_FIELDS = {
    "cost_per_hour",
    "gpus",
    "output_tokens_per_s_per_gpu",
    "cost_per_million_input_tokens",
    "cost_per_million_output_tokens",
    "utilization",
    "binding",
    "status",
}


def _compare_json(tmp_path, data: dict) -> dict:
    path = tmp_path / "instance.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    result = CliRunner().invoke(main, ["compare", str(path), "--format", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_cli_json_has_the_fields(tmp_path):
    rates, mu, prices = ONE_TYPE
    out = _compare_json(tmp_path, _measured(rates, mu, prices))
    assert set(out) >= {"modes", "explanation"}
    assert set(out["modes"]) == {"colocated", "disaggregated", "mixed"}
    for mode, entry in out["modes"].items():
        assert set(entry) >= MODE_FIELDS, (mode, MODE_FIELDS - set(entry))
        assert entry["status"] == "optimal"
        assert isinstance(entry["binding"], list) and entry["binding"]
        gpus = sum(entry["gpus"].values())
        assert gpus == entry["cost_per_hour"]  # a10g at 1.00 $/h
        assert 0 < entry["utilization"] <= 1 + 1e-9
        # 8 * 50 + 4 * 500 = 2,400 output tokens/s over the fleet
        assert entry["output_tokens_per_s_per_gpu"] == pytest.approx(2400 / gpus)
        assert entry["cost_per_million_input_tokens"] > 0
        assert entry["cost_per_million_output_tokens"] > 0
    costs = {m: e["cost_per_hour"] for m, e in out["modes"].items()}
    assert costs == pytest.approx({"colocated": 6.0, "disaggregated": 7.0, "mixed": 5.0})
    assert isinstance(out["explanation"], list) and out["explanation"]
    assert all(isinstance(line, str) for line in out["explanation"])
    assert any("colocated is" in line and "cheaper" in line for line in out["explanation"])


def test_cli_json_infeasible_mode(tmp_path):
    out = _compare_json(tmp_path, _slow_network())
    dis = out["modes"]["disaggregated"]
    assert dis["status"] == "infeasible"
    assert dis["cost_per_hour"] is None
    assert dis["binding"] and "ttft" in dis["binding"][0].lower()
    for mode in ("colocated", "mixed"):
        assert out["modes"][mode]["status"] == "optimal"
        assert out["modes"][mode]["cost_per_hour"] > 0
    assert any(line.startswith("disaggregated: no fleet") for line in out["explanation"])


def test_to_dict_matches_compare_results():
    rates, mu, prices = ONE_TYPE
    results = compare_modes(parse_instance(_measured(rates, mu, prices)))
    out = to_dict(results)
    for r in results:
        assert out["modes"][r.mode]["cost_per_hour"] == r.cost_per_hour
        assert out["modes"][r.mode]["plan"]["cost_per_hour"] == r.plan.cost_per_hour
    assert out["explanation"] == explain(results)


def test_cli_exit_3_when_no_mode_has_a_fleet(tmp_path):
    """Every mode infeasible: the comparison is still printed, then one error line and exit 3,
    as `solve` gives (it exited 0)."""
    path = tmp_path / "tight.yaml"
    path.write_text(yaml.safe_dump(analytic_instance(["l4"], input_tokens=32000, ttft_ms=200)))
    result = CliRunner().invoke(main, ["compare", str(path)])
    assert result.exit_code == 3
    assert "infeasible" in result.stdout
    assert result.stderr.startswith("error: no mode has a fleet; mixed serving: infeasible: chat:")
    assert len(result.stderr.strip().splitlines()) == 1


def _timing_out(monkeypatch, modes: set[str]) -> None:
    """The modes named find no fleet within the time limit (fuzz seed 51: one mode ran out of
    its 30 s, and compare threw away the modes that had solved, exit 1); the others are solved
    for real."""
    import fleetopt.compare

    solve = fleetopt.compare.plan_variant

    def plan_variant(instance, options=None):
        served = set(instance.serving.modes)
        mode = "mixed" if len(served) == 2 else served.pop()
        if mode in modes:
            raise NoPlanInTime("no fleet found within the time limit (30.0 s); raise --time-limit")
        return solve(instance, options)

    monkeypatch.setattr(fleetopt.compare, "plan_variant", plan_variant)


def test_a_mode_out_of_time_is_a_column_not_an_abort(tmp_path, monkeypatch):
    _timing_out(monkeypatch, {"colocated"})
    out = _compare_json(tmp_path, _measured(*ONE_TYPE))
    assert out["modes"]["colocated"]["status"] == "no_solution"
    assert out["modes"]["colocated"]["cost_per_hour"] is None
    assert out["modes"]["disaggregated"]["cost_per_hour"] == pytest.approx(7.0)
    assert out["modes"]["mixed"]["cost_per_hour"] == pytest.approx(5.0)
    assert any(
        line.startswith("colocated: no fleet — no fleet found within")
        for line in out["explanation"]
    )
    table = CliRunner().invoke(main, ["compare", str(tmp_path / "instance.yaml")])
    assert table.exit_code == 0 and "no_solution" in table.stdout


def test_cli_exit_1_when_no_mode_has_a_fleet_in_time(tmp_path, monkeypatch):
    """No mode found a fleet and mixed was not proved infeasible: exit 1, as `solve` gives."""
    _timing_out(monkeypatch, {"colocated", "disaggregated", "mixed"})
    rates, mu, prices = ONE_TYPE
    path = tmp_path / "instance.yaml"
    path.write_text(yaml.safe_dump(_measured(rates, mu, prices), sort_keys=False))
    result = CliRunner().invoke(main, ["compare", str(path)])
    assert result.exit_code == 1
    assert result.stderr.startswith(
        "error: no mode has a fleet; mixed serving: no fleet found within the time limit"
    )
    assert len(result.stderr.strip().splitlines()) == 1
