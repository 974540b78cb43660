"""Errors the CLI turns into one line and an exit code (DESIGN §4: 2 = bad input, 3 = infeasible;
130 = interrupted, as shells report Ctrl-C)."""


class FleetoptError(Exception):
    exit_code = 1


class InputError(FleetoptError):
    """Bad input: the message names the field (or file:line) and the fix."""

    exit_code = 2


class InfeasibleError(FleetoptError):
    """No fleet meets the targets; the message says which class, which target and why."""

    exit_code = 3


class NoPlanInTime(FleetoptError):
    """The time limit ran out before the solver found any fleet: not an answer about the
    instance (raise --time-limit), so commands that solve many variants keep the rest."""


class VerificationError(FleetoptError):
    """A solved plan failed the independent re-check: a bug, never the user's fault."""

    exit_code = 4


class Interrupted(FleetoptError):
    """Ctrl-C stopped a solve before it found any plan (with one, the plan is returned)."""

    exit_code = 130
