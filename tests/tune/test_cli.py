from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

import agent.cli.tune
from agent.cli.common import gpu_visible
from agent.cli.tune import tune_command
from agent.tasks import load_task
from agent.workspace import Workspace

TASK = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x + 1


def get_inputs():
    return [torch.randn(4, 4)]


def get_init_inputs():
    return []
"""


def invoke(*args: str):
    app = typer.Typer()
    app.command()(tune_command)
    return CliRunner().invoke(app, list(args))


@pytest.mark.slow
def test_cli_reports_problems_before_any_process_starts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    (tmp_path / "task.py").write_text(TASK)
    ws = Workspace.create(tmp_path / "ws", load_task(tmp_path / "task.py"))
    ws.entry.write_text("TUNE = {'A': 1}\n")
    task, root = str(tmp_path / "task.py"), str(ws.root)

    result = invoke(task, root, "--budget", "soon")
    assert result.exit_code == 2 and "cannot read 'soon' as a duration" in result.output

    result = invoke(task, root, "--strategy", "annealing")
    assert result.exit_code == 2 and "unknown strategy" in result.output

    result = invoke(task, root, "--budget", "30s")
    assert (result.exit_code == 2 and "no CUDA GPU is visible" in result.output) or gpu_visible()

    # What the space check says, as on a GPU machine (it runs before any GPU work).
    monkeypatch.setattr(agent.cli.tune, "gpu_visible", lambda: True)
    result = invoke(task, root, "--budget", "30s")
    assert result.exit_code == 1 and "tuning did not run: no kernels/tune.json" in result.output

    (ws.root / "kernels" / "tune.json").write_text('{"params": {"A": [1, 2]}, "constraints": ["A.real"]}')
    result = invoke(task, root, "--json")
    assert result.exit_code == 1 and '"ok": false' in result.output and "Attribute" in result.output

    result = invoke(task, str(tmp_path / "nowhere"))
    assert result.exit_code == 2 and "not a workspace" in result.output
