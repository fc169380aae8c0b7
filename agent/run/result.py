"""What one solve run returns (and writes as run.json): its status, best and submitted candidates,
the referee's verdict of the solution, and what it spent."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field

from agent.budget import BudgetLimits, BudgetUsage
from agent.referee.results import EvalResult
from agent.stops import RunStatus
from agent.transcripts.format import CandidateRef


class SolveResult(BaseModel):
    status: RunStatus
    message: str
    task: str
    out: Path
    baseline: str
    best: CandidateRef | None = None
    submitted: CandidateRef | None = None
    submitted_is_best: bool | None = None
    verified: bool = Field(description="the returned solution passed the referee")
    evaluation: EvalResult | None = Field(
        default=None, description="the referee's verdict in result.json: the best's, else the last judged"
    )
    summary: str = Field(default="", description="the model's own summary at submit")
    usage: BudgetUsage
    limits: BudgetLimits
    files: list[str] = Field(default_factory=list, description="what the output folder holds")
    traceback: str | None = None
    unsandboxed: bool = Field(
        default=False, description="untrusted code ran with no sandbox isolation (--unsandboxed)"
    )
