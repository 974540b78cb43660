"""`fleetopt` starts without the heavy libraries a command does not need (docs/benchmarks.md)."""

from __future__ import annotations

import subprocess
import sys


def test_cli_import_leaves_heavy_libraries_out():
    code = (
        "import sys, fleetopt.cli; "
        "print(' '.join(m for m in ('pandas', 'matplotlib', 'pyomo', 'numpy', 'fleetopt.simulate')"
        " if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == ""


def test_solve_path_leaves_pandas_matplotlib_and_pyomo_plugins_out():
    """pyomo.core and the HiGHS interface are all a solve needs; pyomo.environ loads every
    Pyomo plugin (about 0.25 s of start-up)."""
    code = (
        "import sys, fleetopt.pipeline, fleetopt.report.text; "
        "print(' '.join(m for m in ('pandas', 'matplotlib', 'pyomo.environ') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == ""
