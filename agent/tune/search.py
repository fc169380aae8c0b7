"""The budget-aware, coarse-to-fine search over a space's valid points.

1. start: the default configuration first (a truncated search never returns worse than the
   untuned start), then any warm-start points from the experience library;
2. coarse: a Latin-hypercube sample over the parameters' positions, snapped to valid points,
   sized from the evaluations the budget is expected to allow;
3. explore: expected improvement under a Gaussian-process surrogate over all unmeasured points,
   its exploration bonus shrinking as the budget is consumed;
4. local: in the last share of the budget, only the neighbours of the best few points;
5. final: the top few and the default re-timed paired and interleaved; the winner must beat the
   default in the median of its per-round ratios, or the default stays.
Every point is measured at most once; the run is deterministic under its seed.
"""

from __future__ import annotations

import math
import random
import statistics
from collections import Counter
from collections.abc import Sequence
from typing import Literal, Protocol

from pydantic import BaseModel, Field

from agent.tune.limits import TuneBudget
from agent.tune.results import Finalist, Measurement, SearchOutcome
from agent.tune.space import Point, Space
from agent.tune.surrogate import GaussianProcess, expected_improvement

Strategy = Literal["adaptive", "random", "exhaustive"]


class SearchAborted(RuntimeError):
    """The evaluator cannot measure any more (its processes will not start): stop, keep what was measured."""


class Retimed(BaseModel):
    times: list[list[float | None]] = Field(description="per round, per point: median ms (None: failed)")
    gpu_s: float = 0.0


class PointMeasurer(Protocol):
    def measure(self, points: Sequence[Point], phase: str) -> list[Measurement]: ...

    def retime(self, points: Sequence[Point], rounds: int) -> Retimed | None: ...


class SearchOptions(BaseModel):
    strategy: Strategy = "adaptive"
    seed: int = 0
    coarse_fraction: float = Field(default=0.2, ge=0, le=1)
    max_coarse: int = 40
    local_fraction: float = Field(default=0.3, ge=0, le=1)
    min_gain: float = Field(default=0.0, ge=0, description="stop when the expected relative gain is below")
    finalists: int = Field(default=3, ge=1)
    retime_rounds: int = Field(default=5, ge=0)
    batch: int = Field(default=1, ge=1, description="points proposed per measurement round")
    max_candidates: int = 4000
    time_reserve: float = Field(default=0.08, description="share of a time budget kept for the final")


