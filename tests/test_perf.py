"""The token cost model (perf/) against hand arithmetic from the catalog numbers."""

from __future__ import annotations

import dataclasses
import itertools
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from fleetopt.catalog import resolve_gpu, resolve_model
from fleetopt.cli import main
from fleetopt.instance import GpuChoice, ModelChoice
from fleetopt.perf.efficiency import DEFAULT, efficiency_for
from fleetopt.perf.replica import Replica, kv_bytes_per_token
from tests.helpers import analytic_instance, solve


def model(name: str, weight: str = "bf16", kv: str = "bf16", **spec):
    return resolve_model(
        ModelChoice(name=name, weight_dtype=weight, kv_dtype=kv, spec=spec or None)
    )


def gpu(name: str, **spec):
    return resolve_gpu(GpuChoice(type=name, spec=spec or None))


def replica(m: str, g: str, tp: int = 1, weight: str = "bf16", kv: str = "bf16") -> Replica:
    return Replica(model(m, weight, kv), gpu(g), tp)


# --- memory ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("dtype", "bytes_per_param"), [("bf16", 2), ("fp8", 1), ("int4", 0.5), ("fp4", 4.5 / 8)]
)
def test_weight_bytes_per_dtype(dtype, bytes_per_param):
    # llama-3.1-8b: 8.03 B parameters
    r = replica("llama-3.1-8b", "h100-sxm", weight=dtype)
    assert r.weight_bytes == pytest.approx(8.03e9 * bytes_per_param)


@pytest.mark.parametrize(("dtype", "expected"), [("bf16", 131072), ("fp8", 65536), ("int4", 32768)])
def test_kv_bytes_per_token_gqa(dtype, expected):
    # llama-3.1-8b: 2 (K and V) * 32 layers * 8 KV heads * 128 head dim * bytes = 131,072 B (bf16)
    assert kv_bytes_per_token(model("llama-3.1-8b").spec, dtype) == expected
    assert replica("llama-3.1-8b", "l4", kv=dtype).kv_bytes_per_token == expected


def test_kv_bytes_per_token_70b():
    # llama-3.1-70b: 2 * 80 * 8 * 128 * 2 = 327,680 B
    assert replica("llama-3.1-70b", "h100-sxm").kv_bytes_per_token == 327680


def test_kv_bytes_per_token_mha():
    # llama-2-7b has no GQA: 2 * 32 layers * 32 heads * 128 * 2 = 524,288 B
    assert replica("llama-2-7b", "a10g").kv_bytes_per_token == 524288


def test_kv_bytes_per_token_mla():
    # deepseek-v3 caches one latent (512) plus the rope key (64) per layer: 61 * 576 * 2 = 70,272 B,
    # not 2 * 61 * 128 heads * 192 * 2 (5,996,544 B) as its attention heads would suggest
    spec = model("deepseek-v3").spec
    assert kv_bytes_per_token(spec, "bf16") == 70272
    assert kv_bytes_per_token(spec, "fp8") == 35136


def test_kv_capacity_hand_arithmetic():
    # llama-3.1-8b bf16 on h100-sxm (85.5 GB = 81559 MiB) at 0.9 memory utilisation with 2 GB
    # held back per GPU: tp 1: 85.5 * 0.9 - 2 = 74.95 GB usable - 16.06 GB weights = 58.89 GB
    # tp 2: 2 * 74.95 - 16.06 = 133.84 GB
    assert replica("llama-3.1-8b", "h100-sxm").kv_capacity_bytes(0.9) == pytest.approx(58.89e9)
    assert replica("llama-3.1-8b", "h100-sxm", 2).kv_capacity_bytes(0.9) == pytest.approx(133.84e9)
    tokens = replica("llama-3.1-8b", "h100-sxm").kv_capacity_tokens(0.9)
    assert tokens == pytest.approx(58.89e9 / 131072)


