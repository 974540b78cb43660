"""Token cost model: memory, step times and per-class coefficients. Knows nothing of Pyomo."""
