"""The referee: trusted correctness and speed verdicts for candidate CUDA extensions."""

from agent.referee.baselines import BaselineCache, BaselineKey
from agent.referee.diff import diff_outputs, render_diff
from agent.referee.evaluate import evaluate, judge_compiled
from agent.referee.options import EvalOptions
from agent.referee.policy import POLICIES, TOLERANCES, TolerancePolicy, tolerance_policy
from agent.referee.results import (
    CorrectnessReport,
    EvalResult,
    FailureReport,
    OutputDiff,
    PerformanceReport,
    PolicyReport,
    Speedup,
    TimingStats,
    Verdict,
)

__all__ = [
    "POLICIES",
    "TOLERANCES",
    "BaselineCache",
    "BaselineKey",
    "CorrectnessReport",
    "EvalOptions",
    "EvalResult",
    "FailureReport",
    "OutputDiff",
    "PerformanceReport",
    "PolicyReport",
    "Speedup",
    "TimingStats",
    "TolerancePolicy",
    "Verdict",
    "diff_outputs",
    "evaluate",
    "judge_compiled",
    "render_diff",
    "tolerance_policy",
]
