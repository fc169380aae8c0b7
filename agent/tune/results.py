"""What a tuning run measures and returns."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from agent.tune.limits import BudgetSpec, TuneUsage

Status = Literal["ok", "incorrect", "failed", "crashed", "timeout"]


class Measurement(BaseModel):
    """One configuration measured once: verified output, median time over its repetitions."""

    key: str = Field(description="Kernel Tuner cache key: values joined by commas in parameter order")
    config: dict[str, int]
    status: Status
    time_ms: float | None = Field(default=None, description="median of the timed repetitions")
    iqr_ms: float | None = None
    reps: int = 0
    gpu_s: float = Field(default=0.0, description="seconds the worker spent on this point (GPU busy)")
    error: str = ""
    phase: str = ""
    order: int = -1

    @property
    def ok(self) -> bool:
        return self.status == "ok" and self.time_ms is not None


class Finalist(BaseModel):
    key: str
    config: dict[str, int]
    measured_ms: float = Field(description="time from the search (single measurement)")
    paired_ms: float | None = Field(default=None, description="median over the paired rounds")
    ratio_to_default: float | None = Field(
        default=None, description="median over rounds of time / default's time"
    )
    spread: float | None = Field(default=None, description="(q3 - q1) / median of the per-round ratios")
    is_default: bool = False


class SearchOutcome(BaseModel):
    best_key: str | None = Field(description="None when no point was measured correct")
    best_config: dict[str, int] | None
    best_ms: float | None
    default_key: str
    default_ms: float | None
    history: list[Measurement]
    finalists: list[Finalist] = Field(default_factory=list)
    stop_reason: str
    usage: TuneUsage
    phases: dict[str, int] = Field(default_factory=dict, description="evaluations per phase")

    @property
    def speedup(self) -> float | None:
        if self.default_ms and self.best_ms:
            return self.default_ms / self.best_ms
        return None


class WarmStart(BaseModel):
    run_id: int
    similarity: float
    task_name: str
    reason: str
    points: list[str]


class TuneResult(BaseModel):
    """A whole `agent tune` run: the space, the search, what was applied and stored."""

    ok: bool
    message: str
    task: str
    solution: str
    mode: Literal["runtime", "define"] | None = None
    space_signature: str | None = None
    space_points: int | None = None
    space_total: int | None = None
    space_rejected: str = ""
    params: list[str] = Field(default_factory=list)
    budget: BudgetSpec | None = None
    device: str = ""
    compile_s: float = 0.0
    outcome: SearchOutcome | None = None
    warm_start: list[WarmStart] = Field(default_factory=list)
    applied: str = Field(default="", description="where the winning values were written")
    experience_run_id: int | None = None
    features: dict = Field(default_factory=dict)
