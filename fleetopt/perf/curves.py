"""Measured curves in place of the roofline's prefill time and decode step time.

A `profiles` entry with a `prefill` curve and/or a `decode` grid makes a `CurveReplica`: the same
replica (memory, KV cache and network stay analytic) whose step costs come from the measurements,
so its configs go through the same operating points, latency limits and queueing as analytic
ones, and `verify` re-checks them with the same functions. Both readings are conservative — never
more optimistic than the nearest measured neighbours (docs/cost-model.md, "Measured curves"):

- Prefill: a prompt of L tokens takes t(L) = L / rate. Between measured lengths the rate is the
  lower of the two neighbours'; below the shortest, a prompt takes the shortest one's time (a
  shorter prompt never takes longer); beyond the longest it is not covered. A prefill chunk of C
  tokens reserves C / (best measured rate) of each step: every measured rate already pays its
  share of weight reads and step overhead, so no token added to a step costs less.
- Decode: step(b sequences, C context tokens in all) = f + β·b + γ·C, the bound of this form that
  lies on or above every grid point with the least total relative excess. It is bilinear in
  (batch, context), so inside a grid cell it is at least the bilinear interpolation of the
  cell's corners; contexts below the grid count as its smallest, a batch or mean context above
  it is not covered. Linear in the batch's sequences and tokens, it keeps the program linear.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np

from fleetopt.catalog import Gpu, Model
from fleetopt.instance import DecodePoint, PrefillPoint, Profile
from fleetopt.perf.operating_point import Limits, RequestShape
from fleetopt.perf.replica import Replica, StepParts


@dataclass(frozen=True)
class PrefillCurve:
    lengths: tuple[float, ...]
    rates: tuple[float, ...]
    """Prompt tokens/s at each measured length, in order of length."""

    @classmethod
    def of(cls, points: list[PrefillPoint]) -> PrefillCurve:
        ordered = sorted(points, key=lambda p: p.input_tokens)
        return cls(tuple(p.input_tokens for p in ordered), tuple(p.tokens_per_s for p in ordered))

    @property
    def longest(self) -> float:
        return self.lengths[-1]

    @property
    def best_s_per_token(self) -> float:
        return 1 / max(self.rates)

    def rate(self, prompt_tokens):
        """Tokens/s for prompts of this length (a number or an array): a measured point's own,
        else the lower of the two neighbours' (the shortest point's below the curve)."""
        lengths, rates = np.array(self.lengths), np.array(self.rates)
        tokens = np.asarray(prompt_tokens, dtype=float)
        if np.any(tokens > self.longest):
            raise ValueError(f"prompts beyond the measured prefill curve ({self.longest:g} tokens)")
        upper = np.searchsorted(lengths, tokens)  # first measured length >= the prompt
        lower = np.where(lengths[upper] == tokens, upper, np.maximum(upper - 1, 0))
        return np.minimum(rates[lower], rates[upper])

    def prompt_s(self, prompt_tokens):
        """Time to prefill one prompt: no less than the shortest measured prompt's."""
        seconds = np.maximum(prompt_tokens, self.lengths[0]) / self.rate(prompt_tokens)
        return float(seconds) if np.ndim(seconds) == 0 else seconds


@dataclass(frozen=True)
class DecodePlane:
    """step = fixed + per_seq · b + per_context_token · max(C, b · min_context)."""

    fixed_s: float
    per_seq_s: float
    per_context_token_s: float
    min_context: float
    max_context: float
    max_batch: int

    @classmethod
    def of(cls, points: list[DecodePoint]) -> DecodePlane:
        rows = np.array([[1.0, p.batch, p.batch * p.context_tokens] for p in points])
        times = np.array([p.step_ms / 1e3 for p in points])
        fixed, per_seq, per_token = (float(v) for v in _tightest_upper_bound(rows, times))
        contexts = [p.context_tokens for p in points]
        return cls(
            fixed, per_seq, per_token, min(contexts), max(contexts), max(p.batch for p in points)
        )

    def seq_s(self, context_tokens: float) -> float:
        """Step time one sequence of this context adds."""
        return self.per_seq_s + self.per_context_token_s * max(context_tokens, self.min_context)

    def step_s(self, seqs: float, context_tokens: float) -> float:
        return (
            self.fixed_s
            + self.per_seq_s * seqs
            + self.per_context_token_s * max(context_tokens, seqs * self.min_context)
        )


def _tightest_upper_bound(rows: np.ndarray, times: np.ndarray) -> np.ndarray:
    """x ≥ 0 with rows · x ≥ times, least Σ (rows · x) / times: a 3-variable linear program.

    Its optimum is a vertex, three constraints tight; vertices are enumerated over a growing set
    of the grid's rows (the most violated one added each round), which ends with every row held.
    """
    scale = rows.max(axis=0)  # columns of ~1 keep the 3x3 solves well conditioned
    rows = rows / scale
    weights = (rows / times[:, None]).sum(axis=0)
    active = [int(np.argmax(times))]
    while True:
        x = _best_vertex(rows[active], times[active], weights)
        slack = rows @ x - times
        worst = int(np.argmin(slack / times))
        if slack[worst] >= -1e-12 * times[worst] or worst in active:
            # lift the floor by any rounding shortfall: the bound must hold at every point
            x[0] += max(0.0, float(np.max(times - rows @ x)))  # column 0 is all ones
            return x / scale
        active.append(worst)