@pytest.mark.parametrize("g", ["l4", "a10g"])
def test_70b_bf16_does_not_fit_one_24gb_gpu(g):
    # 70.55 B * 2 = 141.1 GB of weights against 24 * 0.9 - 2 = 19.6 GB
    r = replica("llama-3.1-70b", g)
    assert r.kv_capacity_bytes(0.9) == pytest.approx(19.6e9 - 141.1e9)
    assert r.kv_capacity_bytes(0.9) < 0
    assert r.kv_capacity_tokens(0.9) == 0


def test_70b_on_h100_kv_hand_arithmetic():
    # bf16 tp 2: 2 * 74.95 - 141.1 = 8.8 GB, a cache for short contexts only (as vLLM reports);
    # tp 4: 299.8 - 141.1 = 158.7 GB of KV cache
    assert replica("llama-3.1-70b", "h100-sxm", 2).kv_capacity_bytes(0.9) == pytest.approx(8.8e9)
    assert replica("llama-3.1-70b", "h100-sxm", 4).kv_capacity_bytes(0.9) == pytest.approx(158.7e9)
    # fp8 weights halve the need: 74.95 - 70.55 = 4.4 GB on one GPU, 149.9 - 70.55 on two
    assert replica("llama-3.1-70b", "h100-sxm", 1, weight="fp8").kv_capacity_bytes(
        0.9
    ) == pytest.approx(4.4e9)
    assert replica("llama-3.1-70b", "h100-sxm", 2, weight="fp8").kv_capacity_bytes(
        0.9
    ) == pytest.approx(79.35e9)


def test_kv_capacity_grows_with_memory_utilisation():
    r = replica("llama-3.1-8b", "l40s")
    assert r.kv_capacity_bytes(0.95) - r.kv_capacity_bytes(0.85) == pytest.approx(48e9 * 0.10)


# --- compute rates ----------------------------------------------------------------------------


def test_flops_per_dtype():
    eff = efficiency_for(gpu("h100-sxm")).compute
    # h100-sxm: 989 dense bf16 TFLOP/s, 1,979 fp8
    assert replica("llama-3.1-8b", "h100-sxm").flops_per_s == pytest.approx(989e12 * eff)
    assert replica("llama-3.1-8b", "h100-sxm", weight="fp8").flops_per_s == pytest.approx(
        1979e12 * eff
    )
    # int4 is W4A16: bf16 tensor cores; an A100 has no fp8 tensor cores, so fp8 runs at bf16 rate
    assert replica("llama-3.1-8b", "h100-sxm", weight="int4").flops_per_s == pytest.approx(
        989e12 * eff
    )
    a100 = efficiency_for(gpu("a100-80gb")).compute
    assert replica("llama-3.1-8b", "a100-80gb", weight="fp8").flops_per_s == pytest.approx(
        312e12 * a100
    )
    # tp multiplies the replica's rate
    assert replica("llama-3.1-8b", "h100-sxm", 4).flops_per_s == pytest.approx(4 * 989e12 * eff)


def test_fp4_runs_on_fp4_tensor_cores_where_there_are_any_else_weight_only():
    """NVFP4 on a B200: its FP4 peak at the FP4 share (eff_c4); on an H100 (no FP4 cores) the
    BF16 peak at the BF16/FP8 share, as vLLM's Marlin W4A16 kernels run it."""
    b200 = efficiency_for(gpu("b200"))
    # b200: 9,000 dense FP4 TFLOP/s (HGX B200 144 PFLOPS sparse / 8 / 2)
    assert replica("llama-3.1-70b", "b200", weight="fp4").flops_per_s == pytest.approx(
        9000e12 * b200.fp4_compute
    )
    assert replica("llama-3.1-70b", "b200", weight="fp8").flops_per_s == pytest.approx(
        4500e12 * b200.compute
    )
    h100 = efficiency_for(gpu("h100-sxm")).compute
    assert replica("llama-3.1-70b", "h100-sxm", weight="fp4").flops_per_s == pytest.approx(
        989e12 * h100
    )


