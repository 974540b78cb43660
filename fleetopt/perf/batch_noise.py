"""How much the batch of a busy replica swings: the variance of the number of sequences in flight.

Sequences arrive as a Poisson stream and each stays for its output's steps, so with a fixed step
time the batch would be a Poisson count (variance = mean, M/G/∞). But the step is not fixed: it
grows with the batch it carries and, on a colocated replica, with the prompts that arrived during
the step before. A burst of arrivals lengthens the steps, so more requests arrive per step, so the
batch grows further: the feedback amplifies the swings. With a step τ = A + B·n + C·(prompt
tokens), a share κ = B·n̄/τ of it spent on the batch, ρ = C·λL̄ on prompts, and a = 1 − κ − ρ
fixed (weight read, fixed time), the linearised (linear-noise) dynamics, counted in steps, are

    δn(ω) = [Ξ(ω)·(1 − ρe) + Ñ(ω)·e·u(ω)] / (1 − λB·Ñ(ω) − ρe),     e = e^{−iω},

with Ñ(ω) = E[Σ_{j=1..O} e^{−iωj}] (the batch's memory of arrivals, O the output in steps),
Ξ the arrivals' own Poisson noise seen through each sequence's stay (spectrum λτ·E|Σ_{j≤O}
e^{−iωj}|²), and u the noise of prompt tokens (spectrum ρ²λτ·(1 + cv²_L), correlated with Ξ).
Var(n) = (1/2π)∫ |δn(ω)|² dω. For exponential outputs this is n̄/a·(1 + ρ²(1 + cv²_L)/(2(1 − ρ)));
at ρ = 0, n̄/(1 − κ), the birth–death chain's. With the fixed part a fifth of the step the batch's
standard deviation is 2–3.5× the Poisson one, and its tail, not its mean, meets the slot limit.

docs/latency.md, "Batch swings", measures it against the simulator.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

GRID = 192
"""Frequencies the integral is evaluated at, log-spaced in ω·Ō from LOWEST to π·Ō."""
LOWEST = 1e-8
"""The grid's lowest ω·Ō, far below the resonance width a (the fixed share of the step) of any
replica with a batch worth sizing: below it the integrand is flat, taken as a box. One grid
serves every (κ, ρ), so the outputs' spectra are computed once per length mix (`_spectra`):
against a 20,000-point grid from 1e-10 the integral is within 0.7% (0.1% on average) over
random mixes, κ and ρ, as the grid placed by a was."""


def batch_variance_ratio(
    outputs: Sequence[tuple[float, float]],
    batch_share: float,
    prompt_share: float = 0.0,
    prompt_cv2: float = 0.0,
) -> float:
    """Var(n)/E(n) of the batch in flight (1 for a fixed step: Poisson).

    outputs: (weight, decode steps) of the sequences' lengths, weights summing to 1;
    batch_share κ and prompt_share ρ: the shares of the mean step spent on the batch and on
    prompts (κ + ρ < 1; what is left is the fixed part)."""
    key = _rounded(tuple(outputs))
    return _ratio(key, round(batch_share, 4), round(prompt_share, 4), round(prompt_cv2, 3))


@lru_cache(maxsize=65536)
def _rounded(outputs: tuple[tuple[float, float], ...]) -> tuple[tuple[float, float], ...]:
    """The outputs as `_ratio`'s cache key. Rounding a float to n digits is exact and slow
    (~0.3 µs), and a replica's headroom search asks for the same mix hundreds of times."""
    return tuple((round(w, 6), round(o, 3)) for w, o in outputs)


@dataclass(frozen=True)
class _Spectra:
    """What the integrand takes from the output lengths alone, on the grid."""

    mean: float  # Ō, in steps
    omega: np.ndarray
    e: np.ndarray  # e^{−iω}
    memory: np.ndarray  # Ñ(ω) = E[Σ_{j=1..O} e^{−iωj}]
    memory2: np.ndarray  # |Ñ(ω)|²
    own: np.ndarray  # E|Σ_{j≤O} e^{−iωj}|²
    cos: np.ndarray  # cos ω
    dlog: np.ndarray  # the trapezoid's steps in ln ω


@lru_cache(maxsize=4096)
def _spectra(outputs: tuple[tuple[float, float], ...]) -> _Spectra:
    weights = np.array([w for w, _ in outputs])
    steps = np.maximum(1.0, np.array([o for _, o in outputs]))
    mean = float(weights @ steps)
    omega = np.geomspace(LOWEST / mean, np.pi, GRID)
    e = np.exp(-1j * omega)
    stay = e * (1 - np.exp(-1j * np.outer(steps, omega))) / (1 - e)  # Σ_{j=1..O} e^{−iωj}
    memory, own = weights @ stay, weights @ np.abs(stay) ** 2
    return _Spectra(
        mean, omega, e, memory, np.abs(memory) ** 2, own, np.cos(omega), np.diff(np.log(omega))
    )


@lru_cache(maxsize=65536)
def _ratio(outputs: tuple[tuple[float, float], ...], kappa: float, rho: float, cv2: float) -> float:
    if 1.0 - kappa - rho <= 1e-9:
        return float("inf")  # the step grows faster than the batch it serves: no steady state
    s = _spectra(outputs)
    noise = np.abs(1 - rho * s.e) ** 2 * s.own + s.memory2 * (
        rho**2 * (1 + cv2) + 2 * rho * (s.cos - rho)
    )
    density = noise / np.abs(1 - kappa / s.mean * s.memory - rho * s.e) ** 2
    spread = density * s.omega
    # trapezoid in ln ω, and [0, ω₀] as a box
    integral = density[0] * s.omega[0] + float(np.sum((spread[1:] + spread[:-1]) / 2 * s.dlog))
    return float(integral / np.pi / s.mean)  # a numpy scalar would follow into every coefficient
