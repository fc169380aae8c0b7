"""How a solve run stops: small typed exceptions the loop catches, each carrying the run's status."""

from __future__ import annotations


class RunStop(Exception):
    """Ends the loop; `status` goes into the transcript's run_end and the output folder."""

    status: str = "stopped"


class Submitted(RunStop):
    """The model's submission passed re-verification (or, in a dry run, compiled)."""

    def __init__(self, message: str, *, summary: str = "", verified: bool = True) -> None:
        super().__init__(message)
        self.summary = summary
        self.verified = verified

    @property
    def status(self) -> str:  # type: ignore[override]
        return "submitted" if self.verified else "submitted_unverified"


class ModelStopped(RunStop):
    """The model answered several turns in a row without calling a tool."""

    status = "model_stopped"


class RunAborted(RunStop):
    """Something the model cannot fix: no GPU, a referee failure, a broken configuration."""

    def __init__(self, status: str, message: str) -> None:
        super().__init__(message)
        self.status = status  # type: ignore[misc]