def test_an_unset_fp4_share_is_the_default_one():
    spec = {"fp4_tflops": 1000.0, "efficiency": {**DEFAULT.model_dump(), "fp4_compute": None}}
    r = Replica(model("llama-3.1-8b", "fp4"), gpu("h100-sxm", **spec), 1)
    assert r.flops_per_s == pytest.approx(1000e12 * DEFAULT.fp4_compute)


def test_default_efficiency_is_a_share():
    assert 0 < DEFAULT.compute <= 1 and 0 < DEFAULT.memory <= 1 and 0 < DEFAULT.interconnect <= 1


def test_weight_read_time():
    # 16.06 GB over 3.35 TB/s * memory efficiency
    r = replica("llama-3.1-8b", "h100-sxm")
    eff = efficiency_for(r.gpu).memory
    assert r.weight_read_s == pytest.approx(16.06e9 / (3.35e12 * eff))


# --- prefill --------------------------------------------------------------------------------------


def test_prefill_time_grows_with_prompt_length():
    r = replica("llama-3.1-8b", "h100-sxm")
    lengths = [16, 128, 512, 1024, 4096, 8192, 16384, 32768]
    times = [r.prefill_s(n) for n in lengths]
    # never shorter; short prompts sit on the weight-read floor (memory-bound), so strictly
    # longer only once compute-bound: 2 * 8.03e9 * 512 FLOPs / (989e12 * eff) > weight read
    assert all(b >= a for a, b in itertools.pairwise(times))
    long = times[2:]
    assert all(b > a for a, b in itertools.pairwise(long))


def test_prefill_attention_term_by_hand():
    # causal attention: each prompt token attends to L/2 tokens on average, 4 FLOPs per
    # (query, key) pair per layer per head dim: 4 * 32 * 32 * 128 * L/2 FLOPs per token
    r = replica("llama-3.1-8b", "h100-sxm")
    flops = r.flops_per_s
    for n in (1000, 8000):
        extra = r.prefill_s_per_token(n) - r.linear_s_per_token
        assert extra == pytest.approx(4 * 32 * 32 * 128 * n / 2 / flops)
    assert r.linear_s_per_token == pytest.approx(2 * 8.03e9 / flops)


def test_prefill_is_superlinear_once_compute_bound():
    """Doubling a long prompt more than doubles its compute time (the attention term)."""
    r = replica("llama-3.1-8b", "h100-sxm")
    for n in (8192, 16384, 32768):
        t1, t2 = r.prefill_s(n) - r.fixed_s, r.prefill_s(2 * n) - r.fixed_s
        assert t2 > 2 * t1
    # and the compute per token rises with length
    per_token = [r.prefill_s_per_token(n) for n in (100, 1000, 10000, 100000)]
    assert all(b > a for a, b in itertools.pairwise(per_token))


def test_short_prefill_is_the_weight_read_and_its_matmuls():
    # 16 tokens: the 16.06 GB weight read, then 16 * 2 * 8.03e9 FLOPs plus causal attention
    # (4 * 32 layers * 32 heads * 128 FLOPs per pair, 16 * 8 pairs on average) at 989 TFLOP/s
    r = replica("llama-3.1-8b", "h100-sxm")
    eff = efficiency_for(r.gpu)
    weights = 16.06e9 / (3.35e12 * eff.memory)
    flops = 16 * 2 * 8.03e9 + 16 * 8 * 4 * 32 * 32 * 128
    expected = r.fixed_s + weights + flops / (989e12 * eff.compute)
    assert r.prefill_s(16) == pytest.approx(expected, rel=1e-3)


