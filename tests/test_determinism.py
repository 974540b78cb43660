"""The same instance and options give the same plan JSON byte for byte, in separate processes
with different hash seeds (set and dict order), apart from the solve's wall time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from tests.helpers import analytic_instance

ROOT = Path(__file__).resolve().parents[1]
TIMING_FIELDS = {"solve_seconds"}
"""The only field that measures the run rather than the plan."""


def _solve_json(instance: Path, hash_seed: str) -> str:
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    done = subprocess.run(
        [sys.executable, "-m", "fleetopt.cli", "solve", str(instance), "--format", "json"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _without_timing(text: str) -> str:
    """The JSON text with every timing field removed, wherever it sits, and nothing else
    touched (no re-sorting that would hide an order that changed)."""
    data = json.loads(text)

    def strip(node):
        if isinstance(node, dict):
            return {k: strip(v) for k, v in node.items() if k not in TIMING_FIELDS}
        if isinstance(node, list):
            return [strip(v) for v in node]
        return node

    return json.dumps(strip(data), indent=2)


def _instance() -> dict:
    """Two models, three classes, two GPU types and two periods: places where a set or dict
    order could leak into the plan, at a size that solves in about a second (price tiers
    would add several)."""
    data = analytic_instance(["l40s", "h100-sxm"], tensor_parallel=(1, 2))
    chat = data["workloads"][0]
    data["models"].append({"name": "qwen2.5-7b"})
    data["workloads"] += [
        {**chat, "name": "code", "input_tokens": 3000, "requests_per_s": 4},
        {**chat, "name": "qwen", "model": "qwen2.5-7b", "requests_per_s": 6},
    ]
    data["demand_profile"] = {"multipliers": [0.5, 1.0]}
    return data


def test_plan_json_is_identical_across_processes_and_hash_seeds(tmp_path):
    instance = tmp_path / "mixed.yaml"
    instance.write_text(yaml.safe_dump(_instance()))
    first, second = (_solve_json(instance, seed) for seed in ("1", "2"))
    assert "solve_seconds" in first
    assert _without_timing(first) == _without_timing(second)
