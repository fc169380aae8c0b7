"""A referee that compiles for real and answers with a verdict it is given, for tests and dry
runs of the RL environments without a GPU (the real one is agent.tools.candidates.RefereeAdapter).

    FakeVerdictReferee(verdict="correct", speedup_eager=1.8, speedup_compile=1.2, noise=0.02)

The build is the real one (`compile_solution`, incremental, in the session's sandbox), so a
workspace that does not compile gets the real compile error; only what a GPU would decide
(correctness, times) is made up. `flags` adds referee flags (e.g. "implausible_speedup").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from agent.build.compile import compile_solution
from agent.referee.results import (
    EvalResult,
    Flag,
    PerformanceReport,
    SolutionRef,
    Speedup,
    TaskRef,
    TimingStats,
)
from agent.tasks import Task
from agent.tools.candidates import SandboxOpener, sandbox_for
from agent.workspace import Workspace
from sandbox.base import Sandbox


@dataclass
class FakeVerdictReferee:
    verdict: str = "correct"
    speedup_eager: float | None = 1.5
    speedup_compile: float | None = 1.1
    noise: float = 0.02
    flags: list[str] = field(default_factory=list)
    arch: str = "sm_90"
    calls: int = 0

    def device(self) -> str | None:
        return "fake GPU (verdicts are scripted)"

    def evaluate(
        self, task: Task, workspace: Workspace, *, sandbox: Sandbox | SandboxOpener, profile: bool
    ) -> EvalResult:
        self.calls += 1
        with sandbox_for(sandbox) as box:
            compiled = compile_solution(workspace, box, arch=self.arch)
        verdict = self.verdict if compiled.ok else "compile_error"
        performance = None
        if compiled.ok and profile and verdict == "correct":
            performance = PerformanceReport(
                candidate=fake_stats(1.0),
                speedup_vs_eager=fake_speedup("eager", self.speedup_eager, self.noise),
                speedup_vs_compile=fake_speedup("compile", self.speedup_compile, self.noise),
                flags=[Flag(code=code, message=f"fake {code}") for code in self.flags],
            )
        return EvalResult(
            task=TaskRef.of(task),
            solution=SolutionRef(
                kind="workspace", content_hash=workspace.content_hash(), path=str(workspace.root)
            ),
            policy="strict",
            verdict=verdict,  # type: ignore[arg-type]
            reason=f"fake: {verdict}" if compiled.ok else compiled.feedback().splitlines()[0],
            compile=compiled,
            performance=performance,
        )


def fake_speedup(
    baseline: Literal["eager", "compile"], value: float | None, noise: float = 0.02
) -> Speedup | None:
    """A Speedup as the referee writes it: band value*(1 +- noise), faster only above it."""
    return None if value is None else Speedup.banded(baseline, value, noise)


def fake_stats(ms: float) -> TimingStats:
    return TimingStats(
        median_ms=ms, q1_ms=ms, q3_ms=ms, iqr_ms=0.0, mean_ms=ms, std_ms=0.0, cv=0.0, min_ms=ms,
        max_ms=ms, n=1, warmup=0, method="fake", l2_flush=False, host_median_ms=ms,
    )  # fmt: skip


def fake_referee(**options: object) -> FakeVerdictReferee:
    """The factory a RolloutConfig names by import path (`agent.rl.fakes:fake_referee`)."""
    return FakeVerdictReferee(**options)  # type: ignore[arg-type]
