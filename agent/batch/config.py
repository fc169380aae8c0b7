"""What a batch is made of: its resolved config, the work items and evaluation jobs."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, PrivateAttr, ValidationInfo, model_validator

from agent.budget import BudgetLimits
from agent.models.base import DEFAULT_REQUEST_TIMEOUT_S
from agent.referee.options import EvalOptions
from agent.tasks import Task

Mode = Literal["agent", "solutions"]


KEYED_BEFORE_EVAL_OPTIONS = frozenset(
    {
        "sandbox",
        "policy",
        "trials",
        "profile",
        "compile_mode",
        "arch",
        "device",
        "compile_timeout_s",
        "run_timeout_s",
        "judge_timeout_s",
    }
)
"""The judging options a batch key always names (those the batch had before agent.referee's
EvalOptions); the others name it only when they are not their defaults, so keys stay the same."""


class JudgingOptions(EvalOptions):
    """How the referee judges every candidate of a batch (the same for all, so results compare):
    the referee's options, plus the kind of sandbox every evaluation opens. Stored flat, as in the
    batch's config JSON before the referee's options were one model."""

    sandbox: str = "local"
    """Where compiles and candidates run: local, docker or auto (resolved once per batch)."""
    extra: dict[str, Any] = Field(
        default_factory=dict,
        description="passed to injected compile/judge functions (fakes in tests); not part of the batch key",
    )

    def referee(self, **update: Any) -> EvalOptions:
        """The referee's options alone (agent.referee.evaluate's), with `update` applied."""
        fields = {name: getattr(self, name) for name in EvalOptions.model_fields}
        return EvalOptions(**(fields | update))

    def key_fields(self) -> dict[str, Any]:
        """What of these options makes a batch "the same command" (BatchConfig.batch_key)."""
        dumped = self.model_dump(mode="json", exclude={"refresh_baselines", "gpu_gate", "extra"})
        defaults = JudgingOptions().model_dump(mode="json")
        return {
            name: value
            for name, value in dumped.items()
            if name in KEYED_BEFORE_EVAL_OPTIONS or value != defaults[name]
        }


class BatchConfig(BaseModel):
    """Everything a batch was asked to do, resolved; stored with each run."""

    tasks: list[Path]
    mode: Mode
    model: str | None = None
    solutions: Path | None = None
    samples: int = Field(default=1, ge=1, description="agent runs per task (agent mode)")
    out: Path
    store: Path
    gpus: list[str] = Field(default_factory=list, description="GPU ids as the harness sees them")
    concurrency: int = Field(default=8, ge=1)
    compile_workers: int = Field(default_factory=lambda: os.cpu_count() or 1, ge=1)
    executor: Literal["local", "ray"] = "local"
    address: str | None = None
    eval: JudgingOptions = Field(default_factory=JudgingOptions)
    redo: list[str] = Field(default_factory=list)
    retry_errors: bool = True
    instantiate_tasks: bool = True
    inspect_timeout_s: float = Field(
        default=120.0,
        gt=0,
        description="seconds a task file may run once to learn its inputs; not in the key",
    )
    max_outage_retries: int = Field(default=3, ge=0)
    eval_timeout_s: float = Field(default=3600.0, description="bound on one evaluation, whatever happens")
    solve_options: dict[str, Any] = Field(
        default_factory=dict,
        description="SolveConfig fields for agent runs, `budget` as its `--budget` spec (the key names the "
        "spec as given; `budget` is it parsed)",
    )
    request_timeout_s: float = Field(
        default=DEFAULT_REQUEST_TIMEOUT_S,
        gt=0,
        description="seconds one model request may wait; not in the key",
    )
    evals_per_gpu: int = Field(
        default=4,
        ge=1,
        description="evaluations judged at once on each GPU; their timings stay exclusive through the "
        "referee's GPU gates (a sandbox kind whose processes cannot take them gets 1)",
    )
    gpu_lock_dir: Path | None = Field(
        default=None,
        description="folder of the GPU gate files (default: the referee's, sandbox.paths.gpu_gate_dir); "
        "the local sandbox shows only the default one to the processes it runs",
    )

    _budget: BudgetLimits = PrivateAttr(default_factory=BudgetLimits)

    @model_validator(mode="after")
    def _parse_budget(self, info: ValidationInfo) -> BatchConfig:
        """The `--budget` spec parsed once: here, or by the caller that hands the parsed limits in
        (`model_validate(..., context={"budget": limits})`, as `agent batch` does)."""
        given = (info.context or {}).get("budget")
        self._budget = (
            given if given is not None else BudgetLimits().with_spec(self.solve_options.get("budget"))
        )
        return self

    @property
    def budget(self) -> BudgetLimits:
        """Each agent run's limits: agent solve's defaults with the `--budget` spec applied."""
        return self._budget

    def batch_key(self) -> str:
        """What makes two invocations "the same command": the work they define, not how it is run."""
        work = {
            "mode": self.mode,
            "model": self.model,
            "solutions": str(self.solutions.resolve()) if self.solutions else None,
            "samples": self.samples,
            "eval": self.eval.key_fields(),
            "solve_options": self.solve_options,
        }
        return hashlib.sha256(json.dumps(work, sort_keys=True, default=str).encode()).hexdigest()[:16]


class WorkItem(BaseModel):
    """One candidate to produce or judge: a task and a name (sample_0, base, a variant)."""

    task: Task
    candidate: str
    source: Path | None = Field(default=None, description="the user's solution (solutions mode)")

    @property
    def item_key(self) -> str:
        return f"{self.task.key}#{self.candidate}"

    @property
    def label(self) -> str:
        level = f"L{self.task.level} " if self.task.level is not None else ""
        return f"{level}{self.task.name}" + (
            "" if self.candidate in ("base", "sample_0") else f" [{self.candidate}]"
        )


class EvalJob(BaseModel):
    """One evaluation: compile (CPU) then judge (GPU). `solution` is a private copy, never the user's."""

    task: Task
    solution: Path
    options: JudgingOptions