def test_chunked_prefill_steps():
    r = replica("llama-3.1-8b", "h100-sxm")
    # a prompt no longer than the chunk takes one step; longer ones take about L / chunk (a
    # little more: attention grows the per-token time)
    assert r.chunked_prefill_steps(100, 512) == 1
    assert r.chunked_prefill_steps(512, 512) >= 1
    steps = r.chunked_prefill_steps(8192, 512)
    assert 16 <= steps <= 20


# --- tensor parallelism ------------------------------------------------------------------------


def test_no_allreduce_at_tp1():
    r = replica("llama-3.1-8b", "h100-sxm")
    assert r.allreduce_s_per_token == 0
    assert r.fixed_s == pytest.approx(efficiency_for(r.gpu).step_overhead_ms / 1e3)


def test_allreduce_pcie_costs_more_than_nvlink():
    pcie = replica("llama-3.1-8b", "h100-pcie", 2)
    nvlink = replica("llama-3.1-8b", "h100-sxm", 2)
    assert pcie.allreduce_s_per_token > nvlink.allreduce_s_per_token > 0
    assert pcie.fixed_s > nvlink.fixed_s
    # ring all-reduce, twice per layer, of bf16 activations: 2 * 32 * 4096 * 2 B * 2 * (1/2)
    # = 524,288 B per token over 64 GB/s (pcie) and 450 GB/s (nvlink) times efficiency
    payload = 2 * 32 * 4096 * 2 * 2 * (2 - 1) / 2
    eff_p = efficiency_for(pcie.gpu).interconnect
    eff_n = efficiency_for(nvlink.gpu).interconnect
    assert pcie.allreduce_s_per_token == pytest.approx(payload / (64e9 * eff_p))
    assert nvlink.allreduce_s_per_token == pytest.approx(payload / (450e9 * eff_n))
    # so the same prefill takes longer on PCIe though compute is close
    assert pcie.prefill_s(4096) > nvlink.prefill_s(4096)


def test_allreduce_grows_with_tp():
    per_token = [replica("llama-3.1-70b", "h100-sxm", tp).allreduce_s_per_token for tp in (2, 4, 8)]
    # payload factor (tp - 1) / tp: 1/2, 3/4, 7/8
    assert per_token[1] / per_token[0] == pytest.approx(1.5)
    assert per_token[2] / per_token[0] == pytest.approx(1.75)


def test_small_batch_factors_by_hand():
    """t_fixed = t_0 + layers·t_layer + 2·layers·α at tp > 1; decode attention reads the KV at
    its own share of the bandwidth; unset, they are 0, the fabric's α and the memory share."""
    plain = replica("llama-3.1-70b", "h100-sxm", 4)
    eff = efficiency_for(plain.gpu)
    fitted = Replica(
        plain.model,
        gpu(
            "h100-sxm",
            efficiency=eff.model_dump()
            | {"layer_overhead_us": 70.0, "allreduce_latency_us": 25.0, "attention_memory": 0.45},
        ),
        4,
    )
    assert plain.fixed_s == pytest.approx(eff.step_overhead_ms / 1e3 + 2 * 80 * 8e-6)
    assert fitted.fixed_s == pytest.approx(eff.step_overhead_ms / 1e3 + 80 * 70e-6 + 2 * 80 * 25e-6)
    assert fitted.kv_read_s_per_token == pytest.approx(
        plain.kv_read_s_per_token * eff.memory / 0.45
    )
    assert fitted.weight_read_s == pytest.approx(plain.weight_read_s)


