"""How tuners are scored on a brute-forced space (Willemsen et al., FGCS 2024).

The baseline is random search without replacement, computed exactly from the space's sorted
times: with N points of which B are drawn, the i-th fastest correct point is the best drawn
with probability C(N-i, B-1) / C(N, B). A draw with no correct point counts as the slowest
correct time. The score is (random - found) / (random - optimum): 0 is no better than random
search, 1 is the optimum.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def _log_comb(n: int, k: int) -> float:
    if k < 0 or k > n:
        return -math.inf
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)


def _best_probabilities(
    values: Sequence[float | None], budget: int
) -> tuple[list[float], list[float], float]:
    """(sorted correct times, P(each is the best drawn), P(no correct point drawn))."""
    n = len(values)
    budget = max(1, min(budget, n))
    ok = sorted(v for v in values if v is not None)
    total = _log_comb(n, budget)
    probs = [math.exp(_log_comb(n - i, budget - 1) - total) for i in range(1, len(ok) + 1)]
    none = math.exp(_log_comb(n - len(ok), budget) - total) if len(ok) < n else 0.0
    return ok, probs, none


def expected_random_best(values: Sequence[float | None], budget: int) -> float:
    """Expected best time random search without replacement finds in `budget` evaluations."""
    ok, probs, none = _best_probabilities(values, budget)
    if not ok:
        return math.inf
    return sum(v * p for v, p in zip(ok, probs, strict=True)) + none * ok[-1]


def expected_random_fraction(values: Sequence[float | None], budget: int) -> float:
    """Expected optimum / best-found of random search (the fraction of the optimum reached)."""
    ok, probs, none = _best_probabilities(values, budget)
    if not ok:
        return 0.0
    return sum(ok[0] / v * p for v, p in zip(ok, probs, strict=True)) + none * ok[0] / ok[-1]


def methodology_score(found: float, random_expected: float, optimum: float) -> float:
    if random_expected <= optimum:
        return 1.0 if found <= optimum else 0.0
    return (random_expected - found) / (random_expected - optimum)
