"""The elapsed-time display of long solves: on a terminal only, and through captured stderr."""

from __future__ import annotations

import os
import pty
import select
import sys
import threading
import time

import pytest

from fleetopt import solve
from fleetopt.cli import _how_far
from fleetopt.command_support import progress
from fleetopt.solve import Watched
from fleetopt.workers import can_fork
from tests.test_interrupt import market_split


class _Terminal:
    def __init__(self, fd: int) -> None:
        self._fd = fd

    def isatty(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._fd


def _on_a_terminal(monkeypatch, run) -> str:
    """What `run(monkeypatch)` shows on a terminal standing in for stderr."""
    master, slave = pty.openpty()
    monkeypatch.setattr(sys, "stderr", _Terminal(slave))
    run(monkeypatch)
    shown = ""
    while select.select([master], [], [], 0.2)[0]:
        shown += os.read(master, 4096).decode()
    os.close(master)
    os.close(slave)
    return shown


def test_progress_ticks_on_a_terminal_even_while_stderr_is_captured(monkeypatch):
    def run(monkeypatch) -> None:
        with progress("working...", every_s=0.05), open(os.devnull, "w") as captured:
            monkeypatch.setattr(sys, "stderr", captured)  # as the solver interface does
            time.sleep(0.3)

    shown = _on_a_terminal(monkeypatch, run)
    assert "\rworking... 0 s" in shown
    assert shown.endswith("\r")  # the line is cleared at the end


def test_a_long_wait_adds_the_hint(monkeypatch):
    def run(_) -> None:
        with progress("working...", every_s=0.05, hint="Ctrl-C stops", hint_after_s=0.12):
            time.sleep(0.3)

    shown = _on_a_terminal(monkeypatch, run)
    assert "\rworking... 0 s\r" in shown  # no hint yet
    assert "\rworking... 0 s (Ctrl-C stops)" in shown
    cleared = shown.rsplit("\r", 2)[-2]
    assert cleared == " " * len("working... 0 s (Ctrl-C stops)")


def test_progress_is_silent_off_a_terminal(capsys):
    with progress("working...", every_s=0.01):
        time.sleep(0.05)
    assert capsys.readouterr().err == ""


@pytest.mark.skipif(sys.platform != "linux", reason="workers fork only on Linux")
def test_the_display_leaves_workers_free_to_fork(monkeypatch):
    """The ticker takes no lock a forked child could need, so enumeration still forks its
    workers while it runs at a terminal; any other thread still stops that."""
    seen: list[bool] = []

    def run(_) -> None:
        with progress("working...", every_s=0.05):
            time.sleep(0.1)
            seen.append(can_fork())
            other = threading.Thread(target=time.sleep, args=(0.2,))
            other.start()
            seen.append(can_fork())
            other.join()

    _on_a_terminal(monkeypatch, run)
    assert seen == [True, False]


def test_the_line_shows_how_far_the_solve_has_come(monkeypatch):
    """`fleetopt solve`'s line adds the blocks solved and the gap of the one under way, read
    from `solve.WATCHED` as the solver leaves them."""
    watched = Watched(blocks=(3, 24), gap=0.0081)
    monkeypatch.setattr(solve, "WATCHED", watched)

    def run(_) -> None:
        with progress("solving x...", every_s=0.05, detail=_how_far):
            time.sleep(0.12)
            watched.blocks = None
            time.sleep(0.12)

    shown = _on_a_terminal(monkeypatch, run)
    assert "\rsolving x... 0 s (3 of 24 blocks, gap 0.81%)" in shown
    assert "\rsolving x... 0 s (gap 0.81%)" in shown
    monkeypatch.setattr(solve, "WATCHED", Watched())
    assert _how_far() == ""


@pytest.mark.parametrize("bound", [None, 0.5])
def test_a_watched_solve_leaves_its_gap_as_it_runs(bound):
    """HiGHS's gap against its own bound, or a bound known before where that proves more, as
    the solve runs; none once it ends. A market-split program: its plans keep a deviation of a
    few units for seconds (none without deviation: tests/test_interrupt.py), while HiGHS's
    bound stays at 0 (a gap of 100%); against a bound of 0.5 the gap is 1 − 0.5/deviation,
    which falls as the plans improve."""
    seen: list[float] = []
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.02):
            if solve.WATCHED.gap is not None:
                seen.append(solve.WATCHED.gap)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        options = solve.SolveOptions(time_limit=1.0)
        outcome = solve.run_highs(market_split(4, slack=True), options, None, True, bound)
    finally:
        done.set()
        sampler.join()
    assert seen and solve.WATCHED.gap is None
    if bound is None:
        assert set(seen) == {1.0}
    else:
        last = solve.relative_gap(outcome.objective, bound)
        assert all(0.5 <= last <= gap < 1.0 for gap in seen)
        assert seen == sorted(seen, reverse=True)