class Search:
    def __init__(
        self,
        space: Space,
        budget: TuneBudget,
        evaluator: PointMeasurer,
        options: SearchOptions | None = None,
        *,
        default: Point | None = None,
        warm: Sequence[Point] = (),
    ) -> None:
        self.space = space
        self.budget = budget
        self.evaluator = evaluator
        self.options = options or SearchOptions()
        self.rng = random.Random(self.options.seed)
        self.default = default if default is not None and space.is_valid(default) else space.points[0]
        self.warm = [p for p in dict.fromkeys(warm) if space.is_valid(p)]
        self.history: dict[Point, Measurement] = {}
        self.phases: Counter[str] = Counter()
        self.stop_reason = ""
        self._aborted = False
        self._measure_wall = 0.0
        timed = budget.spec.gpu_seconds is not None or budget.spec.wall_seconds is not None
        self._limit = 1.0 - (self.options.time_reserve if timed else 0.0)

    # -- bookkeeping ------------------------------------------------------------------------------
    def _exhausted(self) -> bool:
        if self._aborted:
            return True
        if len(self.history) >= len(self.space):
            self.stop_reason = self.stop_reason or "every valid point measured"
            return True
        if self.budget.fraction_consumed() >= self._limit:
            self.stop_reason = self.stop_reason or "budget consumed"
            return True
        return False

    def _seconds_per_eval(self) -> float | None:
        return self._measure_wall / len(self.history) if self.history else None

    def _measure(self, points: Sequence[Point], phase: str) -> list[Measurement]:
        fresh = [p for p in dict.fromkeys(points) if p not in self.history and self.space.is_valid(p)]
        if not fresh or self._exhausted():
            return []
        fresh = fresh[: max(1, self.budget.evaluations_left(self._seconds_per_eval()))]
        started = self.budget.wall_seconds
        try:
            results = self.evaluator.measure(fresh, phase)
        except SearchAborted as exc:
            self._aborted, self.stop_reason = True, f"aborted: {exc}"
            return []
        self._measure_wall += self.budget.wall_seconds - started
        for point, m in zip(fresh, results, strict=True):
            m.phase, m.order = phase, len(self.history)
            self.history[point] = m
            self.phases[phase] += 1
            self.budget.charge(evaluations=1, gpu_seconds=m.gpu_s)
        return results

    def _ok(self) -> list[tuple[Point, Measurement]]:
        return sorted(
            ((p, m) for p, m in self.history.items() if m.ok),
            key=lambda pm: (pm[1].time_ms, self.space.index[pm[0]]),
        )

    def _expected_evals(self) -> int:
        left = self.budget.evaluations_left(self._seconds_per_eval())
        return min(len(self.space), self.budget.evaluations + left)

    # -- the run ----------------------------------------------------------------------------------
    def run(self) -> SearchOutcome:
        self._measure([self.default], "default")
        strategy = self.options.strategy
        if strategy == "exhaustive":
            order = [p for p in self.space.points if p not in self.history]
            while order and not self._exhausted():
                batch, order = order[: self.options.batch], order[self.options.batch :]
                self._measure(batch, "exhaustive")
        elif strategy == "random":
            order = [p for p in self.space.points if p not in self.history]
            self.rng.shuffle(order)
            while order and not self._exhausted():
                batch, order = order[: self.options.batch], order[self.options.batch :]
                self._measure(batch, "random")
        else:
            self._adaptive()
        return self._finish()

    def _adaptive(self) -> None:
        for i in range(0, len(self.warm), self.options.batch):
            self._measure(self.warm[i : i + self.options.batch], "warm")
        expected = self._expected_evals()
        dims = sum(1 for v in self.space.values if len(v) > 1)
        coarse = max(min(dims + 1, expected // 4), round(self.options.coarse_fraction * expected))
        if self.warm:
            coarse //= 2
        coarse = min(coarse, self.options.max_coarse, max(0, expected - len(self.history) - 1))
        for i in range(0, coarse, self.options.batch):
            if self._exhausted():
                return
            need = min(self.options.batch, coarse - i)
            self._measure(self._latin_hypercube(need), "coarse")
        while not self._exhausted():
            fraction = self.budget.fraction_consumed() / self._limit
            phase = "local" if fraction >= 1.0 - self.options.local_fraction else "explore"
            batch = self._propose(phase, fraction)
            if not batch:
                self.stop_reason = self.stop_reason or "no candidate left worth measuring"
                return
            self._measure(batch, phase)

    def _latin_hypercube(self, n: int) -> list[Point]:
        strata = [self.rng.sample(range(n), n) for _ in self.space.values]
        chosen: list[Point] = []
        for i in range(n):
            target = tuple(
                values[min(len(values) - 1, int((strata[d][i] + self.rng.random()) / n * len(values)))]
                for d, values in enumerate(self.space.values)
            )
            point = self._nearest_unvisited(target, exclude=set(chosen))
            if point is not None:
                chosen.append(point)
        return chosen

    def _nearest_unvisited(self, target: Point, exclude: set[Point]) -> Point | None:
        if self.space.is_valid(target) and target not in self.history and target not in exclude:
            return target
        goal = self.space.steps(target)
        best: tuple[int, int] | None = None
        found: Point | None = None
        for point in self._pool():
            if point in exclude:
                continue
            distance = sum(abs(a - b) for a, b in zip(self.space.steps(point), goal, strict=True))
            rank = (distance, self.space.index[point])
            if best is None or rank < best:
                best, found = rank, point
        return found

    def _pool(self) -> list[Point]:
        """Unmeasured points to choose from: all of them, or a seeded sample of a huge space
        plus the neighbourhoods of the best points."""
        unvisited = [p for p in self.space.points if p not in self.history]
        if len(unvisited) <= self.options.max_candidates:
            return unvisited
        pool = set(self.rng.sample(unvisited, self.options.max_candidates))
        for point, _ in self._ok()[:10]:
            pool.update(p for p in self.space.neighbours(point, 2) if p not in self.history)
        return sorted(pool, key=self.space.index.__getitem__)

    def _propose(self, phase: str, fraction: float) -> list[Point]:
        ok = self._ok()
        if len(ok) < 3:
            pool = self._pool()
            return self.rng.sample(pool, min(self.options.batch, len(pool))) if pool else []
        candidates = self._local_candidates(ok) if phase == "local" else []
        if not candidates:
            candidates = self._pool()
        if not candidates:
            return []
        xs, ys = self._training_set()
        gp = GaussianProcess()
        gp.fit(xs, ys)
        best = min(ys)
        xi = 0.0 if phase == "local" else 0.01 * max(0.0, 1.0 - fraction)
        chosen: list[Point] = []
        for _ in range(min(self.options.batch, len(candidates))):
            remaining = [c for c in candidates if c not in chosen]
            means, stds = gp.predict([self.space.coords(c) for c in remaining])
            scored = [
                (expected_improvement(best, mu, sd, xi), -mu, -self.space.index[c], c)
                for c, mu, sd in zip(remaining, means, stds, strict=True)
            ]
            top = max(scored)
            if self.options.min_gain > 0 and phase == "local" and top[0] < math.log1p(self.options.min_gain):
                if not chosen:
                    self.stop_reason = f"expected gain below {self.options.min_gain:.1%}"
                break
            chosen.append(top[3])
            # Constant liar: pretend the chosen point measured its predicted mean, refit, go on.
            xs.append(self.space.coords(top[3]))
            ys.append(-top[1])
            if len(chosen) < self.options.batch:
                gp.fit(xs, ys, hyper=gp.hyper)
        return chosen

    def _local_candidates(self, ok: list[tuple[Point, Measurement]]) -> list[Point]:
        for radius in (1, 2):
            found: dict[Point, None] = {}
            for point, _ in ok[:3]:
                for n in self.space.neighbours(point, radius):
                    if n not in self.history:
                        found[n] = None
            if found:
                return list(found)
        return []

    def _training_set(self) -> tuple[list[list[float]], list[float]]:
        ok_logs = [math.log(m.time_ms) for m in self.history.values() if m.ok and m.time_ms]
        worst = max(ok_logs)
        xs, ys = [], []
        for point, m in self.history.items():
            xs.append(self.space.coords(point))
            # A failed point is imputed as the slowest seen: the surrogate steers away from it
            # without the pull a huge penalty value would have.
            ys.append(math.log(m.time_ms) if m.ok and m.time_ms else worst)
        return xs, ys

    # -- the final pick ---------------------------------------------------------------------------
    def _finish(self) -> SearchOutcome:
        if not self.stop_reason:
            if len(self.history) >= len(self.space):
                self.stop_reason = "every valid point measured"
            else:
                self.stop_reason = "budget consumed" if self.budget.done() else "search ended"
        ok = self._ok()
        default_m = self.history.get(self.default)
        default_ok = default_m is not None and default_m.ok
        finalists: list[Finalist] = []
        winner: Point | None = ok[0][0] if ok else None
        if ok:
            chosen = [p for p, _ in ok[: self.options.finalists]]
            if default_ok and self.default not in chosen:
                chosen.append(self.default)
            finalists, winner = self._retime(chosen, default_ok)
        best_m = None if winner is None else self.history[winner]
        paired = {f.key: f for f in finalists}
        best_ms = None
        if best_m is not None:
            entry = paired.get(best_m.key)
            best_ms = entry.paired_ms if entry and entry.paired_ms is not None else best_m.time_ms
        default_ms = None
        if default_ok and default_m is not None:
            entry = paired.get(default_m.key)
            default_ms = entry.paired_ms if entry and entry.paired_ms is not None else default_m.time_ms
        return SearchOutcome(
            best_key=best_m.key if best_m else None,
            best_config=dict(best_m.config) if best_m else None,
            best_ms=best_ms,
            default_key=self.space.key(self.default),
            default_ms=default_ms,
            history=sorted(self.history.values(), key=lambda m: m.order),
            finalists=finalists,
            stop_reason=self.stop_reason,
            usage=self.budget.usage(),
            phases=dict(self.phases),
        )

    def _retime(self, chosen: list[Point], default_ok: bool) -> tuple[list[Finalist], Point]:
        rows = [
            Finalist(
                key=self.space.key(p),
                config=self.space.config(p),
                measured_ms=self.history[p].time_ms or math.inf,
                is_default=p == self.default,
            )
            for p in chosen
        ]
        measured_best = chosen[0]
        if len(chosen) < 2 or self.options.retime_rounds == 0:
            return rows, measured_best
        try:
            result = self.evaluator.retime(chosen, self.options.retime_rounds)
        except SearchAborted:
            result = None
        if result is None:
            return rows, measured_best
        self.budget.charge(gpu_seconds=result.gpu_s)
        anchor = chosen.index(self.default) if default_ok else 0
        scores: list[tuple[float, float, int]] = []
        for i, row in enumerate(rows):
            own = [t for r in result.times if (t := r[i]) is not None]
            ratios = [
                t / a
                for r in result.times
                if (t := r[i]) is not None and (a := r[anchor]) is not None and a > 0
            ]
            if own:
                row.paired_ms = statistics.median(own)
            if ratios:
                row.ratio_to_default = statistics.median(ratios) if default_ok else None
                ordered = sorted(ratios)
                mid = statistics.median(ordered)
                q1, q3 = ordered[len(ordered) // 4], ordered[(3 * len(ordered)) // 4]
                row.spread = (q3 - q1) / mid if mid > 0 else None
                scores.append((statistics.median(ratios), row.measured_ms, i))
        if not scores:
            return rows, measured_best
        _, _, best_i = min(scores)
        winner = chosen[best_i]
        if default_ok and winner != self.default:
            ratio = rows[best_i].ratio_to_default
            if ratio is None or ratio >= 1.0:
                winner = self.default
        return rows, winner
