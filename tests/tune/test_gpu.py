"""The tuner end to end on a GPU: `agent tune` from the command line, the agent's `tune` tool through
the Toolbox, define mode."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agent.build.compile import compile_solution
from agent.paths import skills_dir
from agent.tasks import load_task
from agent.tune.apply import read_tune_header, read_tune_literal
from agent.workspace import Workspace
from sandbox.base import open_sandbox

pytestmark = pytest.mark.gpu
EXAMPLES = skills_dir() / "tuning" / "examples"


class Events(list):
    def write(self, event: object) -> object:
        self.append(event)
        return event


def example_workspace(name: str, root: Path) -> tuple:
    task = load_task(EXAMPLES / "axpb_task.py")
    ws = Workspace.create(root / name, task)
    shutil.copy(EXAMPLES / name / "model_new.py", ws.entry)
    for path in (EXAMPLES / name / "kernels").iterdir():
        shutil.copy(path, ws.root / "kernels" / path.name)
    return task, ws


@pytest.fixture(scope="module")
def runtime_ws(tmp_path_factory):
    task, ws = example_workspace("axpb_runtime", tmp_path_factory.mktemp("tune-gpu"))
    # Built before tuning, as the agent's loop does: a fresh machine's first build (toolchain,
    # precompiled headers: about 30 s) would otherwise spend the whole tuning budget.
    with open_sandbox("local", workspace=ws.root) as box:
        built = compile_solution(ws, box)
    assert built.ok, built.feedback()
    return task, ws


def test_agent_tune_command_then_the_referee_accepts_the_tuned_solution(runtime_ws, tmp_path):
    import typer

    from agent.cli.tune import tune_command
    from agent.referee import EvalOptions, evaluate

    task, ws = runtime_ws
    app = typer.Typer()
    app.command()(tune_command)
    db = tmp_path.parent / "tune" / "experience.sqlite"
    result = CliRunner().invoke(
        app,
        [str(task.path), str(ws.root), "--budget", "30s", "--seed", "1", "--db", str(db), "--no-experience"],
    )
    assert result.exit_code == 0, result.output
    assert "best " in result.output and "final paired re-timing" in result.output
    tuned = read_tune_literal(ws.entry)
    assert tuned is not None and set(tuned) == {"BLOCK", "VEC", "UNROLL"}
    verdict = evaluate(task, ws, EvalOptions(compile_mode=None, profile=False, trials=2))
    assert verdict.verdict == "correct", verdict.reason


def test_agent_tool_warm_starts_from_the_previous_run(runtime_ws, tmp_path, monkeypatch):
    import json

    from agent.budget import Budget, BudgetLimits
    from agent.messages import ToolCall
    from agent.tools import Toolbox, ToolContext, ToolSettings
    from agent.tools.candidates import CandidateBook, RefereeAdapter
    from agent.tools.tune import tune
    from agent.tune import experience

    task, ws = runtime_ws
    # The tool reads the default library: here, the one the previous test recorded into.
    monkeypatch.setattr(experience, "cache_dir", lambda: tmp_path.parent)
    with open_sandbox("local", workspace=ws.root) as box:
        ctx = ToolContext(
            task=task,
            workspace=ws,
            sandbox=box,
            referee=RefereeAdapter(),
            budget=Budget(BudgetLimits(turns=None, usd=None, wall=None, gpu=120.0)),
            candidates=CandidateBook(),
            events=Events(),
            settings=ToolSettings(),
        )
        call = ToolCall.from_raw(id="call_1", name="tune", raw_arguments=json.dumps({"budget_s": 20}))
        output = Toolbox([tune]).call(ctx, call)
    assert not output.is_error, output.content
    assert "warm start from run" in output.content and "best " in output.content
    assert output.data is not None and output.data["warm_start_runs"] and output.data["evaluations"] > 0
    assert 0 < ctx.budget.usage().gpu <= output.data["wall_s"]


def test_define_mode_end_to_end(tmp_path):
    from agent.tune.limits import BudgetSpec
    from agent.tune.render import render
    from agent.tune.runner import TuneOptions, run_tuning

    task, ws = example_workspace("axpb_define", tmp_path)
    options = TuneOptions(
        budget=BudgetSpec(wall_seconds=75, max_evals=6),
        use_experience=False,
        record_experience=False,
        slots=4,
    )
    with open_sandbox("local", workspace=ws.root) as box:
        result = run_tuning(task, ws, box, options)
    assert result.ok, render(result)
    assert result.outcome.usage.compile_seconds > 0
    assert read_tune_header(ws.root) == result.outcome.best_config
