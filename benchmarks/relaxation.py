"""Where a program's root gap comes from, and what HiGHS options do to its solve.

    python benchmarks/relaxation.py INSTANCE.yaml [--option KEY=VALUE ...]

Solves the instance's program (one thread, seed 0, gap 1e-4) with every integer family relaxed,
with the pooling binaries only relaxed, with the replica and GPU counts only relaxed, and with
nothing relaxed (with the HiGHS options given), printing the bound, seconds and nodes of each.
Figures go to docs/benchmarks.md ("Fleet scale") with the command.
"""

from __future__ import annotations

import argparse
import time

import highspy
import pyomo.core as pyo

from fleetopt.catalog import resolve
from fleetopt.configs import enumerate_configs
from fleetopt.formulation import build_model
from fleetopt.handoff import hand_off
from fleetopt.instance import load_instance
from fleetopt.pipeline import program_data

RELAXED = {
    "everything (root LP)": None,
    "pooling binaries (fill, beyond)": {"fill", "beyond"},
    "replica and GPU counts (x, gpus, nodes)": {"x", "gpus", "nodes"},
    "nothing (optimum)": set(),
}


def relax(model: pyo.ConcreteModel, families: set[str] | None) -> None:
    for var in model.component_data_objects(pyo.Var):
        if families is None or var.parent_component().name in families:
            if var.domain is pyo.Binary:
                var.domain = pyo.UnitInterval
            elif var.domain is pyo.NonNegativeIntegers:
                var.domain = pyo.NonNegativeReals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("instance")
    parser.add_argument("--option", action="append", default=[], help="HiGHS KEY=VALUE")
    args = parser.parse_args()
    options = {}
    for item in args.option:
        key, value = item.split("=", 1)
        options[key] = float(value) if value.replace(".", "", 1).isdigit() else value
    resolved = resolve(load_instance(args.instance))
    data = program_data(resolved, enumerate_configs(resolved))
    print(f"{'relaxed':42} {'bound $/h':>10} {'seconds':>8} {'nodes':>6}")
    for label, families in RELAXED.items():
        model = build_model(data)  # the whole program as one model
        relax(model, families)
        start = time.perf_counter()
        highs = hand_off(model).highs
        for key, value in {"mip_rel_gap": 1e-4, "threads": 1, "random_seed": 0, **options}.items():
            highs.setOptionValue(key, value)
        highspy.Highs.resetGlobalScheduler(True)
        highs.run()
        seconds = time.perf_counter() - start
        info = highs.getInfo()
        bound = info.mip_dual_bound if info.mip_node_count >= 0 else info.objective_function_value
        nodes = max(0, info.mip_node_count)
        print(f"{label:42} {bound:10.3f} {seconds:8.2f} {nodes:6d}")


if __name__ == "__main__":
    main()
