"""The tuner end to end on a GPU: `agent tune` from the command line, the agent's tool, define mode."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agent.paths import skills_dir
from agent.tasks import load_task
from agent.tune.apply import read_tune_header, read_tune_literal
from agent.workspace import Workspace
from sandbox.base import open_sandbox

pytestmark = pytest.mark.gpu
EXAMPLES = skills_dir() / "tuning" / "examples"


def example_workspace(name: str, root: Path) -> tuple:
    task = load_task(EXAMPLES / "axpb_task.py")
    ws = Workspace.create(root / name, task)
    shutil.copy(EXAMPLES / name / "model_new.py", ws.entry)
    for path in (EXAMPLES / name / "kernels").iterdir():
        shutil.copy(path, ws.root / "kernels" / path.name)
    return task, ws


@pytest.fixture(scope="module")
def runtime_ws(tmp_path_factory):
    return example_workspace("axpb_runtime", tmp_path_factory.mktemp("tune-gpu"))


def test_agent_tune_command_then_the_referee_accepts_the_tuned_solution(runtime_ws, tmp_path):
    import typer

    from agent.cli_tune import tune_command
    from agent.referee import evaluate

    task, ws = runtime_ws
    app = typer.Typer()
    app.command()(tune_command)
    db = tmp_path.parent / "experience.sqlite"
    result = CliRunner().invoke(
        app,
        [str(task.path), str(ws.root), "--budget", "30s", "--seed", "1", "--db", str(db), "--no-experience"],
    )
    assert result.exit_code == 0, result.output
    assert "best " in result.output and "final paired re-timing" in result.output
    tuned = read_tune_literal(ws.entry)
    assert tuned is not None and set(tuned) == {"BLOCK", "VEC", "UNROLL"}
    verdict = evaluate(task, ws, compile_mode=None, profile=False, trials=2)
    assert verdict.verdict == "correct", verdict.reason


def test_tool_warm_starts_from_the_previous_run(runtime_ws, tmp_path):
    from agent.tune.tool import tune_tool

    task, ws = runtime_ws
    db = tmp_path.parent / "experience.sqlite"
    with open_sandbox("local", workspace=ws.root) as box:
        text = tune_tool(ws, task, box, 20, experience_path=db)
    assert "warm start from run" in text, text
    assert "best " in text


def test_define_mode_end_to_end(tmp_path):
    from agent.tune.budget import BudgetSpec
    from agent.tune.runner import TuneOptions, run_tuning
    from agent.tune.tool import render

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