def _best_vertex(rows: np.ndarray, times: np.ndarray, weights: np.ndarray) -> np.ndarray:
    bounds = np.eye(3)
    every_row = np.vstack([rows, bounds])
    every_rhs = np.concatenate([times, np.zeros(3)])
    best, best_cost = None, math.inf
    for triple in itertools.combinations(range(len(every_row)), 3):
        a, b = every_row[list(triple)], every_rhs[list(triple)]
        if abs(np.linalg.det(a)) < 1e-12:
            continue
        x = np.linalg.solve(a, b)
        tolerance = 1e-9 * np.maximum(np.abs(every_rhs), 1e-9)
        if np.all(every_row @ x >= every_rhs - tolerance) and weights @ x < best_cost:
            best, best_cost = x, float(weights @ x)
    assert best is not None, "x large enough is always feasible; a vertex exists since x >= 0"
    return best


@dataclass(frozen=True, eq=False)
class CurveReplica(Replica):
    """A replica whose prefill time and decode step come from measured curves (see module doc).

    The measured step is one quantity, so it stands on the compute side with nothing beside it:
    no weight read, no all-reduce (both are inside the measurements)."""

    prefill: PrefillCurve | None = None
    decode: DecodePlane | None = None

    @classmethod
    def of(cls, model: Model, gpu: Gpu, profile: Profile) -> CurveReplica:
        return cls(
            model,
            gpu,
            profile.tensor_parallel,
            prefill=PrefillCurve.of(profile.prefill) if profile.prefill else None,
            decode=DecodePlane.of(profile.decode) if profile.decode else None,
        )

    @cached_property
    def fixed_s(self) -> float:
        return self.decode.fixed_s if self.decode else 0.0

    @cached_property
    def weight_read_s(self) -> float:
        return 0.0

    @cached_property
    def walk_s_per_token(self) -> float:
        """The measured step holds the walk already: configs need no context levels."""
        return 0.0

    @cached_property
    def host_s_per_token(self) -> float:
        """The measured steps hold the host's time already."""
        return 0.0

    @cached_property
    def allreduce_s_per_token(self) -> float:
        return 0.0

    @cached_property
    def linear_s_per_token(self) -> float:
        """What a prefill chunk token reserves of a step: the best measured time per token."""
        return self.prefill.best_s_per_token if self.prefill else 0.0

    def prefill_s_per_token(self, prompt_tokens: float) -> float:
        return self.prefill.prompt_s(prompt_tokens) / prompt_tokens

    def decode_s_per_token(self, context_tokens: float) -> float:
        return self.decode.seq_s(context_tokens)

    def step_parts(
        self,
        decode_seqs: float = 0.0,
        decode_context_tokens: float = 0.0,
        prefill_tokens: float = 0.0,
        prefill_compute_s: float | None = None,
    ) -> StepParts:
        if prefill_compute_s is None:
            prefill_compute_s = prefill_tokens * self.linear_s_per_token
        batch = 0.0
        if self.decode is not None:
            batch = self.decode.step_s(decode_seqs, decode_context_tokens) - self.fixed_s
        return StepParts(self.fixed_s, 0.0, batch + prefill_compute_s, 0.0, 0.0)


def replica_for(model: Model, gpu: Gpu, tp: int, role: str, profiles: list[Profile]) -> Replica:
    """The replica's cost model: measured curves where a curve profile covers (model, GPU, tp,
    role), else the roofline."""
    for p in profiles:
        key = (p.model, p.gpu, p.tensor_parallel, p.role)
        if key == (model.name, gpu.name, tp, role) and p.table is None:
            return CurveReplica.of(model, gpu, p)
    return Replica(model, gpu, tp)


def replica_limits(replica: Replica, limits: Limits) -> Limits:
    """A decode grid's largest batch is an engine limit too: beyond it nothing was measured."""
    if isinstance(replica, CurveReplica) and replica.decode is not None:
        return replace(limits, max_num_seqs=min(limits.max_num_seqs, replica.decode.max_batch))
    return limits


def uncovered(replica: Replica, shape: RequestShape, role: str) -> str | None:
    """Why the replica's curves do not cover the class in this role, or None."""
    if not isinstance(replica, CurveReplica):
        return None
    prompt = max(shape.input_mean, shape.input_tail, shape.input_longest)
    if role != "decode" and prompt > replica.prefill.longest:
        return (
            f"prefill curve measured up to {replica.prefill.longest:,.0f}-token prompts, the "
            f"class's longest is {prompt:,.0f}"
        )
    if role != "prefill" and shape.decode_context > replica.decode.max_context:
        return (
            f"decode grid measured up to {replica.decode.max_context:,.0f} context tokens, the "
            f"class's mean context is {shape.decode_context:,.0f}"
        )
    return None
