"""Bring outside measurements in: fit efficiency factors to benchmark results (`fleetopt
calibrate`), write the overlay an instance includes, and turn aiconfigurator results into profiles."""
