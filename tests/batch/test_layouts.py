"""Solution layouts: KernelBench generation file names and our workspace folders, matched to tasks;
copies never write into the user's folder."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from agent.batch.layouts import copy_solution, discover_solutions
from agent.tasks import load_folder
from agent.workspace import Workspace
from tests.batch.helpers import make_tasks, make_workspace_solution

REPO = Path(__file__).resolve().parents[2]


def tree_digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.fixture
def tasks(tmp_path: Path) -> list:
    root = make_tasks(tmp_path / "tasks", {1: ["19_ReLU", "23_Softmax"], 2: ["19_Conv_Bias"]})
    found, errors = load_folder(root, instantiate=False)
    assert not errors
    return found


def test_kernelbench_generation_names_match_by_level_and_problem_id(tmp_path: Path, tasks: list) -> None:
    runs = tmp_path / "runs" / "my_run"
    runs.mkdir(parents=True)
    for name in (
        "level_1_problem_19_sample_0_kernel.py",
        "level_1_problem_19_sample_1_kernel.py",
        "level_2_problem_19_sample_0_kernel.py",
        "level_1_problem_23_sample_0_kernel.py",
        "level_1_problem_77_sample_0_kernel.py",  # no such task
        "level_1_problem_19_sample_0_prompt.txt",  # not a generation
        "eval_results.json",
    ):
        (runs / name).write_text("class ModelNew:\n    pass\n")
    found = discover_solutions(runs, tasks)
    got = [(i.task.level, i.task.name, i.candidate, i.source.name if i.source else None) for i in found.items]
    assert got == [
        (1, "19_ReLU", "sample_0", "level_1_problem_19_sample_0_kernel.py"),
        (1, "19_ReLU", "sample_1", "level_1_problem_19_sample_1_kernel.py"),
        (1, "23_Softmax", "sample_0", "level_1_problem_23_sample_0_kernel.py"),
        (2, "19_Conv_Bias", "sample_0", "level_2_problem_19_sample_0_kernel.py"),
    ]
    assert len(found.unmatched) == 1 and "level_1_problem_77" in found.unmatched[0]


def test_two_run_folders_keep_their_samples_apart(tmp_path: Path, tasks: list) -> None:
    for run in ("run_a", "run_b"):
        (tmp_path / "gen" / run).mkdir(parents=True)
        (tmp_path / "gen" / run / "level_1_problem_19_sample_0_kernel.py").write_text("class ModelNew: ...\n")
    found = discover_solutions(tmp_path / "gen", tasks)
    assert sorted(i.candidate for i in found.items) == ["run_a/sample_0", "run_b/sample_0"]


def test_workspace_layout_with_variants(tmp_path: Path, tasks: list) -> None:
    sols = tmp_path / "solutions"
    make_workspace_solution(sols, 1, "19_ReLU", {})
    make_workspace_solution(sols, 1, "19_ReLU__broken_no_grid_stride", {})
    make_workspace_solution(sols, 1, "23_Softmax__fast", {})
    make_workspace_solution(sols, 2, "19_Conv_Bias", {})
    make_workspace_solution(sols, 3, "1_MLP", {})  # no level-3 task
    found = discover_solutions(sols, tasks)
    got = [(i.task.level, i.task.name, i.candidate) for i in found.items]
    assert got == [
        (1, "19_ReLU", "base"),
        (1, "19_ReLU", "broken_no_grid_stride"),
        (1, "23_Softmax", "fast"),
        (2, "19_Conv_Bias", "base"),
    ]
    assert len(found.unmatched) == 1 and "1_MLP" in found.unmatched[0]


def test_our_benchmark_solutions_all_match_their_tasks() -> None:
    tasks, errors = load_folder(REPO / "benchmarks" / "tasks", instantiate=False)
    assert not errors
    found = discover_solutions(REPO / "benchmarks" / "solutions", tasks)
    folders = [
        p for p in (REPO / "benchmarks" / "solutions").glob("level*/*") if (p / "model_new.py").is_file()
    ]
    assert not found.unmatched
    assert len(found.items) == len(folders) > 0
    assert {i.task.name for i in found.items} == {t.name for t in tasks}


def test_materialize_copies_a_workspace_and_leaves_the_source_untouched(tmp_path: Path, tasks: list) -> None:
    sols = tmp_path / "solutions"
    source = make_workspace_solution(sols, 1, "19_ReLU", {"verdict": "correct"})
    (source / "expected.json").write_text("{}")  # not a model file: not copied
    before = tree_digest(sols)
    item = discover_solutions(sols, tasks).items[0]
    dest = copy_solution(item, tmp_path / "attempt" / "solution")
    ws = Workspace.open(dest)
    assert set(ws.model_files()) == {"model_new.py", "kernels/k.cu"}
    assert (dest / "reference.py").read_text() == item.task.source
    assert not (dest / "expected.json").exists()
    # compiling restores harness files and writes logs: into the copy only
    ws.restore_harness_files()
    (dest / ".harness" / "logs").mkdir(parents=True)
    assert tree_digest(sols) == before


def test_materialize_copies_a_single_file(tmp_path: Path, tasks: list) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "level_1_problem_23_sample_0_kernel.py").write_text("class ModelNew: ...\n")
    item = discover_solutions(runs, tasks).items[0]
    path = copy_solution(item, tmp_path / "copy")
    assert path == tmp_path / "copy" / "level_1_problem_23_sample_0_kernel.py"
    assert path.read_text() == "class ModelNew: ...\n"
    assert sorted(p.name for p in runs.iterdir()) == ["level_1_problem_23_sample_0_kernel.py"]
