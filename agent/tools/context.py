"""What every tool of one run can reach: the task, the workspace, the sandbox, the referee, the budget,
the candidate book and the transcript."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Protocol

from agent.budget import Budget
from agent.referee.options import EvalOptions
from agent.referee.roofline import WorkEstimate
from agent.stops import RunAborted
from agent.tasks import Task
from agent.tools.candidates import Candidate, CandidateBook, EvaluationSource, Referee, gpu_seconds
from agent.transcripts.format import EvaluationEvent
from agent.workspace import Workspace
from sandbox.base import Sandbox

from .base import ToolError
from .region_desk import RegionDesk


class EventSink(Protocol):
    def write(self, event: EvaluationEvent) -> object: ...


@dataclass(frozen=True)
class ToolSettings:
    referee: EvalOptions = field(default_factory=EvalOptions)
    """The run's referee options; the compile tool builds with their arch and compile timeout."""
    shell_timeout_s: float = 300.0
    allow_no_gpu: bool = False
    """A compile-only dry run: the referee's no_gpu verdict is reported to the model, not fatal."""
    work: WorkEstimate | None = None
    """The reference's FLOPs and bytes (the task brief's): profile's speed-of-light lines use them."""

    @property
    def arch(self) -> str | None:
        """The architecture builds target (the referee's)."""
        return self.referee.arch

    @property
    def compile_timeout_s(self) -> float:
        """Seconds before a build is killed (the referee's)."""
        return self.referee.compile_timeout_s


@dataclass
class ToolContext:
    task: Task
    workspace: Workspace
    sandbox: Sandbox
    referee: Referee
    budget: Budget
    candidates: CandidateBook
    events: EventSink
    settings: ToolSettings
    turn: int = 0
    regions: RegionDesk | None = None
    """A whole model's regions as sub-workspaces (agent/tools/regions.py); None: one region."""

    @property
    def region(self) -> int | None:
        """The region sub-workspace the tools act on; None: the whole model."""
        return self.regions.current if self.regions is not None else None

    def workspace_path(self, path: str) -> tuple[str, Path]:
        """(relative posix path, host path) of a path the model gave; ToolError outside the workspace."""
        raw = path.strip()
        candidate = Path(raw)
        if candidate.is_absolute():
            try:
                raw = candidate.resolve().relative_to(self.workspace.root).as_posix()
            except ValueError:
                raise ToolError(f"{path}: outside the workspace; use paths like kernels/relu.cu") from None
        rel = PurePosixPath(raw or ".")
        if ".." in rel.parts:
            raise ToolError(f"{path}: '..' is not allowed; paths are relative to the workspace root")
        if rel.parts and rel.parts[0] == ".harness":
            raise ToolError(f"{path}: .harness/ is the harness's own state")
        host = (self.workspace.root / rel).resolve()
        if host != self.workspace.root and self.workspace.root not in host.parents:
            raise ToolError(f"{path}: resolves outside the workspace (a symlink?)")
        return rel.as_posix(), host

    def judge(self, source: EvaluationSource, *, profile: bool) -> tuple[Candidate, bool]:
        """Have the referee judge the workspace as it is now; record the verdict and the snapshot it
        judged. Returns the candidate and whether it became the best."""
        self.budget.check_gpu()
        snapshot = self.workspace.snapshot()
        started = time.monotonic()
        result = self.referee.evaluate(self.task, self.workspace, sandbox=self.sandbox, profile=profile)
        gpu_s = gpu_seconds(result, time.monotonic() - started)
        self.budget.charge_gpu(gpu_s)
        if result.verdict == "no_gpu" and not self.settings.allow_no_gpu:
            raise RunAborted("no_gpu", f"the referee has no GPU: {result.reason}")
        if result.verdict == "referee_error":
            raise RunAborted("referee_error", f"the referee failed (not your code's fault): {result.reason}")
        if result.solution.content_hash != snapshot.content_hash:
            raise RunAborted("error", "the workspace changed while the referee judged it")
        candidate, became_best = self.candidates.record(
            turn=self.turn, source=source, result=result, snapshot=snapshot, gpu_s=gpu_s
        )
        self.events.write(
            EvaluationEvent(
                turn=self.turn,
                source=source,
                content_hash=snapshot.content_hash,
                verdict=result.verdict,
                reason=result.reason,
                speedup=candidate.speedup,
                baseline=self.candidates.baseline,
                gpu_s=round(gpu_s, 3),
                became_best=became_best,
                result=result.model_dump(mode="json"),
                region=self.region,
            )
        )
        return candidate, became_best
