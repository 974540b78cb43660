"""`fleetopt explain`: what requests/s hides (sizing.py computes, command.py is the CLI)."""

from fleetopt.explain.sizing import Explanation, explain

__all__ = ["Explanation", "explain"]
