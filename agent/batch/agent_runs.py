"""Agent mode: how the batch runs one agent on one task, and how that agent's evaluations go
through the batch's shared GPU slots and compile pool.

`TaskRunner` is the narrow seam: a callable that solves one task with a model, judging through
the `BatchReferee` it is given (which implements agent.tools.candidates.Referee), and returns its
`SolveResult` (agent/run/result.py), which `attempt_from_run` turns into the store's AttemptRecord.
`solve_runner` is agent/run/solve.py's solve(); tests pass scripted runners.

`--model templates` is the built-in template policy, built per task by `template_policy` exactly as
`agent solve --model templates` builds it (agent.templates.build_policy); a task its library does
not cover raises `NotAttempted`, which the runner records as a done attempt with the reason.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from agent.batch.config import EvalJob, JudgingOptions
from agent.batch.executors import Evaluator
from agent.batch.records import AttemptRecord
from agent.models.base import Model
from agent.referee.results import EvalResult
from agent.run.result import SolveResult
from agent.tasks import Task
from agent.tools.candidates import SandboxOpener
from agent.workspace import SingleFileSolution, Workspace
from sandbox.base import Sandbox

if TYPE_CHECKING:
    from agent.run.region_records import RegionRun


class BatchReferee:
    """agent.tools.candidates.Referee over the batch's executor: every verify/profile of every agent takes a
    compile slot, then a GPU slot, like the batch's own evaluations."""

    def __init__(
        self,
        evaluator: Evaluator,
        options: JudgingOptions,
        *,
        holder: str = "",
        gpu_name: str | None = None,
    ) -> None:
        self.evaluator = evaluator
        self.options = options
        self.holder = holder
        self.gpu_name = gpu_name
        self.evaluations: list[EvalResult] = []
        self.gpu_s = 0.0
        self._lock = threading.Lock()

    def device(self) -> str | None:
        return self.gpu_name

    def evaluate(
        self,
        task: Task,
        workspace: Workspace,
        *,
        sandbox: Sandbox | SandboxOpener | None = None,
        profile: bool = True,
    ) -> EvalResult:
        """`sandbox` is the agent's own, never used (nor opened): the batch compiles and judges in sandboxes
        of its configured kind (the build folder is keyed by the workspace, so the agent's incremental
        builds are reused)."""
        # A composed whole model (agent/run/by_region.py) is a single file: the job names the file.
        solution = workspace.source if isinstance(workspace, SingleFileSolution) else workspace.root
        job = EvalJob(
            task=task, solution=solution, options=self.options.model_copy(update={"profile": profile})
        )
        started = time.monotonic()
        result = self.evaluator.evaluate(job, holder=self.holder)
        times = result.stage_times
        with self._lock:
            self.evaluations.append(result)
            self.gpu_s += (
                times.candidate_s + times.judge_s if times.total_s > 0 else time.monotonic() - started
            )
        return result


class NotAttempted(Exception):
    """The model has nothing to try on this task (the template library does not cover it): the attempt
    is recorded as done, with no result and this message as its note, and no agent runs."""


def template_policy(task: Task) -> Model:
    """The built-in policy for one task (`--model templates`), as `agent solve --model templates`
    builds it (region by region for a model it covers only so); raises NotAttempted with the
    library's reason for a task it does not cover."""
    from agent.run.by_region import templates_model
    from agent.templates import NotCovered

    policy = templates_model(task.path)
    if isinstance(policy, NotCovered):
        raise NotAttempted(f"not covered by the template library: {policy.reason}")
    return policy


class TaskRunner(Protocol):
    def __call__(
        self,
        task: Task,
        *,
        model: Model,
        out_dir: Path,
        referee: BatchReferee,
        options: dict[str, Any],
    ) -> SolveResult: ...


SOLVE_ERRORS = frozenset({"error", "sandbox_error", "model_error", "interrupted", "referee_error", "no_gpu"})
"""Run statuses that are the harness's or a provider's failure, not a result: redone on the next run.
A run the referee cut short is one of them even when it had verified a candidate before: that
candidate may never have been timed, and the run never had its remaining turns."""

INFRA_VERDICTS = frozenset({"no_gpu", "referee_error"})
"""Verdicts about the machinery, not the candidate: recorded as errors and redone on the next run."""


def solve_runner(
    task: Task,
    *,
    model: Model,
    out_dir: Path,
    referee: BatchReferee,
    options: dict[str, Any],
) -> SolveResult:
    """One `agent solve` run (agent.run.solve.solve) with the batch's referee. `options` are SolveConfig
    fields (`budget` the batch's parsed BudgetLimits)."""
    from agent.run.solve import SolveConfig, solve

    judged = referee.options
    config = SolveConfig(
        task=task.path, out=out_dir, sandbox=judged.sandbox, referee=judged.referee(), **options
    )
    return solve(config, model=model, referee=referee, task=task)


def provider_outage(run: SolveResult, model: Model) -> bool:
    """Whether the run ended on a provider outage (its loop turned the ModelError into a status; the
    batch's model kept whether it was transient): retried, not recorded."""
    return run.status == "model_error" and getattr(model, "outage", None) is not None


def attempt_from_run(run: SolveResult, referee: BatchReferee) -> AttemptRecord:
    """The store's record of one agent run: its final verdict (stored once, as `result`), the referee's
    other evaluations of it, and what it spent."""
    failed = run.status in SOLVE_ERRORS
    final = run.evaluation if run.verified or not failed else None
    intermediate = list(referee.evaluations)
    matches = [i for i, r in enumerate(intermediate) if r == final]
    if matches:
        del intermediate[matches[-1]]
    regions = region_run(run.out)
    solution = run.out / ("model_new.py" if regions is not None else "solution")  # regions: one composed file
    transcript = run.out / "transcript.jsonl"
    return AttemptRecord(
        status="error" if failed or (final is not None and final.verdict in INFRA_VERDICTS) else "done",
        result=final,
        evaluations=intermediate,
        tokens=run.usage.in_tokens + run.usage.out_tokens,
        usd=run.usage.usd,
        gpu_s=run.usage.gpu or referee.gpu_s,
        solution_path=str(solution) if solution.exists() else None,
        transcript_path=str(transcript) if transcript.exists() else None,
        error=f"{run.status}: {run.message}" if failed or not run.verified else None,
        regions=regions,
    )


def region_run(out_dir: Path) -> RegionRun | None:
    """The regions.json a region-by-region run wrote, if it was one."""
    from agent.run.region_records import RegionRun

    path = out_dir / "regions.json"
    return RegionRun.model_validate_json(path.read_text(encoding="utf-8")) if path.is_file() else None
