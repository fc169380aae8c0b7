"""Small spaces and replayed measurements for the tuner's CPU tests."""

from __future__ import annotations

import math
import random

from agent.tune.space import Space, SpaceFile


def gemm_like_space() -> Space:
    return Space(
        SpaceFile(
            params={
                "BM": [32, 64, 128],
                "BN": [32, 64, 128],
                "BK": [8, 16, 32],
                "TM": [2, 4, 8],
                "TN": [2, 4, 8],
            },
            constraints=[
                "(BM // TM) * (BN // TN) >= 32",
                "(BM * BK) % ((BM // TM) * (BN // TN)) == 0",
                "(BK * BN) % ((BM // TM) * (BN // TN)) == 0",
            ],
            threads="(BM // TM) * (BN // TN)",
            shared_memory="(BM * BK + BK * BN) * 4",
        )
    )


def rugged_times(space: Space, seed: int, *, fail_rate: float = 0.02) -> dict[str, float | None]:
    """A rugged landscape: a smooth bowl around a random preference, pairwise interactions,
    cliffs (spills), noise and a few failures."""
    rng = random.Random(seed)
    dims = len(space.names)
    prefs = [rng.random() for _ in range(dims)]
    weights = [rng.uniform(0.3, 2.0) for _ in range(dims)]
    pairs = [tuple(rng.sample(range(dims), 2)) for _ in range(3)]
    times: dict[str, float | None] = {}
    for point in space.points:
        x = space.coords(point)
        cost = sum(w * abs(xi - p) ** 1.5 for xi, p, w in zip(x, prefs, weights, strict=True))
        cost += sum(0.5 * abs((x[a] - prefs[a]) - (x[b] - prefs[b])) for a, b in pairs)
        t = math.exp(cost) * rng.lognormvariate(0, 0.05)
        roll = rng.random()
        if roll < 0.05:
            t *= rng.uniform(2, 5)
        times[space.key(point)] = None if roll > 1 - fail_rate else t
    return times
