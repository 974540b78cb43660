"""Worker processes for work that splits into independent parts (models' configs, blocks of the
program, sweep scenarios).

Workers fork from a forkserver that has imported fleetopt once: a worker starts in milliseconds
and inherits no solver threads from the caller; the forkserver itself costs ~0.4 s once per
process (docs/benchmarks.md), which only parts that take seconds repay.
"""

from __future__ import annotations

import multiprocessing
import signal
from concurrent.futures import ProcessPoolExecutor


def worker_pool(jobs: int, ctrl_c_to_parent: bool = True) -> ProcessPoolExecutor:
    """`jobs` worker processes. With `ctrl_c_to_parent` they ignore Ctrl-C and leave it to the
    caller, which stops them (shutdown with its pending parts cancelled)."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["fleetopt.pipeline"])
    return ProcessPoolExecutor(
        max_workers=jobs,
        mp_context=context,
        initializer=_ignore_sigint if ctrl_c_to_parent else None,
    )


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
