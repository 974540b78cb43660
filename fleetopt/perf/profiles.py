"""Measured capacity tables (Mélange-style profiles) in place of the analytic cost model."""

from __future__ import annotations

from fleetopt.instance import Profile


def profile_rate(
    profile: Profile, input_tokens: float, output_tokens: float
) -> tuple[float | None, str]:
    """Max requests/s one replica sustains for requests of these mean lengths.

    Conservative: a row measured at lengths at least as long in both input and output carries a
    rate no higher than this class could reach, so the answer is the lowest rate among the nearest
    such rows (those no other dominating row lies under). No dominating row: not covered.
    """
    covering = [
        row
        for row in profile.table
        if row.input_tokens >= input_tokens and row.output_tokens >= output_tokens
    ]
    if not covering:
        return None, (
            f"profile has no row at >= {input_tokens:,.0f} input and >= {output_tokens:,.0f} "
            "output tokens"
        )
    nearest = [
        row
        for row in covering
        if not any(
            o is not row
            and o.input_tokens <= row.input_tokens
            and o.output_tokens <= row.output_tokens
            and (o.input_tokens, o.output_tokens) != (row.input_tokens, row.output_tokens)
            for o in covering
        )
    ]
    return min(row.max_requests_per_s for row in nearest), ""
