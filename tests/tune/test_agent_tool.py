"""The agent's `tune` tool through the Toolbox, on the paths that end before any GPU work."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent.budget import Budget, BudgetExhausted, BudgetLimits
from agent.messages import ToolCall
from agent.paths import skills_dir
from agent.referee import EvalOptions
from agent.tasks import load_task
from agent.tools import Toolbox, ToolContext, ToolSettings
from agent.tools.candidates import CandidateBook, RefereeAdapter
from agent.tools.tune import tune
from agent.workspace import Workspace
from sandbox.base import open_sandbox

TASK = skills_dir() / "tuning" / "examples" / "axpb_task.py"


class Events(list):
    def write(self, event: Any) -> Any:
        self.append(event)
        return event


@pytest.fixture(scope="module")
def task():
    return load_task(TASK)


def context(tmp_path: Path, task, *, gpu: float | None = None) -> ToolContext:
    ws = Workspace.create(tmp_path / "ws", task)
    return ToolContext(
        task=task,
        workspace=ws,
        sandbox=open_sandbox("local", workspace=ws.root),
        referee=RefereeAdapter(),
        budget=Budget(BudgetLimits(turns=None, usd=None, wall=None, gpu=gpu)),
        candidates=CandidateBook(),
        events=Events(),
        settings=ToolSettings(referee=EvalOptions(arch="9.0")),
    )


def call(**arguments: Any) -> ToolCall:
    return ToolCall.from_raw(id="call_1", name="tune", raw_arguments=json.dumps(arguments))


def test_schema_offers_a_budget_slice_an_evaluation_cap_and_experience():
    params = tune.spec.parameters
    assert set(params["properties"]) == {"budget_s", "max_evals", "use_experience"}
    assert "required" not in params
    assert "kernels/tune.json" in tune.spec.description


@pytest.mark.slow
def test_without_a_declared_space_the_model_is_told_what_to_write(tmp_path, task):
    ctx = context(tmp_path, task)
    output = Toolbox([tune]).call(ctx, call(budget_s=30))
    assert output.is_error
    assert "no kernels/tune.json in the workspace" in output.content
    assert output.data is not None and output.data["ok"] is False and output.data["evaluations"] == 0
    assert ctx.budget.usage().gpu == 0.0


def test_the_budget_slice_is_clamped_to_what_the_run_has_left(tmp_path, task):
    ctx = context(tmp_path, task, gpu=100.0)
    ctx.budget.charge_gpu(75.0)
    toolbox = Toolbox([tune])
    assert toolbox.call(ctx, call(budget_s=600)).data["budget_s"] == 25.0
    assert toolbox.call(ctx, call(budget_s=2)).data["budget_s"] == 10.0
    assert toolbox.call(ctx, call()).data["budget_s"] == 25.0
    bad = toolbox.call(ctx, call(max_evals=0))
    assert bad.is_error and "max_evals must be at least 1" in bad.content
    ctx.budget.charge_gpu(30.0)
    with pytest.raises(BudgetExhausted):
        toolbox.call(ctx, call(budget_s=30))
