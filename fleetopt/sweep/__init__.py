"""`fleetopt sweep`: a grid of scenarios (grid.py), solved in parallel (runner.py), one row each
(table.py); the command line lives in command.py, beside `fleetopt pareto`, which reuses it."""
