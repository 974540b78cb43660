"""`fleetopt perf --replicas N`: with a TTFT limit, replicas that share a prefill queue each carry
more (pooling); without one, the pool size changes nothing."""

from __future__ import annotations

import json

from click.testing import CliRunner

from fleetopt.cli import main

ARGS = [
    "perf", "--model", "llama-3.1-70b", "--gpu", "h100-sxm", "--tp", "4",
    "--input-tokens", "2000", "--output-tokens", "300",
    "--weight-dtype", "fp8", "--kv-dtype", "fp8", "--tpot-ms", "40", "--format", "json",
]  # fmt: skip


def _per_gpu(*extra: str) -> dict:
    result = CliRunner().invoke(main, [*ARGS, *extra])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_pooling_raises_per_replica_capacity_under_a_ttft_limit():
    rates = [
        _per_gpu("--ttft-ms", "450", "--replicas", str(n))["output_tokens_per_s_per_gpu"]
        for n in (1, 2, 4, 16)
    ]
    assert rates == sorted(rates)
    assert rates[-1] > 2 * rates[0]  # a lone replica must keep most of its prefill idle


def test_pool_size_does_not_matter_without_a_ttft_limit():
    alone = _per_gpu("--replicas", "1")
    pooled = _per_gpu("--replicas", "16")
    assert pooled["output_tokens_per_s_per_gpu"] == alone["output_tokens_per_s_per_gpu"]
    assert pooled["pool_size"] == 16
