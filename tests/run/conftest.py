"""Shared pieces of the agent tests: the ReLU task and its example solution, a tool context over a real
workspace and local sandbox, and a helper that runs `solve` with a scripted model and a fake referee."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from agent.budget import Budget, BudgetLimits
from agent.messages import Usage
from agent.models.scripted import ScriptedModel, ScriptedStep
from agent.referee import EvalOptions
from agent.run.result import SolveResult
from agent.run.solve import SolveConfig, solve
from agent.tasks import Task, parse_task
from agent.tools import ToolContext, ToolSettings
from agent.tools.candidates import CandidateBook, Referee
from agent.workspace import Workspace
from sandbox.base import open_sandbox
from tests.run.fakes import FakeReferee

REPO = Path(__file__).resolve().parents[2]
RELU_TASK = REPO / "benchmarks" / "tasks" / "level1" / "19_ReLU.py"
RELU_EXAMPLE = REPO / "skills" / "cuda-extension" / "examples" / "relu"
UNLIMITED = BudgetLimits(turns=None, usd=None, wall=None, gpu=None)


def relu_files() -> dict[str, str]:
    """The example's model files by workspace path."""
    return {
        p.relative_to(RELU_EXAMPLE).as_posix(): p.read_text()
        for p in sorted(RELU_EXAMPLE.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


class RecordedEvents(list):
    def write(self, event: Any) -> Any:
        self.append(event)
        return event


@pytest.fixture(scope="session")
def relu_task() -> Task:
    return parse_task(RELU_TASK)


@pytest.fixture(scope="session")
def build_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("build-cache")


@pytest.fixture
def make_context(tmp_path: Path, relu_task: Task, build_cache: Path) -> Callable[..., ToolContext]:
    def make(
        *, referee: FakeReferee | None = None, limits: BudgetLimits = UNLIMITED, **settings: Any
    ) -> ToolContext:
        ws = Workspace.create(tmp_path / "ws", relu_task)
        return ToolContext(
            task=relu_task,
            workspace=ws,
            sandbox=open_sandbox("local", workspace=ws.root, cache_dir=build_cache),
            referee=referee or FakeReferee(),
            budget=Budget(limits),
            candidates=CandidateBook(),
            events=RecordedEvents(),
            settings=ToolSettings(referee=EvalOptions(arch="sm_90"), **settings),
        )

    return make


def run_solve(
    out: Path,
    steps: Sequence[ScriptedStep],
    task: Task,
    *,
    referee: Referee | None = None,
    limits: BudgetLimits = UNLIMITED,
    cache_dir: Path | None = None,
    clock: Callable[[], float] | None = None,
    usage: Usage | None = None,
    cost_usd: float | None = 0.0,
    **config: Any,
) -> tuple[SolveResult, ScriptedModel]:
    model = ScriptedModel(steps, name="scripted", usage=usage, cost_usd=cost_usd)
    options: dict[str, Any] = {"cache_dir": cache_dir} if cache_dir else {}
    extra: dict[str, Any] = {"clock": clock} if clock else {}
    result = solve(
        SolveConfig(
            task=task.path,
            out=out,
            model="scripted",
            budget=limits,
            referee=EvalOptions(arch="sm_90"),
            **config,
        ),
        model=model,
        referee=referee or FakeReferee(),
        task=task,
        sandbox_options=options,
        **extra,
    )
    return result, model
