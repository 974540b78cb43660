"""Benchmark runs at a fixed concurrency (closed loop) are predicted with that many requests in
flight, and the small-batch factors (per-layer overhead, decode attention's bandwidth share and
walk, host time per sequence, all-reduce latency) are recovered from such runs by the fit."""

from __future__ import annotations

from fleetopt.calibrate.command import observation
from fleetopt.calibrate.fit import SMALL_BATCH_FACTORS, fit, free_factors
from fleetopt.calibrate.observation import Observation, predict, relative_error
from fleetopt.calibrate.results import Run
from fleetopt.catalog import gpu_catalog
from fleetopt.instance import Efficiency

H100 = gpu_catalog()["h100-sxm"].efficiency


def _run(concurrency: int, tp: int = 1, prompt: float = 200, output: float = 200, **kw):
    model, weights = kw.pop("model", ("llama-3.1-8b", "bf16"))
    return Observation(
        model=model,
        gpu="h100-sxm",
        tensor_parallel=tp,
        weight_dtype=weights,
        kv_dtype="bf16",
        input_tokens=prompt,
        output_tokens=output,
        output_tokens_per_s_per_gpu=1.0,
        max_num_seqs=concurrency,
        **kw,
    )


def test_one_request_in_flight_is_not_held_to_random_arrivals():
    """At concurrency 1 the run's own TPOT read as a limit under random arrivals (admission
    headroom for one slot) predicts nothing; with the request in flight it is ~1/step."""
    step = H100.step_overhead_ms / 1e3
    open_loop = _run(1, tpot_ms=20.0)
    closed = _run(1, tpot_ms=20.0, closed_loop=True)
    assert predict(open_loop, H100) == 0.0
    per_gpu = predict(closed, H100)
    # one sequence: at most one token per weight read (16 GB at 3.35 TB/s · eff_m) and step
    weights_s = 8.03e9 * 2 / (3.35e12 * H100.memory)
    assert 0.8 / (weights_s + step) < per_gpu < 1 / (weights_s + step)


def test_more_in_flight_never_less_throughput():
    rates = [predict(_run(c, closed_loop=True), H100) for c in (1, 2, 5, 25, 100, 250)]
    assert rates == sorted(rates) and rates[0] > 0


def test_calibrate_reads_a_stated_concurrency_as_closed_loop():
    fixed = Run("a.json", 1000.0, 200.0, 5000.0, 12.0, concurrency=32)
    rated = Run("b.json", 1000.0, 200.0, 5000.0, 12.0, concurrency=None)
    assert observation(fixed, "llama-3.1-8b", "h100-sxm", 1, "bf16", "bf16", 256).closed_loop
    assert not observation(rated, "llama-3.1-8b", "h100-sxm", 1, "bf16", "bf16", 256).closed_loop


def _sweep(truth: Efficiency) -> list[Observation]:
    """Closed-loop runs as `truth` predicts them: Llama 3.1 8B (tp 1) and 70B FP8 (tp 2) at 1,
    4, 32 and 128 in flight, 200/200 and 4000/500 tokens."""
    replicas = ((("llama-3.1-8b", "bf16"), 1), (("llama-3.1-70b", "fp8"), 2))
    runs = [
        _run(c, tp, prompt, output, model=model, closed_loop=True)
        for model, tp in replicas
        for c in (1, 4, 32, 128)
        for prompt, output in ((200, 200), (4000, 500))
    ]
    return [
        o.__class__(**{**o.__dict__, "output_tokens_per_s_per_gpu": predict(o, truth)})
        for o in runs
    ]


def test_fit_follows_a_concurrency_sweep_from_the_catalog_factors():
    """Runs made by the model itself with known small-batch factors (each on the fit's grid),
    two models so the per-layer overhead is told from the per-step one: the catalog's factors
    miss them by far, the fit frees the small-batch factors and reproduces every run within 2%
    (a local search: it need not land on the very factors that made them)."""
    truth = H100.model_copy(
        update={"layer_overhead_us": 60.0, "attention_memory": 0.6, "allreduce_latency_us": 15.0}
    )
    runs = _sweep(truth)
    names = free_factors(runs)
    assert set(SMALL_BATCH_FACTORS) | {"allreduce_latency_us"} <= set(names)
    assert max(abs(relative_error(o, H100)) for o in runs) > 0.15
    found = fit(runs, H100)
    assert max(abs(relative_error(o, found)) for o in runs) < 0.02


def test_fit_finds_the_attention_walk_and_the_host_ceiling():
    """Runs made with a walk of 8 ns per context token per layer and 150 µs of host time per
    token (a ceiling of 6,667 tokens/s per replica; the catalog's factors else): the catalog's
    factors miss them by up to 27%, the fit lands on the factors that made them."""
    truth = H100.model_copy(update={"attention_latency_ns": 8.0, "sequence_overhead_us": 150.0})
    runs = _sweep(truth)
    assert max(abs(relative_error(o, H100)) for o in runs) > 0.25
    found = fit(runs, H100)
    assert (found.attention_latency_ns, found.sequence_overhead_us) == (8.0, 150.0)
    assert max(abs(relative_error(o, found)) for o in runs) < 1e-9
