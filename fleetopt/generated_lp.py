"""An LP over many configs solved on the few that pay for themselves (column generation).

The scaled LP (fleetopt/scaled_bound.py) has a block of columns and rows per config — x[k],
its routes r[c,k], its capacity rows — joined only by the coverage rows every config shares.
Its optimum uses a few dozen of thousands of configs: the large benchmark instance's
llama-3.1-8b group, 7,395 configs, took HiGHS 4.7 s whole and uses 232. Solved on a few
configs, the coverage rows' duals price every other one (the caller's `pays`); those that may
lower the objective join and the LP is solved again, until none may. What is left out then has
no negative reduced cost at any dual of its own rows, so the optimum is the whole LP's
(docs/formulation.md, Independent blocks).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

import numpy as np

from fleetopt.solve import MatrixLp, SolveOptions

Entries = tuple[np.ndarray, np.ndarray, np.ndarray]
"""A sparse matrix's (row, column, value) triplets."""


class GeneratedLp:
    """min cost·v over v ≥ 0 with lower ≤ A·v ≤ upper, where rows [0, shared) are shared and
    every other row, like every column, belongs to one config (`column_config`, and a row to
    the config of the columns it holds). `pays(duals)`, given the shared rows' duals, says which
    configs may lower the objective (a reduced cost below zero at some dual of their own rows):
    it may say so of configs that cannot, never the reverse. `start`: the configs solved
    first, at least one that covers each shared row that must hold (else the LP has no plan)."""

    def __init__(
        self,
        cost: np.ndarray,
        lower: np.ndarray,
        upper: np.ndarray,
        entries: Entries,
        column_config: np.ndarray,
        shared: int,
        pays: Callable[[np.ndarray], np.ndarray],
        start: np.ndarray,
    ) -> None:
        self.cost, self.lower, self.upper = cost, lower, upper
        self.rows, self.columns, self.values = entries
        self.column_config = column_config
        self.shared = shared
        self.pays = pays
        self.active = start.copy()
        self._index_rows()

    def _index_rows(self) -> None:
        """Each row's config (-1 for the shared ones), and the entries sorted by position."""
        row_config = np.full(len(self.lower), -1, dtype=np.int64)
        row_config[self.rows] = self.column_config[self.columns]
        row_config[: self.shared] = -1
        self.row_config = row_config
        self._key = self.rows.astype(np.int64) * len(self.cost) + self.columns
        self._order = np.argsort(self._key, kind="stable")

    def set_coefficients(self, rows: np.ndarray, columns: np.ndarray, values: np.ndarray) -> None:
        """A[row, column] = value for each triplet (each an entry of A already)."""
        wanted = rows.astype(np.int64) * len(self.cost) + columns
        found = self._order[np.searchsorted(self._key[self._order], wanted)]
        self.values[found] = values

    def add_rows(self, upper: np.ndarray, entries: Entries) -> None:
        """Rows Σ A·v ≤ upper (cuts), numbered from 0 in `entries`, each on the columns of one
        config: kept from now on, in every solve where that config is."""
        rows, columns, values = entries
        first = len(self.lower)
        self.lower = np.concatenate([self.lower, np.full(len(upper), -np.inf)])
        self.upper = np.concatenate([self.upper, upper])
        self.rows = np.concatenate([self.rows, first + rows])
        self.columns = np.concatenate([self.columns, columns])
        self.values = np.concatenate([self.values, values])
        self._index_rows()

    def solve(self, options: SolveOptions) -> tuple[float, np.ndarray] | None:
        """The optimum and v (0 on every column left out), or None where HiGHS does not prove
        one in time (or there is none)."""
        deadline = None if options.time_limit is None else time.monotonic() + options.time_limit
        while True:
            left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            solved = self._solve_active(dataclasses.replace(options, time_limit=left))
            if solved is None:
                return None
            objective, values, duals = solved
            joining = self.pays(duals[: self.shared]) & ~self.active
            if not joining.any():
                return objective, values
            self.active |= joining

    def _solve_active(self, options: SolveOptions) -> tuple[float, np.ndarray, np.ndarray] | None:
        """The LP on the active configs' columns and rows: its optimum, v over every column and
        the duals of every row (0 on those left out)."""
        column_in = self.active[self.column_config]
        row_in = (self.row_config < 0) | self.active[np.maximum(self.row_config, 0)]
        column_at = np.cumsum(column_in) - 1
        row_at = np.cumsum(row_in) - 1
        kept = column_in[self.columns]  # a row's entries all lie on its own config's columns
        lp = MatrixLp(
            self.cost[column_in],
            self.lower[row_in],
            self.upper[row_in],
            (row_at[self.rows[kept]], column_at[self.columns[kept]], self.values[kept]),
        )
        solved = lp.solve(options)
        if solved is None:
            return None
        objective, active_values, active_duals = solved
        values, duals = np.zeros(len(self.cost)), np.zeros(len(self.lower))
        values[column_in] = active_values
        duals[row_in] = active_duals
        return objective, values, duals
