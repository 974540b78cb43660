"""The elapsed-time display of long solves: on a terminal only, and through captured stderr."""

from __future__ import annotations

import os
import pty
import select
import sys
import threading
import time

import pytest

from fleetopt.command_support import progress
from fleetopt.workers import can_fork


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
