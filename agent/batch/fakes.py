"""Stand-ins for the compiler, the referee and the agent, for tests and dry runs of the batch
machinery without nvcc, a GPU or an API key.

What a fake evaluation returns is written in the solution itself, on a line of its entry file:

    # fake-eval: {"verdict": "correct", "speedup_eager": 1.7, "speedup_compile": 0.9, "judge_s": 0.2}

so it survives the copies the batch makes (private workspaces, Ray's shipped files). Other keys:
`compile` ("error"), `compile_s`, `timing_s`, `crash` ("raise" | "exit" | "hang").

The fake judge uses the GPU gate as the referee's processes do: `judge_s` of correctness work
holding it shared, then `timing_s` (default 0.02) of "timing" holding it exclusively. With `log`
in `JudgingOptions.extra`, every fake judge appends {gpu, gpu_arg, gate, pid, start, end,
timing_start, timing_end, solution} to that file; with `probe_gate` (a gate folder) it also
records whether that GPU's gate was held exclusively by someone else when it began and when it
ended (`gate_held`), as the batch does for sandboxes that cannot take the gate themselves.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agent.batch.agent_runs import BatchReferee
from agent.batch.config import EvalJob
from agent.budget import BudgetLimits, BudgetUsage
from agent.build.compile import CompileResult
from agent.messages import UserMessage
from agent.models.base import Model
from agent.referee.results import (
    EvalResult,
    PerformanceReport,
    SolutionRef,
    Speedup,
    StageTimes,
    TaskRef,
    TimingStats,
)
from agent.run.result import SolveResult
from agent.tasks import Task
from agent.workspace import MODEL_ENTRY, Workspace, content_hash
from sandbox.workers.gpu.gpu_gate import GpuGate, gate_path

_MARKER = re.compile(r"^#\s*fake-eval:\s*(\{.*\})\s*$", re.MULTILINE)


def fake_spec(solution: Path) -> dict[str, Any]:
    entry = solution / MODEL_ENTRY if solution.is_dir() else solution
    match = _MARKER.search(entry.read_text(encoding="utf-8")) if entry.is_file() else None
    return json.loads(match.group(1)) if match else {}


def fake_compile(job: EvalJob) -> CompileResult:
    spec = fake_spec(job.solution)
    time.sleep(float(spec.get("compile_s", 0.0)))
    ok = spec.get("compile") != "error"
    return CompileResult(
        ok=ok,
        status="built" if ok else "compile_error",
        solution_kind="workspace" if job.solution.is_dir() else "single_file",
        content_hash=_content(job.solution),
        arch=job.options.arch or "9.0",
        arch_source="fake",
        build_dir="/nonexistent/fake-build",
        duration_s=float(spec.get("compile_s", 0.0)),
        message="" if ok else "fake compile error",
    )


def fake_judge(job: EvalJob, compiled: CompileResult, gpu: str | None, gpu_gate: str | None) -> EvalResult:
    spec = fake_spec(job.solution)
    start = time.time()
    timing_start = timing_end = start
    if compiled.ok:
        crash = spec.get("crash")
        if crash == "raise":
            raise RuntimeError("fake judge crashed")
        if crash == "exit":
            os._exit(3)
        if crash == "hang":
            time.sleep(3600)
        with _open_gate(gpu_gate, gpu) as gate:
            if gate is not None:
                gate.hold("shared")
            time.sleep(float(spec.get("judge_s", 0.05)))
            if gate is not None:
                gate.hold("exclusive")
            timing_start = time.time()
            time.sleep(float(spec.get("timing_s", 0.02)))
            timing_end = time.time()
    end = time.time()
    log = job.options.extra.get("log")
    if log and compiled.ok:
        line = {
            "gpu": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "gpu_arg": gpu,
            "gate": gpu_gate,
            "pid": os.getpid(),
            "start": start,
            "end": end,
            "timing_start": timing_start,
            "timing_end": timing_end,
            "solution": str(job.solution),
        }
        with open(log, "a") as handle:
            handle.write(json.dumps(line) + "\n")
    return fake_result(job, compiled, spec, judge_s=end - start)


@contextlib.contextmanager
def _open_gate(gpu_gate: str | None, gpu: str | None) -> Iterator[GpuGate | None]:
    """The gate the referee would take: "auto" is this process's GPU 0 in the default folder."""
    if gpu_gate is None or gpu is None:
        yield None
        return
    if gpu_gate == "auto":
        from sandbox.paths import gpu_gate_dir

        gpu_gate = gate_path(gpu_gate_dir(), "0")
    with GpuGate(gpu_gate) as gate:
        yield gate


