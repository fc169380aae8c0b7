"""`agent solve --model templates`: the built-in policy through the real command, no API key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.bad_input import REPO, run_agent

KERNELBENCH = REPO.parent / "shared" / "kernelbench"


@pytest.mark.slow
def test_solve_with_the_template_policy_compiles_and_submits(tmp_path: Path) -> None:
    task = REPO / "benchmarks" / "tasks" / "level1" / "19_ReLU.py"
    out = tmp_path / "run"
    proc = run_agent(
        ["solve", str(task), "--model", "templates", "--allow-no-gpu", "--out", str(out), "--json"],
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(proc.stdout)
    assert result["status"] == "submitted_unverified"
    assert (out / "solution" / "model_new.py").is_file() and (out / "transcript.jsonl").is_file()
    header = json.loads((out / "transcript.jsonl").read_text().splitlines()[0])
    assert header["model"] == "templates"


@pytest.mark.skipif(not KERNELBENCH.is_dir(), reason="../shared/kernelbench is not beside the checkout")
def test_a_task_the_library_does_not_cover_is_refused_in_one_line(tmp_path: Path) -> None:
    task = KERNELBENCH / "level1" / "54_conv_standard_3D__square_input__square_kernel.py"
    proc = run_agent(
        ["solve", str(task), "--model", "templates", "--allow-no-gpu", "--out", str(tmp_path / "o")],
        cwd=tmp_path,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    [line] = [line for line in proc.stderr.splitlines() if line.strip()]
    assert "--model templates: the template library does not cover" in line
    assert not (tmp_path / "o").exists()
