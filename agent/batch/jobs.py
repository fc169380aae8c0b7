"""The two halves of one evaluation, as plain functions that any executor can run anywhere:
`compile_job` (CPU) and `judge_job` (GPU; verify and profile an already compiled solution).

They are module-level so that process pools and Ray can ship them by reference; tests swap in the
fakes of agent.batch.fakes with the same signatures.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agent.batch.config import EvalJob
from agent.build.compile import CompileResult
from agent.referee.results import EvalResult

CompileFn = Callable[[EvalJob], CompileResult]
JudgeFn = Callable[[EvalJob, CompileResult, "str | None", "str | None"], EvalResult]
"""(job, compiled, gpu, gpu_gate): see judge_job."""


def compile_job(job: EvalJob) -> CompileResult:
    """Build the job's solution with no GPU visible to the build: building a single-file solution
    imports it, and its code must not run on a GPU where another candidate is being timed."""
    from agent.build.compile import compile_solution
    from agent.workspace import open_solution
    from sandbox.base import open_sandbox

    solution = open_solution(job.solution)
    with open_sandbox(job.options.sandbox, workspace=solution.root, gpus=None) as box:
        return compile_solution(solution, box, arch=job.options.arch, timeout=job.options.compile_timeout_s)


def judge_job(job: EvalJob, compiled: CompileResult, gpu: str | None, gpu_gate: str | None) -> EvalResult:
    """Verify and profile on `gpu` (a physical GPU id; None: whatever this process sees).

    `gpu_gate` is what the referee's processes take around their GPU work (shared for correctness,
    exclusive for timing): "auto" (the gate of the GPU they use), a gate file, or None when the
    caller holds the GPU exclusively for the whole evaluation (or there is no GPU)."""
    from agent.referee.evaluate import judge_compiled
    from agent.workspace import open_solution
    from sandbox.base import open_sandbox

    solution = open_solution(job.solution)
    pinned: dict[str, Any] = {"gpus": gpu} if gpu else {}
    with open_sandbox(job.options.sandbox, workspace=solution.root, **pinned) as box:
        return judge_compiled(
            job.task, solution, compiled, job.options.referee(gpu_gate=gpu_gate), sandbox=box
        )
