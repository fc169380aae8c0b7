from __future__ import annotations

from pathlib import Path

import pytest

from agent.tasks import parse_task
from agent.workspace import (
    HARNESS_FILES,
    SingleFileSolution,
    Workspace,
    WorkspaceError,
    open_solution,
)

REPO = Path(__file__).resolve().parent.parent
RELU_TASK = REPO / "benchmarks" / "tasks" / "level1" / "19_ReLU.py"


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    return Workspace.create(tmp_path / "ws", parse_task(RELU_TASK))


def test_create_lays_out_harness_files_read_only(workspace: Workspace) -> None:
    for name in HARNESS_FILES:
        path = workspace.root / name
        assert path.is_file()
        assert not path.stat().st_mode & 0o222, f"{name} should be read-only"
    assert (workspace.root / "reference.py").read_text() == RELU_TASK.read_text()
    assert (workspace.root / "kernels").is_dir()


def test_model_may_only_touch_its_own_files(workspace: Workspace) -> None:
    assert workspace.is_model_file("model_new.py")
    assert workspace.is_model_file("kernels/relu.cu")
    assert workspace.is_model_file("kernels/sub/relu_binding.cpp")
    for forbidden in (
        "binding.cpp",
        "binding_registry.h",
        "reference.py",
        "../x.cu",
        "/etc/passwd",
        "kernels/../binding.cpp",
        ".harness/workspace.json",
        "kernels/run.sh",
    ):
        assert not workspace.is_model_file(forbidden), forbidden


def test_tampered_harness_files_are_restored(workspace: Workspace) -> None:
    target = workspace.root / "binding.cpp"
    target.chmod(0o644)
    target.write_text("// hijacked\n")
    (workspace.root / "reference.py").chmod(0o644)
    (workspace.root / "reference.py").write_text("class Model: pass\n")
    changed = workspace.restore_harness_files()
    assert sorted(changed) == ["binding.cpp", "reference.py"]
    assert "PYBIND11_MODULE" in target.read_text()
    assert (workspace.root / "reference.py").read_text() == RELU_TASK.read_text()


def test_snapshot_and_restore_round_trip(workspace: Workspace) -> None:
    (workspace.root / "model_new.py").write_text("class ModelNew: pass\n")
    (workspace.root / "kernels" / "a.cu").write_text("// v1\n")
    first = workspace.snapshot()
    (workspace.root / "kernels" / "a.cu").write_text("// v2\n")
    (workspace.root / "kernels" / "b.cu").write_text("// new\n")
    assert workspace.content_hash() != first.content_hash
    workspace.restore(workspace.load_snapshot(first.content_hash[:10]))
    assert workspace.content_hash() == first.content_hash
    assert not (workspace.root / "kernels" / "b.cu").exists()
    assert (workspace.root / "kernels" / "a.cu").read_text() == "// v1\n"


def test_content_hash_ignores_harness_files(workspace: Workspace) -> None:
    (workspace.root / "model_new.py").write_text("class ModelNew: pass\n")
    before = workspace.content_hash()
    (workspace.root / ".harness" / "logs").mkdir(parents=True)
    (workspace.root / ".harness" / "logs" / "compile.log").write_text("noise")
    assert workspace.content_hash() == before


def test_open_solution_tells_kinds_apart(workspace: Workspace, tmp_path: Path) -> None:
    (workspace.root / "model_new.py").write_text("class ModelNew: pass\n")
    assert isinstance(open_solution(workspace.root), Workspace)
    single = tmp_path / "level_1_problem_19_sample_0_kernel.py"
    single.write_text("class ModelNew: pass\n")
    assert isinstance(open_solution(single), SingleFileSolution)
    other = tmp_path / "notes.py"
    other.write_text("x = 1\n")
    with pytest.raises(WorkspaceError, match="ModelNew"):
        open_solution(other)
    with pytest.raises(WorkspaceError, match="not a workspace"):
        open_solution(tmp_path / "missing")
    with pytest.raises(WorkspaceError, match="not empty"):
        Workspace.create(workspace.root, parse_task(RELU_TASK))
