"""README.md's two commands stay true: CI runs exactly the test command it shows."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def readme_commands() -> list[str]:
    text = (REPO / "README.md").read_text()
    return [block.strip() for block in re.findall(r"```bash\n(.*?)```", text, re.S)]


def test_readme_opens_with_an_install_and_run_command_and_a_test_command() -> None:
    commands = readme_commands()
    assert len(commands) >= 2
    install_and_run, run_tests = commands[0], commands[1]
    assert install_and_run.startswith("pip install -e .") and "agent solve" in install_and_run
    assert "pytest" in run_tests


def test_ci_runs_readmes_test_command_verbatim() -> None:
    ci = (REPO / ".ci" / "run").read_text()
    assert readme_commands()[1] in ci.splitlines()


def test_the_readme_task_exists() -> None:
    task = re.search(r"agent solve (\S+)", readme_commands()[0])
    assert task is not None and (REPO / task.group(1)).is_file()