def test_perf_takes_a_calibration_overlay(tmp_path):
    """`fleetopt perf --calibration`: the overlay's factors for that GPU type (one request in
    flight at 200/200 on the shipped 2024 NIM fit is slower than on the catalog's factors);
    an overlay without the GPU type is one line, exit 2."""
    args = ["perf", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--input-tokens", "200"]
    args += ["--output-tokens", "200", "--max-num-seqs", "1", "--format", "json"]
    overlay = Path(__file__).parents[1] / "calibrations" / "nim-trtllm-2024.yaml"
    plain = json.loads(CliRunner().invoke(main, args).output)
    nim = json.loads(CliRunner().invoke(main, [*args, "--calibration", str(overlay)]).output)
    assert nim["output_tokens_per_s"] < 0.8 * plain["output_tokens_per_s"]
    result = CliRunner().invoke(main, [*args[:4], "l40s", *args[5:], "--calibration", str(overlay)])
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1
    assert "l40s" in result.output and "--calibration" in result.output


# --- decode -----------------------------------------------------------------------------------------


def test_decode_step_grows_with_batch_and_context():
    r = replica("llama-3.1-8b", "h100-sxm")
    ctx = 2000
    by_batch = [r.step_s(decode_seqs=b, decode_context_tokens=b * ctx) for b in (1, 8, 64, 256)]
    assert all(b > a for a, b in itertools.pairwise(by_batch))
    by_context = [
        r.step_s(decode_seqs=32, decode_context_tokens=32 * c) for c in (100, 1000, 10000)
    ]
    assert all(b > a for a, b in itertools.pairwise(by_context))


def test_single_sequence_decode_is_mostly_the_weight_read():
    # one sequence of 1,000 tokens: read the weights and 1,000 * 131,072 B of KV once, and one
    # token's matmuls (2 * 8.03e9 FLOPs), 0.4% of the step
    r = replica("llama-3.1-8b", "h100-sxm")
    eff = efficiency_for(r.gpu)
    memory = (16.06e9 + 1000 * 131072) / (3.35e12 * eff.memory)
    matmuls = 2 * 8.03e9 / (989e12 * eff.compute)
    step = r.step_s(decode_seqs=1, decode_context_tokens=1000)
    assert step == pytest.approx(r.fixed_s + memory + matmuls, rel=1e-3)
    assert matmuls < 0.01 * step


def test_a_large_decode_step_sums_weights_matmuls_and_attention():
    # 512 sequences of 100 tokens on an h100-sxm (llama 3.1 8B, bf16): reading the 16.06 GB of
    # weights, the matmuls (512 * 2 * 8.03e9 FLOPs at 989 TFLOP/s * eff_c) and attention (the
    # 51,200 context tokens' KV, 131,072 B each) one after the other, none hidden
    r = replica("llama-3.1-8b", "h100-sxm")
    eff = efficiency_for(r.gpu)
    matmuls = 512 * 2 * 8.03e9 / (989e12 * eff.compute)
    weights = 16.06e9 / (3.35e12 * eff.memory)
    attention = 512 * 100 * 131072 / (3.35e12 * eff.memory)
    step = r.step_s(decode_seqs=512, decode_context_tokens=512 * 100)
    assert step == pytest.approx(r.fixed_s + weights + matmuls + attention, rel=1e-3)


def test_decode_attention_is_bound_by_its_flops_where_they_outrun_the_kv_read():
    # per context token, attention reads 2 * layers * kv_heads * head_dim bytes and does
    # 4 * layers * q_heads * head_dim FLOPs: with the FLOP/s-to-bandwidth ratio raised far
    # enough (here by a 1,000x bandwidth), the FLOPs bind
    r = replica("llama-3.1-8b", "h100-sxm")
    gpu = r.gpu.spec.model_copy(update={"hbm_tb_s": r.gpu.spec.hbm_tb_s * 1000})
    fast = Replica(r.model, dataclasses.replace(r.gpu, spec=gpu), r.tp)
    assert fast.attention_s_per_pair > fast.kv_read_s_per_token
    assert fast.context_s_per_token == fast.attention_s_per_pair
    assert r.context_s_per_token == r.kv_read_s_per_token


# --- MoE --------------------------------------------------------------------------------------


def test_moe_uses_active_params_for_flops_and_all_params_for_memory():
    moe = replica("mixtral-8x7b", "h100-sxm", 2)
    # memory: all 46.7 B parameters; FLOPs: the 12.9 B active ones
    assert moe.weight_bytes == pytest.approx(46.7e9 * 2)
    assert moe.linear_s_per_token == pytest.approx(2 * 12.9e9 / moe.flops_per_s)
    dense = Replica(model("mixtral-8x7b", active_params_b=46.7), moe.gpu, 2)
    assert dense.weight_bytes == moe.weight_bytes
    assert dense.weight_read_s == moe.weight_read_s
    assert dense.linear_s_per_token / moe.linear_s_per_token == pytest.approx(46.7 / 12.9)
    assert dense.prefill_s(8192) > moe.prefill_s(8192)
    # and the KV cache is the attention's, not the experts': 2 * 32 * 8 * 128 * 2
    assert moe.kv_bytes_per_token == 131072


def test_deepseek_moe_memory():
    r = replica("deepseek-v3", "h200", 8, weight="fp8")
    # 671 GB of fp8 weights on 8 * (150.7 * 0.9 - 2) = 1069.04 GB usable (150.7 GB = 143771 MiB)
    assert r.weight_bytes == pytest.approx(671e9)
    assert r.kv_capacity_bytes(0.9) == pytest.approx(1069.04e9 - 671e9)
    assert r.linear_s_per_token == pytest.approx(2 * 37e9 / r.flops_per_s)


# --- KV transfer ---------------------------------------------------------------------------------


def test_kv_transfer_time():
    r = replica("llama-3.1-8b", "h100-sxm")
    eff = efficiency_for(r.gpu).interconnect
    net = r.gpu.spec.network_gb_s * 1e9
    assert r.kv_transfer_s(1000) == pytest.approx(1000 * 131072 / (net * eff))


def test_perf_breakdown_sums_to_the_step_with_the_attention_its_kv_read():
    # 70B fp8 on 4 H100s: the KV read of the concurrent sequences' mean context (prompt + half
    # the output), 2 · 80 layers · 8 KV heads · 128 · 1 B per token, at 4 · 3.35 TB/s · eff_m
    args = ["perf", "--model", "llama-3.1-70b", "--gpu", "h100-sxm", "--tp", "4"]
    args += ["--input-tokens", "2000", "--output-tokens", "300", "--weight-dtype", "fp8"]
    args += ["--kv-dtype", "fp8", "--tpot-ms", "40", "--format", "json"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    parts = out["step_breakdown_ms"]
    eff = efficiency_for(replica("llama-3.1-70b", "h100-sxm", 4, "fp8", "fp8").gpu).memory
    kv_read = out["concurrent_sequences"] * 2150 * 2 * 80 * 8 * 128 / (4 * 3.35e12 * eff)
    assert parts["attention"] == pytest.approx(kv_read * 1e3, rel=1e-3)
    weights = 70.6e9 / (4 * 3.35e12 * eff) * 1e3
    assert parts["weights"] == pytest.approx(weights, rel=1e-2)
    # the parts are the mean step at the point's rate, within its budget (the TPOT's longest
    # step, with a full chunk, may bind first)
    assert sum(parts.values()) <= out["step_ms"] * (1 + 1e-9)


def test_an_fp4_fleet_on_b200_solves_verifies_and_costs_less_than_fp8():
    """NVFP4 weights take 0.56 of FP8's bytes and run at 1.45x its compute on a B200 (fitted
    shares): the same class needs fewer replicas (2 against 4 here), and the plan passes verify
    (plan_fleet re-checks it)."""

    def cost(weight: str) -> float:
        data = analytic_instance(
            ["b200"], requests_per_s=20, model="llama-3.1-70b", weight_dtype=weight
        )
        plan = solve(data)
        assert plan.status == "optimal" and {p.gpu for p in plan.pools} == {"b200"}
        return plan.cost_per_hour

    assert cost("fp4") < cost("fp8")
