"""Executors run evaluations for the batch runner: `local` (threads, a compile pool and one pinned
worker process per GPU) or `ray` (GPU evaluations placed on a Ray cluster's GPUs).

Both answer `evaluate(job) -> EvalResult`; the runner's driver process is the only writer of the
store, whichever executor ran the work.
"""

from __future__ import annotations

from typing import Protocol

from agent.batch.config import EvalJob
from agent.referee.results import EvalResult


class EvaluationError(RuntimeError):
    """The evaluation machinery failed (a worker died, a bound was exceeded): not the candidate's verdict."""


class Evaluator(Protocol):
    def evaluate(self, job: EvalJob, *, holder: str = "") -> EvalResult: ...

    def activity(self) -> dict[str, int]:
        """How many evaluations are compiling, waiting for a GPU and judging (for the display)."""
        ...

    def close(self) -> None: ...


__all__ = ["EvaluationError", "Evaluator"]
