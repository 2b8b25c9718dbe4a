"""Global budget split: one token budget shared by N providers before fan-out (B1).

Honest providers each stay within their own ``max_tokens``; only a split makes
their sum stay within the whole. This module owns that arithmetic and nothing
else, so the engine may import it without pulling in composition.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction

__all__ = ["budget_split"]


def _whole(value: object, what: str) -> int:
    """A non-negative integer, or a ``ValueError`` that says what was wrong."""
    if isinstance(value, bool):
        raise ValueError(f"{what} must be an integer, got a bool ({value!r})")
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{what} must be finite, got {value!r}")
        if not value.is_integer():
            raise ValueError(f"{what} must be a whole number, got {value!r}")
        value = int(value)
    if not isinstance(value, int):
        raise ValueError(f"{what} must be an integer, got {type(value).__name__}")
    if value < 0:
        raise ValueError(f"{what} must not be negative, got {value}")
    return value


def budget_split(
    global_budget: int, provider_count: int, weights: Sequence[float] | None = None
) -> list[int]:
    """Per-provider token shares that sum to exactly ``global_budget`` (for n > 0).

    Without ``weights`` the split is equal and the ``global_budget % n`` leftover
    tokens go one apiece to the first providers. With ``weights`` (one finite,
    non-negative number per provider, not all zero) each share is proportional
    to its weight by the largest-remainder method: every provider gets the floor
    of its exact quota, then the leftover tokens go to the largest fractional
    parts, ties to the earlier provider. Quotas are computed with exact rationals
    so the result does not depend on float rounding. ``provider_count == 0``
    gives ``[]``.
    """
    budget = _whole(global_budget, "global_budget")
    n = _whole(provider_count, "provider_count")
    if weights is None:
        if n == 0:
            return []
        base, extra = divmod(budget, n)
        return [base + 1 if i < extra else base for i in range(n)]
    ws = list(weights)
    if len(ws) != n:
        raise ValueError(f"weights has {len(ws)} entries but provider_count is {n}")
    exact: list[Fraction] = []
    for i, w in enumerate(ws):
        if isinstance(w, bool) or not isinstance(w, int | float):
            raise ValueError(f"weights[{i}] must be a number, got {type(w).__name__}")
        if not math.isfinite(w):
            raise ValueError(f"weights[{i}] must be finite, got {w!r}")
        if w < 0:
            raise ValueError(f"weights[{i}] must not be negative, got {w!r}")
        exact.append(Fraction(w))
    if n == 0:
        return []
    total = sum(exact, Fraction(0))
    if total == 0:
        raise ValueError("weights must not all be zero: nobody would get any budget")
    quotas = [budget * w / total for w in exact]
    shares = [math.floor(q) for q in quotas]
    leftover = budget - sum(shares)
    # Largest remainder first; equal remainders go to the earlier provider.
    by_remainder = sorted(range(n), key=lambda i: (-(quotas[i] - shares[i]), i))
    for i in by_remainder[:leftover]:
        shares[i] += 1
    return shares
