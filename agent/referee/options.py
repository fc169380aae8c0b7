"""`EvalOptions`: how the referee judges a solution, as one frozen value.

`evaluate()` and `judge_compiled()` take it; the agent's referee (`agent.tools.candidates.RefereeAdapter`),
a solve run's config (`SolveConfig.referee`), the tools' settings and the batch's judging options
hold one. Runtime objects that are not options (the sandbox, the baseline cache) are passed
beside it. Change a field with `options.model_copy(update={...})`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from agent.referee.policy import (
    DEFAULT_PRECISION,
    PRECISION_TOLERANCES,
    PolicyName,
    PrecisionName,
    TolerancePolicy,
    check_policy_name,
    check_precision_name,
    tolerance_policy,
)
from sandbox.workers.gpu.timing import TimingConfig

GateOption = Path | str | None
"""The GPU gate: "auto" (the gate of the GPU the evaluation uses), a gate file, or None."""


class EvalOptions(BaseModel):
    """The referee's options for one evaluation (the defaults are `agent eval`'s)."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    policy: PolicyName = "strict"
    """What a candidate may call: strict (CUDA-Agent rules: no torch compute) or kernelbench
    (torch glue allowed and reported)."""

    precision: PrecisionName = DEFAULT_PRECISION
    """The arithmetic a candidate may use (docs/precision.md): fp32 (strict), tf32, fp16, bf16, or
    match (any of them, the speedup stated against the baselines at the precision measured). The
    baselines are timed under the same flags and the judge rejects a candidate whose error shows a
    lower precision than allowed."""

    tolerance: str | TolerancePolicy = "default"
    """How close outputs must be: "default" (the precision's limits, agent.referee.policy.
    PRECISION_TOLERANCES), another name from agent.referee.policy.TOLERANCES (tight) or a
    TolerancePolicy with a 'default' entry."""

    trials: int = 5
    """Correctness trials, each on fresh inputs from fresh secret seeds (at least 1)."""

    hidden_inputs: bool = True
    """Trials after the first draw a secret transform of the task's inputs (scaled, shifted,
    negated, zeros, ones: sandbox/workers/referee/hidden_inputs.py) among those the reference's domain
    allows; False: every trial uses the task's own input distribution."""

    profile: bool = True
    """Time the candidate against the baselines and profile its kernels after verifying it."""

    compile_mode: str | None = "default"
    """torch.compile mode of the compiled baseline; None, '' or 'none' skip that baseline."""

    arch: str | None = None
    """GPU architecture to build for (sm_90, 9.0, ...); None: the visible GPU's, else sm_90."""

    refresh_baselines: bool = False
    """Re-time eager and torch.compile instead of reading them from the baseline cache."""

    compile_timeout_s: float = 600.0
    """Seconds before the build is killed."""

    run_timeout_s: float = 300.0
    """Seconds before the candidate's process (trials, timing, profile) is killed."""

    judge_timeout_s: float = 900.0
    """Seconds before the trusted judge's process (expected outputs, baselines) is killed."""

    bandwidth_gbps: float | None = None
    """The GPU's copy bandwidth for the faster-than-memory flag; None: measured (and cached)."""

    device: Literal["cuda", "cpu"] = "cuda"
    """Where the candidate and the judge run; "cpu" exists for tests of the machinery only."""

    timing: TimingConfig | None = None
    """The timing loop's settings (warm-up, repetitions); None: TimingConfig's defaults."""

    gpu_gate: GateOption = "auto"
    """The GPU's gate file, which the referee's processes hold shared while they check and
    exclusively while they time, so evaluations may share a GPU: "auto" (the gate of the GPU this
    evaluation uses), a path, or None when the caller keeps the GPU to itself."""

    @field_validator("policy", mode="before")
    @classmethod
    def _known_policy(cls, value: object) -> object:
        return check_policy_name(value) if isinstance(value, str) else value

    @field_validator("precision", mode="before")
    @classmethod
    def _known_precision(cls, value: object) -> object:
        return check_precision_name(value) if isinstance(value, str) else value

    @field_validator("tolerance")
    @classmethod
    def _known_tolerance(cls, value: str | TolerancePolicy) -> str | TolerancePolicy:
        tolerance_policy(value)
        return value

    @field_validator("trials")
    @classmethod
    def _some_trials(cls, value: int) -> int:
        if value < 1:
            raise ValueError("trials must be at least 1")
        return value

    def tolerances(self) -> TolerancePolicy:
        """The tolerance policy `tolerance` names; "default" is the precision's."""
        if self.tolerance == "default":
            return PRECISION_TOLERANCES[self.precision]
        return tolerance_policy(self.tolerance)

    def baseline_compile_mode(self) -> str | None:
        """`compile_mode`, with every spelling of "no torch.compile baseline" as None."""
        return None if self.compile_mode in (None, "", "none") else self.compile_mode


def validation_message(error: ValueError) -> str:
    """One line for a rejected option: the validator's own message (e.g. "unknown policy 'x'; ..."),
    else pydantic's, prefixed with the field's name."""
    if not isinstance(error, ValidationError):
        return str(error)
    parts = []
    for item in error.errors():
        cause = (item.get("ctx") or {}).get("error")
        where = ".".join(str(part) for part in item.get("loc", ()))
        parts.append(str(cause) if isinstance(cause, Exception) else f"{where}: {item.get('msg', '')}")
    return "; ".join(parts) or str(error)
