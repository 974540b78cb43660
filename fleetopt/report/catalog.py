"""`fleetopt catalog`: the built-in GPU types and models, with prices, dates and sources."""

from __future__ import annotations

import json

from fleetopt.catalog import gpu_catalog, model_catalog
from fleetopt.perf.replica import kv_bytes_per_token


def catalog_table() -> str:
    gpu_lines = [
        f"{'gpu':<11} {'HBM GB':>7} {'TB/s':>6} {'bf16 TF':>8} {'fp8 TF':>7} {'fabric':<16} "
        f"{'$/GPU-h':>8}  price date"
    ]
    for name, g in gpu_catalog().items():
        fp8 = f"{g.fp8_tflops:,.0f}" if g.fp8_tflops else "-"
        fabric = f"{g.interconnect} {g.interconnect_gb_s:g}"
        gpu_lines.append(
            f"{name:<11} {g.memory_gb:>7g} {g.hbm_tb_s:>6g} {g.bf16_tflops:>8,.0f} {fp8:>7} "
            f"{fabric:<16} {g.price_per_gpu_hour:>8.2f}  {g.price_date}"
        )
    model_lines = [
        f"{'model':<15} {'params B':>9} {'active B':>9} {'layers':>6} {'kv heads':>8} "
        f"{'KV KB/token bf16':>16}  source"
    ]
    for name, m in model_catalog().items():
        kv = kv_bytes_per_token(m, "bf16")
        model_lines.append(
            f"{name:<15} {m.params_b:>9g} {m.active_params_b:>9g} {m.layers:>6} {m.kv_heads:>8} "
            f"{kv / 1024:>16,.1f}  {m.source}"
        )
    return "\n".join(
        [
            "GPU types (dense TFLOP/s; fabric GB/s per direction)",
            *gpu_lines,
            "",
            "Models",
            *model_lines,
        ]
    )


def catalog_json() -> str:
    return json.dumps(
        {
            "gpus": {k: v.model_dump() for k, v in gpu_catalog().items()},
            "models": {k: v.model_dump() for k, v in model_catalog().items()},
        },
        indent=2,
    )