def fake_result(
    job: EvalJob, compiled: CompileResult, spec: dict[str, Any], *, judge_s: float = 0.0
) -> EvalResult:
    task = job.task
    verdict = spec.get("verdict", "correct") if compiled.ok else "compile_error"
    performance = None
    if compiled.ok and verdict in ("correct", "incorrect", "policy_violation"):
        performance = PerformanceReport(
            candidate=_stats(1.0),
            speedup_vs_eager=_speedup("eager", spec.get("speedup_eager")),
            speedup_vs_compile=_speedup("compile", spec.get("speedup_compile")),
        )
    return EvalResult(
        task=TaskRef.of(task),
        solution=SolutionRef(
            kind=compiled.solution_kind, content_hash=compiled.content_hash, path=str(job.solution)
        ),
        policy=job.options.policy,
        verdict=verdict,
        reason=f"fake: {verdict}",
        compile=compiled,
        performance=performance,
        stage_times=StageTimes(
            compile_s=compiled.duration_s,
            candidate_s=judge_s / 2,
            judge_s=judge_s / 2,
            total_s=compiled.duration_s + judge_s,
        ),
    )


def _speedup(baseline: str, value: float | None) -> Speedup | None:
    if value is None:
        return None
    return Speedup(
        baseline=baseline,  # type: ignore[arg-type]
        value=float(value),
        noise=0.01,
        low=value * 0.99,
        high=value * 1.01,
        within_noise=abs(value - 1) < 0.01,
        outcome="faster" if value > 1.01 else "slower" if value < 0.99 else "within_noise",
    )


def _stats(ms: float) -> TimingStats:
    return TimingStats(
        median_ms=ms, q1_ms=ms, q3_ms=ms, iqr_ms=0.0, mean_ms=ms, std_ms=0.0, cv=0.0, min_ms=ms,
        max_ms=ms, n=1, warmup=0, method="fake", l2_flush=False, host_median_ms=ms,
    )  # fmt: skip


def _content(solution: Path) -> str:
    """The solution's content hash as the real compile reports it (agents check it)."""
    if solution.is_dir():
        return Workspace(solution).content_hash()
    if not solution.is_file():
        return "none"
    return content_hash({solution.name: solution.read_text(encoding="utf-8", errors="replace")})


def scripted_solver(
    task: Task,
    *,
    model: Model,
    out_dir: Path,
    referee: BatchReferee,
    options: dict[str, Any],
) -> SolveResult:
    """A one-turn agent: asks the model once, writes its text as model_new.py in `out_dir/solution`,
    has it judged, and returns what `agent solve` would.

    Each query goes through the batch's breaker (the model it gets is wrapped); a ModelError
    propagates to the runner, as a real agent's unrecoverable model failure would.
    """
    response = model.query([UserMessage(text=f"Write ModelNew for {task.name}")], [])
    ws = Workspace.create(out_dir / "solution", task)
    ws.entry.write_text(response.message.text + "\n", encoding="utf-8")
    result = referee.evaluate(task, ws, profile=True)
    usage = response.usage
    verified = result.verdict == "correct"
    return SolveResult(
        status="submitted" if verified else "submitted_unverified",
        message=f"the one-turn agent's candidate: {result.verdict}",
        task=task.name,
        out=out_dir,
        baseline="eager",
        verified=verified,
        evaluation=result,
        usage=BudgetUsage(
            in_tokens=usage.prompt_tokens, out_tokens=usage.output_tokens, usd=response.cost_usd or 0.0
        ),
        limits=options.get("budget", BudgetLimits()),
    )
