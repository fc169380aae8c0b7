"""`agent solve --model templates`: the built-in policy through the real command, no API key; and
`agent solve TASK.py` with neither --model nor the default model's key, which runs the same policy.
`run_agent` runs the command in a fresh process with ANTHROPIC_API_KEY and OPENAI_API_KEY removed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.bad_input import REPO, run_agent

# What the commands do, not how fast: a solve builds (on a fresh 2-core machine the first build also
# makes the shared toolchain, minutes under load); a refusal traces the task in a sandbox first.
BUILD_TIMEOUT_S = 900
TRACE_TIMEOUT_S = 300

KERNELBENCH = REPO.parent / "shared" / "kernelbench"
RELU = REPO / "benchmarks" / "tasks" / "level1" / "19_ReLU.py"
UNCOVERED_TASK = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.sort(x, dim=1).values  # sorting is not in the library


def get_inputs():
    return [torch.randn(8, 64)]


def get_init_inputs():
    return []
"""
FALLBACK_NOTE = (
    "no ANTHROPIC_API_KEY: using the built-in template policy (--model templates); "
    "set the key or pass --model to use an LLM"
)


def stderr_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


@pytest.mark.slow
def test_solve_with_the_template_policy_compiles_and_submits(tmp_path: Path) -> None:
    task = REPO / "benchmarks" / "tasks" / "level1" / "19_ReLU.py"
    out = tmp_path / "run"
    proc = run_agent(
        ["solve", str(task), "--model", "templates", "--allow-no-gpu", "--out", str(out), "--json"],
        cwd=tmp_path,
        timeout=BUILD_TIMEOUT_S,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(proc.stdout)
    assert result["status"] == "submitted_unverified"
    assert (out / "solution" / "model_new.py").is_file() and (out / "transcript.jsonl").is_file()
    header = json.loads((out / "transcript.jsonl").read_text().splitlines()[0])
    assert header["model"] == "templates"


@pytest.mark.slow
@pytest.mark.skipif(not KERNELBENCH.is_dir(), reason="../shared/kernelbench is not beside the checkout")
def test_a_task_the_library_does_not_cover_is_refused_in_one_line(tmp_path: Path) -> None:
    task = KERNELBENCH / "level1" / "92_cumsum_exclusive.py"  # cat is not covered
    proc = run_agent(
        ["solve", str(task), "--model", "templates", "--allow-no-gpu", "--out", str(tmp_path / "o")],
        cwd=tmp_path,
        timeout=TRACE_TIMEOUT_S,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    [line] = [line for line in proc.stderr.splitlines() if line.strip()]
    assert "--model templates: the template library does not cover" in line
    assert not (tmp_path / "o").exists()


@pytest.mark.slow
def test_without_a_model_or_a_key_solve_runs_the_template_policy_and_says_so(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = run_agent(
        ["solve", str(RELU), "--allow-no-gpu", "--out", str(out), "--json"],
        cwd=tmp_path,
        timeout=BUILD_TIMEOUT_S,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert stderr_lines(proc.stderr) == [FALLBACK_NOTE]
    result = json.loads(proc.stdout)  # --json: stdout is the SolveResult alone
    assert result["status"] == "submitted_unverified" and result["submitted"]["source"] == "submit"
    header = json.loads((out / "transcript.jsonl").read_text().splitlines()[0])
    assert header["model"] == "templates"
    assert json.loads((out / "run.json").read_text())["usage"]["usd"] == 0
    kernels = sorted(p.name for p in (out / "solution" / "kernels").glob("*.cu"))
    assert kernels == ["s0_ewise.cu"]  # the elementwise template, instantiated


@pytest.mark.slow
def test_without_a_model_or_a_key_a_task_the_library_does_not_cover_names_both(tmp_path: Path) -> None:
    task = tmp_path / "1_Sort.py"
    task.write_text(UNCOVERED_TASK)
    out = tmp_path / "o"
    proc = run_agent(
        ["solve", str(task), "--allow-no-gpu", "--out", str(out)], cwd=tmp_path, timeout=TRACE_TIMEOUT_S
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    [line] = stderr_lines(proc.stderr)
    assert "the built-in template policy was tried" in line
    assert f"does not cover {task}: operators not covered: sort" in line  # the policy's reason
    assert "an LLM needs the key: set ANTHROPIC_API_KEY" in line
    assert not out.exists()


def test_an_explicit_model_without_its_key_is_still_refused(tmp_path: Path) -> None:
    out = tmp_path / "o"
    proc = run_agent(
        ["solve", str(RELU), "--model", "anthropic:claude-sonnet-5-5", "--allow-no-gpu", "--out", str(out)],
        cwd=tmp_path,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    [line] = stderr_lines(proc.stderr)
    assert "--model anthropic:claude-sonnet-5-5 needs an API key: set ANTHROPIC_API_KEY" in line
    assert not out.exists()
