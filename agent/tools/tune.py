"""The `tune` tool: the harness searches the space the model declared in kernels/tune.json.

The model exposes the parameters (skills/tuning/SKILL.md) and asks for a slice of its budget;
the search, the checks of every point and the write-back are the harness's (agent/tune/). The
seconds the judge and the worker held the GPU are charged to the run's GPU budget.
"""

from __future__ import annotations

from typing import Any

from agent.tune.limits import BudgetSpec
from agent.tune.render import render
from agent.tune.results import TuneResult
from agent.tune.runner import TuneOptions, run_tuning

from .base import ToolError, ToolReply, tool
from .context import ToolContext

MIN_BUDGET_S = 10.0
MAX_BUDGET_S = 600.0


def tune_data(result: TuneResult) -> dict[str, Any]:
    """What the transcript keeps beside the table."""
    outcome = result.outcome
    return {
        "ok": result.ok,
        "mode": result.mode,
        "space_points": result.space_points,
        "budget_s": result.budget.wall_seconds if result.budget else None,
        "evaluations": outcome.usage.evaluations if outcome else 0,
        "wall_s": round(outcome.usage.wall_seconds, 3) if outcome else 0.0,
        "default": outcome.default_key if outcome else None,
        "default_ms": outcome.default_ms if outcome else None,
        "best": outcome.best_key if outcome else None,
        "best_ms": outcome.best_ms if outcome else None,
        "applied": result.applied,
        "warm_start_runs": [w.run_id for w in result.warm_start],
        "stop_reason": outcome.stop_reason if outcome else result.message,
    }


@tool
def tune(
    ctx: ToolContext, budget_s: float = 60.0, max_evals: int | None = None, use_experience: bool = True
) -> ToolReply:
    """Tune the parameters declared in kernels/tune.json: the harness compiles, measures the current
    values first, searches the valid points within the budget (every output checked against the
    reference), re-times the finalists paired against the current values and writes the winner back
    (runtime mode: the TUNE dict in model_new.py; define mode: kernels/tune_config.h). Returns a table
    of the best points and the failures. Declare the space first (read_skill tuning), on a kernel that
    is already correct; call verify afterwards to record the tuned solution.

    Args:
        budget_s: Wall-clock seconds for the whole search, compile and final re-timing included
            (10 to 600; at most what is left of the run's GPU budget).
        max_evals: Also stop after this many measured configurations.
        use_experience: Start from the best points of similar kernels tuned before.
    """
    if max_evals is not None and max_evals < 1:
        raise ToolError("tune: max_evals must be at least 1 (or left out)")
    ctx.budget.check_gpu()
    seconds = min(max(budget_s, MIN_BUDGET_S), MAX_BUDGET_S)
    gpu_limit = ctx.budget.limits.gpu
    if gpu_limit is not None:
        seconds = min(seconds, max(MIN_BUDGET_S, gpu_limit - ctx.budget.usage().gpu))
    options = TuneOptions(
        budget=BudgetSpec(wall_seconds=seconds, max_evals=max_evals),
        use_experience=use_experience,
        arch=ctx.settings.arch,
        compile_timeout=ctx.settings.compile_timeout_s,
        precision=ctx.settings.referee.precision,
        tolerance=ctx.settings.referee.tolerance
        if isinstance(ctx.settings.referee.tolerance, str)
        else "default",
    )
    result = run_tuning(ctx.task, ctx.workspace, ctx.sandbox, options, sandbox_kind=ctx.sandbox.kind)
    if result.outcome is not None:
        usage = result.outcome.usage
        ctx.budget.charge_gpu(usage.wall_seconds - usage.compile_seconds)
    text = render(result)
    if not result.ok:
        raise ToolError(text, data=tune_data(result))
    return ToolReply(text, data=tune_data(result))
