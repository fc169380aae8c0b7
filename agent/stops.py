"""How a solve run stops: small typed exceptions the loop catches, each carrying the run's status."""

from __future__ import annotations

from typing import Literal, get_args

RunStatus = Literal[
    "submitted",
    "submitted_unverified",
    "budget_exhausted:turns",
    "budget_exhausted:in_tokens",
    "budget_exhausted:out_tokens",
    "budget_exhausted:usd",
    "budget_exhausted:wall",
    "budget_exhausted:gpu",
    "model_stopped",
    "model_error",
    "sandbox_error",
    "no_gpu",
    "referee_error",
    "config_error",
    "interrupted",
    "error",
    "replay_diverged",
]
"""How a solve run ended: the status in run_end, run.json and the batch store."""
RUN_STATUSES: tuple[RunStatus, ...] = get_args(RunStatus)
AbortStatus = Literal["no_gpu", "referee_error", "config_error", "error"]


class RunStop(Exception):
    """Ends the loop; `status` goes into the transcript's run_end and the output folder."""

    status: RunStatus = "error"


class Submitted(RunStop):
    """The model's submission passed re-verification (or, in a dry run, compiled)."""

    def __init__(self, message: str, *, summary: str = "", verified: bool = True) -> None:
        super().__init__(message)
        self.summary = summary
        self.verified = verified

    @property
    def status(self) -> RunStatus:  # type: ignore[override]
        return "submitted" if self.verified else "submitted_unverified"


class ModelStopped(RunStop):
    """The model answered several turns in a row without calling a tool."""

    status = "model_stopped"


class RunAborted(RunStop):
    """Something the model cannot fix: no GPU, a referee failure, a broken configuration."""

    def __init__(self, status: AbortStatus, message: str) -> None:
        super().__init__(message)
        self.status = status  # type: ignore[misc]
