"""Stopping a solve early: a time limit or Ctrl-C returns the incumbent as `feasible` with its
gap; Ctrl-C before there is one ends cleanly with exit code 130 and one line.

The hard models are market-split problems (Cornuéjols and Dawande): a few equality rows over
binaries that branch and bound cannot settle in seconds. With slack on the rows an incumbent
exists from the start but optimality takes long to prove; without slack there is no incumbent
for a long time. Neither depends on fleetopt's cost model, so the tests stay hard as it changes."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyomo.core as pyo
import pytest

from fleetopt.solve import SolveOptions, run_highs

ROOT = Path(__file__).resolve().parents[1]
SETTLE_S = 1.0
"""Wait between the child's start of the solve and Ctrl-C: the models are tiny, so HiGHS is then
solving, and with slack has had its first incumbent since its first heuristic (0.0 s)."""


def market_split(rows: int, slack: bool, seed: int = 0) -> pyo.ConcreteModel:
    """Σ_i a_ri·x_i = ⌊Σ_i a_ri / 2⌋ for each row r, x binary, 10·(rows−1) columns; with
    `slack`, minimise the total deviation from the right-hand sides instead."""
    rnd = random.Random(seed)
    n = 10 * (rows - 1)
    m = pyo.ConcreteModel()
    m.x = pyo.Var(range(n), domain=pyo.Binary)
    m.over = pyo.Var(range(rows), domain=pyo.NonNegativeReals, bounds=(0, None if slack else 0))
    m.under = pyo.Var(range(rows), domain=pyo.NonNegativeReals, bounds=(0, None if slack else 0))
    m.rows = pyo.ConstraintList()
    for r in range(rows):
        a = [rnd.randint(0, 99) for _ in range(n)]
        body = sum(a[i] * m.x[i] for i in range(n)) + m.over[r] - m.under[r]
        m.rows.add(body == sum(a) // 2)
    m.deviation = pyo.Objective(expr=sum(m.over[r] + m.under[r] for r in range(rows)))
    return m


def test_a_time_limit_returns_the_incumbent_as_feasible_with_its_gap():
    outcome = run_highs(market_split(4, slack=True), SolveOptions(time_limit=1.0))
    assert outcome.status == "feasible"
    assert outcome.objective is not None and outcome.bound is not None
    assert outcome.gap is not None and outcome.gap > 0
    assert not outcome.interrupted


CHILD = """
import json, sys
from fleetopt.errors import Interrupted
from fleetopt.solve import SolveOptions, run_highs
from tests.test_interrupt import market_split
model = market_split(4, slack=sys.argv[1] == "slack")
print("READY", flush=True)
try:
    outcome = run_highs(model, SolveOptions())
except Interrupted as exc:
    print(f"error: {exc}", file=sys.stderr)
    sys.exit(exc.exit_code)
print("OUTCOME " + json.dumps(outcome.__dict__))
"""


def _interrupt(
    code: str, *args: str, ready: str = "READY\n", settle_s: float = SETTLE_S
) -> subprocess.CompletedProcess:
    """Run `code` in a child process and Ctrl-C it `settle_s` after it prints `ready`."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen(
        [sys.executable, "-c", code, *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stdout.readline() == ready
    time.sleep(settle_s)
    child.send_signal(signal.SIGINT)
    out, err = child.communicate(timeout=60)
    return subprocess.CompletedProcess(child.args, child.returncode, out, err)


def test_ctrl_c_with_an_incumbent_returns_it_as_feasible_with_its_gap():
    done = _interrupt(CHILD, "slack")
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout.split("OUTCOME ", 1)[1])
    assert outcome["status"] == "feasible" and outcome["interrupted"]
    assert outcome["objective"] is not None and outcome["gap"] is not None
    assert "Traceback" not in done.stderr and "kInterrupt" not in done.stdout + done.stderr


def test_ctrl_c_without_an_incumbent_exits_130_with_one_line():
    done = _interrupt(CHILD, "exact")
    assert done.returncode == 130
    assert done.stderr.strip() == "error: interrupted before the solver found any plan"


