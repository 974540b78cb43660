"""The mixed-integer program: one Pyomo model, one small generator per constraint family."""

from fleetopt.formulation.model import build_model

__all__ = ["build_model"]
