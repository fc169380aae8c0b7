"""A tuning budget in evaluations, GPU-seconds and wall-clock seconds (Kernel Tuner's `Budget`).

`fraction_consumed()` is the largest of the three ratios, clamped to 1: the one signal the
search's coarse-to-fine schedule reads. Only measured points are charged: a point rejected by
the space's constraints, or one already measured in this run, costs nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from pydantic import BaseModel, Field, model_validator


class BudgetSpec(BaseModel):
    max_evals: int | None = Field(default=None, ge=1, description="unique measured points")
    gpu_seconds: float | None = Field(default=None, gt=0, description="seconds the worker spent on the GPU")
    wall_seconds: float | None = Field(default=None, gt=0, description="from the start, compiles included")

    @model_validator(mode="after")
    def _some_limit(self) -> BudgetSpec:
        if self.max_evals is None and self.gpu_seconds is None and self.wall_seconds is None:
            raise ValueError("a budget needs at least one limit: evaluations, GPU-seconds or wall seconds")
        return self

    def describe(self) -> str:
        parts = []
        if self.max_evals is not None:
            parts.append(f"{self.max_evals} evaluations")
        if self.gpu_seconds is not None:
            parts.append(f"{self.gpu_seconds:g} GPU-s")
        if self.wall_seconds is not None:
            parts.append(f"{self.wall_seconds:g} s wall")
        return ", ".join(parts)


class TuneUsage(BaseModel):
    evaluations: int
    gpu_seconds: float
    wall_seconds: float
    compile_seconds: float
    fraction: float


class TuneBudget:
    def __init__(self, spec: BudgetSpec, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.spec = spec
        self._clock = clock
        self._start = clock()
        self.evaluations = 0
        self.gpu_seconds = 0.0
        self.compile_seconds = 0.0

    def charge(self, *, evaluations: int = 0, gpu_seconds: float = 0.0, compile_seconds: float = 0.0) -> None:
        self.evaluations += evaluations
        self.gpu_seconds += max(gpu_seconds, 0.0)
        self.compile_seconds += max(compile_seconds, 0.0)

    @property
    def wall_seconds(self) -> float:
        return self._clock() - self._start

    def fraction_consumed(self) -> float:
        ratios = [0.0]
        if self.spec.max_evals is not None:
            ratios.append(self.evaluations / self.spec.max_evals)
        if self.spec.gpu_seconds is not None:
            ratios.append(self.gpu_seconds / self.spec.gpu_seconds)
        if self.spec.wall_seconds is not None:
            ratios.append(self.wall_seconds / self.spec.wall_seconds)
        return min(1.0, max(ratios))

    def done(self) -> bool:
        return self.fraction_consumed() >= 1.0

    def evaluations_left(self, seconds_per_eval: float | None = None) -> int:
        """How many more evaluations fit, from the count limit and, given the observed cost of
        one evaluation, from the time limits."""
        left = float("inf")
        if self.spec.max_evals is not None:
            left = self.spec.max_evals - self.evaluations
        if seconds_per_eval and seconds_per_eval > 0:
            if self.spec.gpu_seconds is not None:
                left = min(left, (self.spec.gpu_seconds - self.gpu_seconds) / seconds_per_eval)
            if self.spec.wall_seconds is not None:
                left = min(left, (self.spec.wall_seconds - self.wall_seconds) / seconds_per_eval)
        return max(0, int(left)) if left != float("inf") else 1 << 30

    def usage(self) -> TuneUsage:
        return TuneUsage(
            evaluations=self.evaluations,
            gpu_seconds=self.gpu_seconds,
            wall_seconds=self.wall_seconds,
            compile_seconds=self.compile_seconds,
            fraction=self.fraction_consumed(),
        )
