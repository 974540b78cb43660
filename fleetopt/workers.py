"""Worker processes for work that splits into independent parts (models' configs, blocks of the
program, sweep scenarios).

Workers fork from a forkserver that has imported fleetopt once: a worker starts in milliseconds
and inherits no solver threads from the caller; the forkserver itself costs ~0.4 s once per
process (docs/benchmarks.md), which only parts that take seconds repay. What every part reads
(the program its blocks are cut from) goes to each worker once, as it starts (`shared`). Parts
that run no solver (configs' enumeration) can fork from the caller itself, where that is safe
(`can_fork`): nothing to import again, so a tenth of a second of work repays it.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import signal
import sys
import threading
import weakref
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from typing import Any


def default_jobs() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


@contextmanager
def worker_pool(
    jobs: int, ctrl_c_to_parent: bool = True, shared: Any = None, forked: bool = False
) -> Iterator[ProcessPoolExecutor]:
    """`jobs` worker processes for a with block. Left as it ends, the workers finish what they
    were given and exit; left by an error, Ctrl-C or a generator closed early, they are stopped
    where they are: no answer of theirs is wanted any more, and waiting for one (a block's
    branch and bound) could take minutes. With `ctrl_c_to_parent` they ignore Ctrl-C and leave
    it to the caller. `shared`: what every part reads (`shared()` in the worker), pickled once
    and sent to each worker as it starts instead of with every part (a large program's blocks
    each carried their model's configs: docs/benchmarks.md). `forked`: fork this process rather
    than the forkserver, for parts that run no solver, where `can_fork`."""
    if forked:
        context = multiprocessing.get_context("fork")
    else:
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(["fleetopt.pipeline"])
    pool = ProcessPoolExecutor(
        max_workers=jobs,
        mp_context=context,
        initializer=_start,
        initargs=(ctrl_c_to_parent, pickle.dumps(shared, pickle.HIGHEST_PROTOCOL)),
    )
    try:
        yield pool
    except BaseException:
        for process in list(getattr(pool, "_processes", {}).values()):
            process.terminate()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def can_fork() -> bool:
    """Whether a worker may fork from this process: on Linux (macOS's system libraries, which
    numpy may use, are not fork-safe) and with no other thread running, which could hold a
    lock the child would wait on forever, but those made by `fork_safe_thread`. A solver's own
    threads do not count: the child runs no solver."""
    others = [thread for thread in threading.enumerate() if thread not in _fork_safe]
    return sys.platform == "linux" and len(others) == 1


_fork_safe: weakref.WeakSet[threading.Thread] = weakref.WeakSet()


def fork_safe_thread(target: Callable[[], None]) -> threading.Thread:
    """A daemon thread that `can_fork` does not count, for a target that takes no lock a forked
    child could need: no imports, logging or buffered streams, only its own Event and
    `os.write` (the elapsed-time display of `fleetopt solve` at a terminal, which had turned
    the typical instance's enumeration from two forked workers to one process:
    docs/benchmarks.md)."""
    thread = threading.Thread(target=target, daemon=True)
    _fork_safe.add(thread)
    return thread


_shared: Any = None


def shared() -> Any:
    """The `shared` object of the pool this worker belongs to."""
    return _shared


def _start(ignore_sigint: bool, pickled: bytes) -> None:
    global _shared
    if ignore_sigint:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    _shared = pickle.loads(pickled)
