"""`agent --version`: one line a bug report can quote (package, torch, CUDA)."""

from __future__ import annotations

from importlib.metadata import version

import torch
from typer.testing import CliRunner

from agent.cli.app import app


def test_version_prints_the_package_torch_and_cuda_on_one_line() -> None:
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"kernel-agent {version('kernel-agent')} (torch {torch.__version__}, CUDA ")
    assert (torch.version.cuda or "none") in lines[0]


def test_version_runs_no_command() -> None:
    result = CliRunner().invoke(app, ["--version", "tasks", "/nonexistent"])
    assert result.exit_code == 0 and "nonexistent" not in result.output
