"""A fake referee for tests without a GPU: real EvalResult objects, decided by the workspace's content.

Verdicts: a model file containing `FAKE-VERDICT: <verdict>` gets that verdict, anything else is
correct (no_gpu when the fake has no GPU). Speedups: `FAKE-SPEEDUP: <x>` in a model file, else `default_speedup`. With
`compile_for_real` the workspace is really compiled first (a compile error is the verdict).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from agent.build.compile import CompileResult, compile_solution
from agent.referee import EvalResult, PerformanceReport, Speedup, TimingStats
from agent.referee.results import FailureReport, SolutionRef, StageTimes, TaskRef
from agent.tasks import Task
from agent.tools.candidates import sandbox_for
from agent.workspace import Workspace
from sandbox.base import Sandbox

_VERDICT = re.compile(r"FAKE-VERDICT: (\w+)")
_SPEEDUP = re.compile(r"FAKE-SPEEDUP: ([0-9.]+)")


def timing(median_ms: float) -> TimingStats:
    return TimingStats(
        median_ms=median_ms,
        q1_ms=median_ms * 0.99,
        q3_ms=median_ms * 1.01,
        iqr_ms=median_ms * 0.02,
        mean_ms=median_ms,
        std_ms=median_ms * 0.01,
        cv=0.01,
        min_ms=median_ms * 0.98,
        max_ms=median_ms * 1.05,
        n=100,
        warmup=10,
        method="cuda_events",
        l2_flush=True,
        host_median_ms=median_ms,
    )


def speedup(baseline: str, value: float) -> Speedup:
    return Speedup(
        baseline=baseline,  # type: ignore[arg-type]
        value=value,
        noise=0.02,
        low=value * 0.98,
        high=value * 1.02,
        within_noise=abs(value - 1) < 0.02,
        outcome="faster" if value > 1.02 else ("slower" if value < 0.98 else "within_noise"),
    )


def performance(value: float) -> PerformanceReport:
    return PerformanceReport(
        candidate=timing(1.0 / value),
        eager=timing(1.0),
        compile=timing(0.9),
        compile_mode="default",
        speedup_vs_eager=speedup("eager", value),
        speedup_vs_compile=speedup("compile", value * 0.9),
    )


def fake_compile_result(ws: Workspace, ok: bool = True) -> CompileResult:
    return CompileResult(
        ok=ok,
        status="built" if ok else "compile_error",
        solution_kind="workspace",
        content_hash=ws.content_hash(),
        arch="9.0",
        arch_source="test",
        build_dir="/nonexistent",
        duration_s=0.01,
    )


@dataclass
class FakeReferee:
    gpu: str | None = "FakeGPU (sm_90)"
    gpu_s: float = 1.0
    default_speedup: float = 1.0
    compile_for_real: bool = False
    cache_dir: Path | None = None
    calls: list[tuple[str, bool]] = field(default_factory=list)

    def device(self) -> str | None:
        return self.gpu

    def evaluate(self, task: Task, workspace: Workspace, *, sandbox: Sandbox, profile: bool) -> EvalResult:
        self.calls.append((workspace.content_hash(), profile))
        text = "\n".join(workspace.model_files().values())
        if self.compile_for_real:
            with sandbox_for(sandbox) as box:
                compiled = compile_solution(workspace, box, arch="sm_90")
        else:
            compiled = fake_compile_result(workspace)
        verdict_match = _VERDICT.search(text)
        verdict = verdict_match[1] if verdict_match else "correct"
        if self.gpu is None:
            verdict = "no_gpu"
        if not compiled.ok:
            verdict = "compile_error"
        result = EvalResult(
            task=TaskRef(name=task.name, key=task.key, sha256=task.sha256, path=str(task.path)),
            solution=SolutionRef(
                kind="workspace", content_hash=compiled.content_hash, path=str(workspace.entry)
            ),
            policy="strict",
            verdict=verdict,  # type: ignore[arg-type]
            reason=self._reason(verdict, compiled),
            compile=compiled,
            stage_times=StageTimes(
                compile_s=0.1, candidate_s=self.gpu_s / 2, judge_s=self.gpu_s / 2, total_s=1.0
            ),
        )
        if verdict in ("runtime_error", "incorrect"):
            result.failure = FailureReport(stage="trial 0", kind="exception", message=result.reason)
        if verdict == "correct" and profile:
            speed = _SPEEDUP.search(text)
            result.performance = performance(float(speed[1]) if speed else self.default_speedup)
        return result

    def _reason(self, verdict: str, compiled: CompileResult) -> str:
        if verdict == "compile_error":
            return compiled.feedback().splitlines()[0]
        if verdict == "correct":
            return "correct on 5/5 trials"
        if verdict == "no_gpu":
            return "compiled; verify and profile need a CUDA GPU and none is visible here"
        return f"fake {verdict}: output 0 differs at [0, 0] (expected 1.0, got 2.0)"