ANNOUNCE_PRESOLVED = """
import json, sys
import fleetopt.pipeline as pipeline
presolve = pipeline.presolve
def announce(*args, **kwargs):
    presolved = presolve(*args, **kwargs)
    print("PRESOLVED", flush=True)
    return presolved
pipeline.presolve = announce
"""
"""A child's first lines: it prints PRESOLVED as each presolve ends, HiGHS's search next."""

FLEET_CHILD = (
    ANNOUNCE_PRESOLVED
    + """
from fleetopt.instance import parse_instance
from tests.test_interrupt import HARD_FLEET
plan = pipeline.plan_fleet(parse_instance(HARD_FLEET))
print("PLAN " + json.dumps({"status": plan.status, "interrupted": plan.interrupted,
                            "cost": plan.cost_per_hour, "gap": plan.mip_gap}))
"""
)

HARD_FLEET = {
    "name": "hard-fleet",
    "gpus": [{"type": g} for g in ("h100-sxm", "a100-80gb", "l40s", "h200", "mi300x")],
    "models": [{"name": "llama-3.1-70b", "weight_dtype": "fp8", "kv_dtype": "fp8"}],
    "workloads": [
        {
            "name": "a",
            "model": "llama-3.1-70b",
            "requests_per_s": 34.1,
            "input_tokens": 2000,
            "output_tokens": 100,
            "slo": {"ttft_ms": 1500, "tpot_ms": 90},
        },
        {
            "name": "b",
            "model": "llama-3.1-70b",
            "requests_per_s": 25,
            "input_tokens": 1000,
            "output_tokens": 800,
            "slo": {"ttft_ms": 1500, "tpot_ms": 90},
        },
        {
            "name": "c",
            "model": "llama-3.1-70b",
            "requests_per_s": 35.9,
            "input_tokens": 500,
            "output_tokens": 200,
            "slo": {"ttft_ms": 1500, "tpot_ms": 40},
        },
    ],
    "serving": {"modes": ["colocated", "disaggregated"], "tensor_parallel": [1, 2, 4, 8]},
}
"""Three classes of a 70B model on five GPU types: the presolve finds its incumbent in under a
second, and HiGHS then needs seconds more to prove the optimum (2.7 s on the 2-core machine of
docs/benchmarks.md; HiGHS's path moves with the program's coefficients, so this instance may
need changing when the cost model does)."""


def test_ctrl_c_after_the_presolve_returns_a_verified_plan():
    """The presolve's incumbent (or a better one HiGHS found) is the answer: `feasible`,
    interrupted, with its gap, through verify, exit 0."""
    done = _interrupt(FLEET_CHILD, ready="PRESOLVED\n", settle_s=0.3)
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout.split("PLAN ", 1)[1])
    assert plan["status"] == "feasible" and plan["interrupted"]
    assert plan["cost"] > 0 and plan["gap"] is not None and plan["gap"] > 0


VARIANTS_CHILD = (
    ANNOUNCE_PRESOLVED
    + """
from fleetopt.cli import main
main(sys.argv[1:])
"""
)


@pytest.mark.parametrize(
    "command",
    [["sweep", "--set", "workloads.a.requests_per_s=34.1,30", "--jobs", "1"], ["compare"]],
)
def test_ctrl_c_stops_every_variant_solved_in_this_process(tmp_path, command):
    """`sweep --jobs 1` and `compare` solve their variants in the command's own process, where
    HiGHS catches Ctrl-C and hands back its best plan: that was taken for the variant's answer
    (or, with no plan yet, a `no_solution` row) and the next one begun (the sweep's first row
    read 'time limit, gap 4.28%'). The command stops, exit 130."""
    path = tmp_path / "hard.yaml"
    path.write_text(json.dumps(HARD_FLEET))
    args = [command[0], str(path), *command[1:]]
    done = _interrupt(VARIANTS_CHILD, *args, ready="PRESOLVED\n", settle_s=0.3)
    assert done.returncode == 130, done.stdout + done.stderr
    assert done.stderr.strip().splitlines()[-1] == "error: interrupted"
    assert "PRESOLVED" not in done.stdout  # no other variant began
