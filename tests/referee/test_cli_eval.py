"""`agent eval` where no GPU is visible: the compile stage runs, then it says so and exits 3."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from agent.cli.eval import EXIT_NO_GPU, EXIT_USAGE, eval_app
from tests.referee.conftest import TASKS, copy_candidate


@pytest.mark.slow
@pytest.mark.skipif(torch.cuda.is_available(), reason="tests the no-GPU path; a GPU is visible here")
def test_without_a_gpu_compile_runs_and_the_exit_status_says_no_gpu(tmp_path: Path) -> None:
    solution = copy_candidate("relu_numpy", tmp_path)
    outcome = CliRunner().invoke(eval_app, [str(TASKS / "relu_small.py"), str(solution), "--json"])
    assert outcome.exit_code == EXIT_NO_GPU, outcome.output
    result = json.loads(outcome.stdout)
    assert result["verdict"] == "no_gpu" and result["compile"]["ok"] is True
    assert "need a CUDA GPU" in result["reason"]
    table = CliRunner().invoke(eval_app, [str(TASKS / "relu_small.py"), str(solution)])
    assert table.exit_code == EXIT_NO_GPU and "no_gpu" in table.stdout
    assert "run this on a GPU machine" in " ".join(table.stderr.split())


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    solution = copy_candidate("relu_numpy", tmp_path)
    outcome = CliRunner().invoke(
        eval_app, [str(TASKS / "relu_small.py"), str(solution), "--policy", "lenient"]
    )
    assert outcome.exit_code == EXIT_USAGE and "unknown policy" in outcome.stderr
    missing = CliRunner().invoke(eval_app, [str(tmp_path / "nope.py"), str(solution)])
    assert missing.exit_code == EXIT_USAGE
