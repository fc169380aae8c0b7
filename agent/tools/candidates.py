"""The referee as the agent sees it, and the book of judged candidates that keeps the best one.

`Referee` is the seam: the real one is `RefereeAdapter` over `agent.referee.evaluate`; tests inject
their own. KernelBrain's rule lives in `CandidateBook`: every correct verdict stores a snapshot of the
workspace it judged, and the best (correct first, then speedup vs the primary baseline) is kept
whatever the model does to the workspace afterwards.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Literal, Protocol

from agent.gpus import first_device
from agent.referee import EvalOptions, EvalResult
from agent.tasks import Task
from agent.transcripts.format import CandidateRef
from agent.workspace import Snapshot, Workspace
from sandbox.base import Sandbox

Baseline = Literal["eager", "compile"]
EvaluationSource = Literal["verify", "profile", "submit"]
SandboxOpener = Callable[[], Sandbox]
"""Opens a sandbox for one evaluation, of the caller's kind and options (the referee closes it)."""


class Referee(Protocol):
    def device(self) -> str | None:
        """The GPU verdicts are judged on, or None when there is none."""
        ...

    def evaluate(
        self, task: Task, workspace: Workspace, *, sandbox: Sandbox | SandboxOpener, profile: bool
    ) -> EvalResult:
        """Compile, verify and (with `profile`) time the workspace as it is now, in `sandbox` or in one
        the opener opens for this call (a referee that judges elsewhere, the batch's, never opens it)."""
        ...


@contextlib.contextmanager
def sandbox_for(sandbox: Sandbox | SandboxOpener) -> Iterator[Sandbox]:
    """The sandbox itself (left open), or one the opener opens for the block (closed after it)."""
    if isinstance(sandbox, Sandbox):
        yield sandbox
        return
    with sandbox() as box:
        yield box


@dataclass(frozen=True)
class RefereeAdapter:
    """The real referee (agent.referee.evaluate) with the run's options; whether it profiles is
    decided per call (verify does not, profile and submit do)."""

    options: EvalOptions = field(default_factory=EvalOptions)

    def device(self) -> str | None:
        return visible_gpu()

    def evaluate(
        self, task: Task, workspace: Workspace, *, sandbox: Sandbox | SandboxOpener, profile: bool
    ) -> EvalResult:
        from agent.referee import evaluate

        with sandbox_for(sandbox) as box:
            return evaluate(
                task, workspace, self.options.model_copy(update={"profile": profile}), sandbox=box
            )


@functools.cache
def visible_gpu() -> str | None:
    """Name of the GPU torch sees first (CUDA_VISIBLE_DEVICES applies), or None."""
    props = first_device()
    return f"{props.name} (sm_{props.major}{props.minor})" if props else None


def gpu_seconds(result: EvalResult, wall_s: float) -> float:
    """GPU time of one evaluation: the referee's candidate and judge stages, else the call's wall time."""
    times = result.stage_times
    reported = times.candidate_s + times.judge_s
    return reported if times.total_s > 0 else wall_s


def speedup_of(result: EvalResult, baseline: Baseline) -> float | None:
    perf = result.performance
    if perf is None:
        return None
    measured = perf.speedup_vs_eager if baseline == "eager" else perf.speedup_vs_compile
    return measured.value if measured is not None else None


@dataclass(frozen=True)
class Candidate:
    """One judged state of the workspace."""

    turn: int
    source: EvaluationSource
    result: EvalResult
    snapshot: Snapshot
    speedup: float | None
    gpu_s: float

    @property
    def correct(self) -> bool:
        return self.result.verdict == "correct"

    @property
    def content_hash(self) -> str:
        return self.snapshot.content_hash

    def rank(self) -> tuple[bool, bool, float]:
        return (self.correct, self.speedup is not None, self.speedup or 0.0)

    def ref(self) -> CandidateRef:
        return CandidateRef(
            content_hash=self.content_hash,
            turn=self.turn,
            source=self.source,
            verdict=self.result.verdict,
            speedup=self.speedup,
        )

    def describe(self, baseline: Baseline) -> str:
        speed = f"{self.speedup:.2f}x vs {baseline}" if self.speedup is not None else "speed not measured"
        return f"{self.source} at turn {self.turn}, {speed}, content {self.content_hash[:10]}"


@dataclass
class CandidateBook:
    baseline: Baseline = "eager"
    history: list[Candidate] = field(default_factory=list)
    best: Candidate | None = None
    submitted: Candidate | None = None

    def record(
        self,
        *,
        turn: int,
        source: EvaluationSource,
        result: EvalResult,
        snapshot: Snapshot,
        gpu_s: float,
    ) -> tuple[Candidate, bool]:
        """Add a verdict; return it and whether it became the best. Among equal ranks the newer wins
        only when neither was timed (the model's latest correct version)."""
        candidate = Candidate(turn, source, result, snapshot, speedup_of(result, self.baseline), gpu_s)
        self.history.append(candidate)
        better = candidate.correct and (
            self.best is None
            or candidate.rank() > self.best.rank()
            or (candidate.rank() == self.best.rank() and candidate.speedup is None)
        )
        if better:
            self.best = candidate
        return candidate, better

    @property
    def latest(self) -> Candidate | None:
        return self.history[-1] if self.history else None

    def best_line(self) -> str:
        if self.best is None:
            return "no verified candidate yet"
        return f"best verified so far: {self.best.describe(self.baseline)}"
