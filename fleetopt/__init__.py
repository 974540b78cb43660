"""fleetopt: size GPU fleets for LLM serving in tokens per second."""

__version__ = "0.1.0"
