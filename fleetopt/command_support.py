"""What every command shares: errors as one line and an exit code (DESIGN §4: 2 bad input or
usage, 3 infeasible), the instance loaded and checked against the catalog, output paths checked
before any work is done. Command modules import from here, never from `fleetopt.cli`."""

from __future__ import annotations

import math
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import wraps
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import click

from fleetopt.errors import FleetoptError, InputError, Interrupted

if TYPE_CHECKING:
    from fleetopt.instance import Instance


class FiniteRange(click.FloatRange):
    """click's FloatRange that refuses nan and ±inf too, which pass its comparisons (nan) or
    its open end (inf) and would reach the model as lengths or budgets."""

    def convert(self, value, param, ctx):
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return number


def one_line_errors(func: Callable) -> Callable:
    """Turn every fleetopt error into one line on stderr and its exit code (2 input, 3 infeasible);
    a file that cannot be read or written is bad input too, and Ctrl-C outside a solve (a solve
    keeps its incumbent, solve.py) ends with one line and the shell's code 130."""

    @wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except FleetoptError as exc:
            _fail(str(exc), exc.exit_code)
        except BrokenPipeError:
            raise  # `fleetopt catalog | head`: click quiets it
        except OSError as exc:
            _fail(describe_os_error(exc), InputError.exit_code)
        except UnicodeDecodeError as exc:  # the readers that know the file name it; a fallback
            _fail(f"an input file is not UTF-8 text ({exc.reason})", InputError.exit_code)
        except KeyboardInterrupt:
            _fail("interrupted", Interrupted.exit_code)

    return wrapper


def _fail(message: str, code: int) -> NoReturn:
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


def describe_os_error(exc: OSError) -> str:
    """`path: what went wrong`, naming a missing folder rather than the file inside it."""
    if exc.filename is None:
        return exc.strerror or str(exc)
    folder = Path(exc.filename).parent
    if isinstance(exc, FileNotFoundError) and not folder.is_dir():
        return f"{exc.filename}: folder {folder} does not exist; create it or choose another path"
    return f"{exc.filename}: {(exc.strerror or str(exc)).lower()}"


def load_checked_instance(path: str) -> Instance:
    """Load, validate and look up an instance; every error names the file."""
    from fleetopt.catalog import resolve
    from fleetopt.instance import load_instance

    instance = load_instance(path)
    try:
        resolve(instance)
    except InputError as exc:
        raise InputError(f"{path}: {exc}") from None
    return instance


class OutputPath(click.Path):
    """A file to write: its folder must exist, checked before the command does any work."""

    def __init__(self) -> None:
        super().__init__(dir_okay=False)

    def convert(self, value, param, ctx):
        path = super().convert(value, param, ctx)
        folder = Path(path).parent
        if not folder.is_dir():
            self.fail(f"folder {str(folder)!r} of {str(path)!r} does not exist", param, ctx)
        return path


class OneLineGroup(click.Group):
    """A command group whose usage errors (unknown option, bad value, missing argument, unknown
    command) are one line, `error: <message> (see fleetopt CMD --help)`, with exit code 2."""

    def make_context(self, info_name, args, parent=None, **extra):
        with _one_line_click_errors():
            return super().make_context(info_name, args, parent, **extra)

    def invoke(self, ctx):
        with _one_line_click_errors():
            return one_line_errors(super().invoke)(ctx)


@contextmanager
def _one_line_click_errors() -> Iterator[None]:
    try:
        yield
    except click.exceptions.NoArgsIsHelpError:
        raise  # `fleetopt` alone prints the help
    except click.UsageError as exc:
        where = exc.ctx.command_path if exc.ctx else "fleetopt"
        _fail(f"{_one_line(exc.format_message())} (see {where} --help)", exc.exit_code)
    except click.ClickException as exc:
        _fail(_one_line(exc.format_message()), exc.exit_code)


def _one_line(text: str) -> str:
    return " ".join(text.split())


@contextmanager
def progress(
    message: str,
    enabled: bool = True,
    every_s: float = 1.0,
    hint: str = "",
    hint_after_s: float = 10.0,
    detail: Callable[[], str] = lambda: "",
) -> Iterator[None]:
    """A one-line elapsed-time display on stderr while a long step runs, for a person at a
    terminal: nothing when stderr is not a terminal (pipes, CI) or when disabled. It writes to
    a duplicate of the terminal's descriptor, since the solver interface captures stderr. After
    `hint_after_s` the line adds `hint` (what the person can do about a long wait). `detail`:
    how far the step has come, read each tick from the display's thread, so it may take no
    lock (`workers.fork_safe_thread`)."""
    stream = sys.stderr
    if not (enabled and stream.isatty()):
        yield
        return
    terminal = os.dup(stream.fileno())
    done = threading.Event()
    start = time.monotonic()
    widest = 0

    def show(text: str) -> None:
        os.write(terminal, text.encode("utf-8", "replace"))

    def tick() -> None:
        nonlocal widest
        while not done.wait(every_s):
            elapsed = time.monotonic() - start
            line = " ".join(filter(None, [f"{message} {elapsed:,.0f} s", detail()]))
            if hint and elapsed >= hint_after_s:
                line += f" ({hint})"
            widest = max(widest, len(line))
            show("\r" + line)

    from fleetopt.workers import fork_safe_thread

    ticker = fork_safe_thread(tick)
    ticker.start()
    try:
        yield
    finally:
        done.set()
        ticker.join()
        show("\r" + " " * widest + "\r")
        os.close(terminal)


def solver_options(each: str = "") -> Callable[[Callable], Callable]:
    """--time-limit and --mip-gap, for every command that solves (`each`: "per mode", ...)."""
    suffix = f" {each}" if each else ""

    def decorate(func: Callable) -> Callable:
        func = click.option(
            "--mip-gap",
            type=FiniteRange(min=0),
            default=1e-4,
            show_default=True,
            help=f"Relative optimality gap at which the solver stops{suffix}.",
        )(func)
        return click.option(
            "--time-limit",
            type=FiniteRange(min=0, min_open=True),
            help=f"Solver time limit{suffix}, seconds.",
        )(func)

    return decorate


def jobs_option() -> Callable[[Callable], Callable]:
    """--jobs: processes for the parts of enumeration and of the program, for every command
    that solves one instance."""
    return click.option(
        "--jobs",
        type=click.IntRange(min=1),
        help="Independent parts of the program (demand periods, models that share no capped GPU "
        "type) solved at once, one process each, as configs are enumerated; the plan is the "
        "same for any number [default: one per core].",
    )


def max_num_seqs_option(help_text: str) -> Callable[[Callable], Callable]:
    """--max-num-seqs: the engine's batch limit, where a command models one replica."""
    return click.option(
        "--max-num-seqs", type=click.IntRange(min=1), default=256, show_default=True, help=help_text
    )
