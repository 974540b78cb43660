"""Model build and hand-off time alone: the lean-build steps, measured one at a time.

    python benchmarks/build_time.py [--size medium] [--periods 1] [--pause-gc] [--keep-dominated]

Builds the whole program of a benchmarks/scale.py instance over its first `--periods` periods as
one Pyomo model (no splitting into blocks) and hands it to HiGHS without solving, both by
fleetopt's own hand-off (fleetopt/handoff.py) and by Pyomo's persistent interface
(`set_instance`, the hand-off before 2026-12-04); prints the best of 3. `--pause-gc` pauses
Python's garbage collector around both (as `solve_program` does); `--keep-dominated` skips
`configs.drop_dominated`. Run against an older tree for the "before"
figure of a step (docs/benchmarks.md). CPU seconds of this process, not wall time: the figures
then hold on a machine shared with other work.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import sys
import time
from pathlib import Path

from pyomo.common.gc_manager import PauseGC
from pyomo.contrib.solver.solvers.highs import Highs

import fleetopt.configs
from fleetopt.catalog import resolve
from fleetopt.formulation import build_model
from fleetopt.handoff import hand_off
from fleetopt.instance import parse_instance
from fleetopt.pipeline import program_data

sys.path.insert(0, str(Path(__file__).parent))
from scale import SIZES, instance


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="medium", choices=list(SIZES))
    parser.add_argument("--periods", type=int, default=1)
    parser.add_argument("--pause-gc", action="store_true")
    parser.add_argument("--keep-dominated", action="store_true")
    args = parser.parse_args()
    resolved = resolve(parse_instance(instance(args.size, *SIZES[args.size], 0, False)))
    if args.keep_dominated:
        fleetopt.configs.drop_dominated = list
    data = program_data(resolved, fleetopt.configs.enumerate_configs(resolved))
    data = dataclasses.replace(data, periods=data.periods[: args.periods])
    build = handoff = pyomo = float("inf")
    for _ in range(3):
        with PauseGC() if args.pause_gc else contextlib.nullcontext():
            start = time.process_time()
            model = build_model(data)
            built = time.process_time()
            hand_off(model)
            handed = time.process_time()
            Highs().set_instance(model)
            build = min(build, built - start)
            handoff = min(handoff, handed - built)
            pyomo = min(pyomo, time.process_time() - handed)
    print(
        f"{args.size} x {args.periods} period(s): {len(data.configs)} configs, "
        f"{model.nvariables()} variables, {model.nconstraints()} rows; "
        f"build {build:.2f} s, hand-off {handoff:.2f} s (Pyomo's set_instance {pyomo:.2f} s) "
        "(CPU time, best of 3)"
    )


if __name__ == "__main__":
    main()
