"""KernelBench loads out of the box: `agent tasks` over its four levels, and a clear hint when a
task needs a package that is not installed.

The level tests need KernelBench's task folders at ../shared/kernelbench (beside the repository,
where CI has them) and skip with that reason elsewhere.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from agent.cli.app import app
from agent.cli.task_errors import load_hints
from agent.tasks import TaskLoadError

REPO = Path(__file__).resolve().parent.parent
KERNELBENCH = REPO.parent / "shared" / "kernelbench"
TASKS_PER_LEVEL = {1: 100, 2: 100, 3: 50, 4: 20}
LEVEL_SECONDS = 60


def list_tasks(folder: Path) -> tuple[dict[str, list[dict[str, object]]], float]:
    start = time.monotonic()
    result = CliRunner().invoke(app, ["tasks", str(folder), "--json"])
    elapsed = time.monotonic() - start
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout), elapsed


@pytest.mark.slow
@pytest.mark.parametrize("level", [1, 2, 3, 4])
def test_every_kernelbench_level_lists_all_its_tasks_with_no_errors(level: int) -> None:
    """Level 4 loads Hugging Face models by name: they are built from the configs shipped with the
    product, with no download."""
    folder = KERNELBENCH / f"level{level}"
    if not folder.is_dir():
        pytest.skip(f"KernelBench is not at {KERNELBENCH} (CI has it beside the repository)")
    listed, elapsed = list_tasks(folder)
    missing = [e for e in listed["errors"] if "No module named" in str(e["problem"])]
    assert not missing, f"a package KernelBench needs is not installed: {missing[0]}"
    assert [e["path"] for e in listed["errors"]] == []
    assert len(listed["tasks"]) == TASKS_PER_LEVEL[level]
    assert elapsed < LEVEL_SECONDS, f"level {level} took {elapsed:.0f} s"
    if level == 4:  # the inspector builds every model on the meta device: gpt-neo-2.7B allocates nothing
        built: dict[str, Any] = {str(t["name"]): t["spec"] for t in listed["tasks"]}
        assert all(spec["built_on"] == "meta" for spec in built.values())
        assert built["1_EleutherAI-gpt-neo-2p7B_bs32_seq256"]["parameters"] == 2_651_307_520


@pytest.mark.slow
def test_a_task_needing_a_missing_package_gets_the_table_and_one_hint(tmp_path: Path) -> None:
    (tmp_path / "19_ReLU.py").write_text((REPO / "benchmarks/tasks/level1/19_ReLU.py").read_text())
    needs = "import torch\nimport kernel_agent_absent_package\n\n"
    for name in ("1_Bert.py", "2_Gpt.py"):
        (tmp_path / name).write_text(needs + (REPO / "benchmarks/tasks/level1/19_ReLU.py").read_text())
    result = CliRunner().invoke(app, ["tasks", str(tmp_path)], env={"COLUMNS": "200"})
    assert result.exit_code == 1
    assert "1 tasks in" in result.output and "19_ReLU" in result.output
    hints = [line for line in result.output.splitlines() if line.startswith("hint:")]
    assert hints == [
        "hint: 2 task files import 'kernel_agent_absent_package', which is not installed: pip install "
        "kernel_agent_absent_package (if that is the package's name) in the environment kernel-agent runs in"
    ]


def test_kernelbench_packages_are_named_with_the_install_that_brings_them() -> None:
    error = TaskLoadError(
        Path("level4/1_gpt2.py"),
        "running the file failed: ModuleNotFoundError: No module named 'transformers' (line 2)",
    )
    assert load_hints([error]) == [
        "1 task file imports 'transformers', which is not installed: pip install transformers "
        "(kernel-agent's install includes it: pip install -e .)"
    ]


def test_a_model_that_would_be_downloaded_is_said_in_one_hint() -> None:
    problem = (
        "running the file failed: OSError: We couldn't connect to 'https://huggingface.co' to load the "
        "files, and couldn't find them in the cached files.\nCheck your internet connection"
    )
    not_shipped = (
        "running the file failed: ModelNotShipped: this task would download bert-base-uncased from the "
        "Hugging Face Hub; no network here; shipped configs: gpt2"
    )
    errors = [TaskLoadError(Path("level4/1_gpt2.py"), problem), TaskLoadError(Path("2_bert.py"), not_shipped)]
    (hint,) = load_hints(errors)
    assert hint.startswith("2 task files load a Hugging Face model by name") and "\n" not in hint
    assert "hub_configs" in hint
