"""The same instance and options give the same plan JSON byte for byte, in separate processes
with different hash seeds (set and dict order), apart from the solve's wall time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from fleetopt import configs
from fleetopt.catalog import resolve
from fleetopt.configs import enumerate_configs
from fleetopt.instance import parse_instance
from fleetopt.workers import worker_pool
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


@pytest.mark.parametrize("forked", [True, False])
def test_configs_enumerated_in_worker_processes_are_the_same(monkeypatch, forked):
    """Configs enumerated in worker processes (`jobs` > 1; a model on one GPU type at one tp
    each), forked from this process or from the forkserver, are the same configs,
    coefficients and reasons, in the same order, as in this process; `meanwhile` runs once
    either way."""
    data = _instance()
    data["gpus"].append({"type": "a10g"})  # a GPU type the 70B-class model cannot use at tp 1
    data["models"].append({"name": "llama-3.1-70b"})
    data["workloads"].append({**data["workloads"][0], "name": "big", "model": "llama-3.1-70b"})
    resolved = resolve(parse_instance(data))
    monkeypatch.setattr(configs, "PARALLEL_FROM", 0)  # a small instance, so it would not
    monkeypatch.setattr(configs, "FORKED_FROM", 0)
    monkeypatch.setattr(configs, "can_fork", lambda: forked)
    pools = []

    def counted(jobs, forked):
        pools.append((jobs, forked))
        return worker_pool(jobs, forked=forked)

    monkeypatch.setattr(configs, "worker_pool", counted)
    meanwhile: list[int] = []
    alone, workers = (
        enumerate_configs(resolved, jobs, meanwhile=lambda jobs=jobs: meanwhile.append(jobs))
        for jobs in (1, 2)
    )
    assert pools == [(2, forked)]
    assert meanwhile == [1, 2]  # what this process does meanwhile, once, with or without workers
    assert len(alone.configs) > 50 and any(alone.rejections.values())
    assert [c.key for c in workers.configs] == [c.key for c in alone.configs]
    assert [(c.capacity, c.usage, c.queue) for c in workers.configs] == [
        (c.capacity, c.usage, c.queue) for c in alone.configs
    ]
    assert workers.rejections == alone.rejections
