"""Fixtures for the referee's tests: an isolated cache, copies of candidates in tmp folders, and
a quick way to judge a python-only candidate without a compile step."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from agent.build.compile import CompileResult
from agent.referee import EvalOptions, EvalResult, judge_compiled
from agent.referee.baselines import BaselineCache
from agent.tasks import load_task
from agent.workspace import open_solution
from sandbox.base import open_sandbox
from sandbox.workers.gpu.timing import TimingConfig

HERE = Path(__file__).resolve().parent
TASKS = HERE / "tasks"
PYTHON_CANDIDATES = HERE / "candidates" / "python"
WORKSPACES = HERE / "candidates" / "workspaces"
QUICK_TIMING = TimingConfig(warmup_ms=5, min_warmup=2, target_ms=10, min_reps=5, max_reps=20, max_seconds=5)


@pytest.fixture(scope="session")
def shared_build_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One build cache for the session: the shared toolchain (torch's ninja header, precompiled
    headers: ~30 s) is built once, not once per test. Builds are keyed by workspace, so tests
    still build their own solutions."""
    given = os.environ.get("KERNEL_AGENT_BUILD_CACHE")
    return Path(given) if given else tmp_path_factory.mktemp("kernel-agent-builds")


@pytest.fixture(scope="session")
def shared_bytecode_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """torch's bytecode for the sandboxes, where torch ships none (sandbox/bytecode.py): made once
    for the session, like the toolchain, not once per test's cache."""
    given = os.environ.get("KERNEL_AGENT_BYTECODE_CACHE")
    return Path(given) if given else tmp_path_factory.mktemp("kernel-agent-bytecode")


@pytest.fixture(autouse=True)
def isolated_cache(
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    shared_build_cache: Path,
    shared_bytecode_cache: Path,
) -> Path:
    cache = tmp_path_factory.mktemp("kernel-agent-cache")
    monkeypatch.setenv("KERNEL_AGENT_CACHE", str(cache))
    monkeypatch.setenv("KERNEL_AGENT_BUILD_CACHE", str(shared_build_cache))
    monkeypatch.setenv("KERNEL_AGENT_BYTECODE_CACHE", str(shared_bytecode_cache))
    return cache


def copy_candidate(name: str, dest: Path) -> Path:
    """A candidate file or workspace copied to `dest`: the referee writes next to solutions."""
    source = PYTHON_CANDIDATES / f"{name}.py"
    if source.is_file():
        dest.mkdir(parents=True, exist_ok=True)
        return Path(shutil.copy(source, dest / source.name))
    target = dest / name
    shutil.copytree(WORKSPACES / name, target)
    return target


def python_only_compile(path: Path) -> CompileResult:
    """What compile_solution reports for a single-file solution with nothing to build."""
    solution = open_solution(path)
    return CompileResult(
        ok=True,
        status="built",
        solution_kind="single_file",
        content_hash=solution.content_hash(),
        arch="9.0",
        arch_source="test",
        build_dir=str(path.parent / "no-build"),
        duration_s=0.0,
    )


JudgeCpu = Callable[..., EvalResult]


@pytest.fixture
def judge_cpu(tmp_path: Path) -> JudgeCpu:
    """judge_cpu(task, candidate, policy=..., **options): verify (and by default profile) a
    python-only candidate on the CPU, end to end through the real worker processes; `options` are
    EvalOptions fields."""

    def run(task: str, candidate: str, *, policy: str = "strict", **options: object) -> EvalResult:
        path = copy_candidate(candidate, tmp_path / candidate)
        options.setdefault("trials", 3)
        options.setdefault("run_timeout_s", 120.0)
        options.setdefault("compile_mode", None)
        options.setdefault("timing", QUICK_TIMING)
        solution = open_solution(path)  # a single file is judged from its staged copy
        with open_sandbox("local", workspace=solution.root) as box:
            return judge_compiled(
                load_task(TASKS / f"{task}.py", instantiate=False),
                solution,
                python_only_compile(path),
                EvalOptions(policy=policy, device="cpu", **options),  # type: ignore[arg-type]
                sandbox=box,
                baseline_cache=BaselineCache(tmp_path / "baselines.json"),
            )

    return run
