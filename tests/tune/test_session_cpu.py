"""The real tuning processes (trusted judge, sandboxed worker) on the CPU, with a pure-Python ModelNew."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.tasks import load_task
from agent.tune.apply import read_tune_literal
from agent.tune.experience import ExperienceLibrary
from agent.tune.limits import BudgetSpec
from agent.tune.render import render
from agent.tune.runner import TuneOptions, run_tuning
from agent.workspace import Workspace
from sandbox.base import open_sandbox

# Real processes: a judge and a sandboxed worker per run, each importing torch.
pytestmark = pytest.mark.slow

TASK = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(32))

    def forward(self, x):
        return (x * self.scale).sum(dim=1)


def get_inputs():
    return [torch.randn(64, 32)]


def get_init_inputs():
    return []
"""

MODEL = """import os
import time

import torch
import torch.nn as nn

TUNE = {"DELAY": 4, "CHEAT": 0, "MODE": 0}


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(32))

    def forward(self, x):
        if TUNE["MODE"] == 1:
            os._exit(3)  # a configuration that kills the process, as an illegal address would
        if TUNE["MODE"] == 2:
            time.sleep(600)  # a configuration that hangs
        if TUNE["MODE"] == 3:
            raise RuntimeError("CUDA error: an illegal memory access was encountered (simulated)")
        if TUNE["CHEAT"]:
            return torch.zeros(x.shape[0])  # fast and wrong
        time.sleep(TUNE["DELAY"] * 1e-3)
        return (x * self.scale).sum(dim=1)
"""


def make(tmp_path: Path, params: dict, constraints: list[str] | None = None) -> tuple:
    import json

    (tmp_path / "task.py").write_text(TASK)
    task = load_task(tmp_path / "task.py")
    ws = Workspace.create(tmp_path / "ws", task)
    ws.entry.write_text(MODEL)
    (ws.root / "kernels" / "tune.json").write_text(
        json.dumps({"params": params, "constraints": constraints or []})
    )
    return task, ws


def tune(task, ws, tmp_path, **kw):
    options = TuneOptions(
        budget=kw.pop("budget", BudgetSpec(max_evals=20, wall_seconds=240)),
        device="cpu",
        experience_path=tmp_path / "exp.sqlite",
        retime_rounds=3,
        **kw,
    )
    with open_sandbox("local", workspace=ws.root) as box:
        return run_tuning(task, ws, box, options)


def test_end_to_end_finds_the_fastest_correct_point_and_rejects_the_fast_wrong_one(tmp_path):
    task, ws = make(tmp_path, {"DELAY": [1, 4, 12], "CHEAT": [0, 1], "MODE": [0]})
    result = tune(task, ws, tmp_path)
    assert result.ok, result.message
    outcome = result.outcome
    assert outcome.history[0].key == "4,0,0"  # the current values, measured first
    statuses = {m.key: m.status for m in outcome.history}
    assert statuses["1,1,0"] == statuses["4,1,0"] == "incorrect"
    assert outcome.best_key == "1,0,0"
    assert outcome.speedup and outcome.speedup > 1.5
    assert read_tune_literal(ws.entry) == {"DELAY": 1, "CHEAT": 0, "MODE": 0}
    assert result.experience_run_id == 1
    assert "aten.mul" in " ".join(result.features["ops"])
    assert not (ws.root / ".tune").exists()

    # A second run starts from what the first learnt.
    ws.entry.write_text(MODEL)
    again = tune(task, ws, tmp_path, budget=BudgetSpec(max_evals=3, wall_seconds=240))
    assert again.warm_start and again.warm_start[0].run_id == 1
    assert "1,0,0" in [m.key for m in again.outcome.history[:3]]
    with ExperienceLibrary(tmp_path / "exp.sqlite") as lib:
        assert len(lib.runs()) == 2


def test_a_crash_and_a_hang_cost_their_point_only(tmp_path):
    task, ws = make(tmp_path, {"DELAY": [1, 4], "CHEAT": [0], "MODE": [0, 1, 2, 3]})
    result = tune(task, ws, tmp_path, strategy="exhaustive", item_timeout=4.0, use_experience=False)
    assert result.outcome is not None, result.message
    statuses = {m.key: m.status for m in result.outcome.history}
    assert statuses["1,0,1"] == statuses["4,0,1"] == "crashed"
    assert statuses["1,0,2"] == statuses["4,0,2"] == "timeout"
    assert statuses["1,0,0"] == statuses["4,0,0"] == "ok"
    # A CUDA error poisons the context: reported as the point's failure, and a fresh worker goes on.
    errors = {m.key: m.error for m in result.outcome.history}
    assert statuses["1,0,3"] == statuses["4,0,3"] == "failed"
    assert errors["1,0,3"].startswith("cuda_error")
    assert result.outcome.best_key == "1,0,0"


def test_problems_come_back_as_messages(tmp_path):
    task, ws = make(tmp_path, {"DELAY": [1, 4], "CHEAT": [0], "MODE": [0]})
    (ws.root / "kernels" / "tune.json").unlink()
    assert "no kernels/tune.json" in tune(task, ws, tmp_path).message
    (ws.root / "kernels" / "tune.json").write_text('{"params": {"DELAY": [1, 4], "BLOCK": [1]}}')
    assert "lacks the parameter(s) ['BLOCK']" in tune(task, ws, tmp_path).message
    (ws.root / "kernels" / "tune.json").write_text('{"params": {"DELAY": [1, 4], "CHEAT": [0], "MODE": [0]}}')
    ws.entry.write_text(MODEL.replace('"DELAY": 4', '"DELAY": 3'))
    assert "not a valid point" in tune(task, ws, tmp_path).message
    ws.entry.write_text(MODEL.replace("TUNE = ", "SETTINGS = "))
    assert "TUNE" in tune(task, ws, tmp_path).message


@pytest.mark.parametrize("use_experience", [False])
def test_tool_returns_a_table(tmp_path, use_experience):
    task, ws = make(tmp_path, {"DELAY": [1, 4, 12], "CHEAT": [0, 1], "MODE": [0]})
    result = tune(
        task, ws, tmp_path, budget=BudgetSpec(wall_seconds=240, max_evals=6), use_experience=use_experience
    )
    text = render(result)
    assert "default  4,0,0" in text
    assert "best     1,0,0" in text
    assert "incorrect" in text and "applied: model_new.py TUNE" in text
