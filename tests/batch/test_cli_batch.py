"""`agent batch` and `agent report` through typer, and the real referee behind the batch on this
CPU machine (KernelBench single-file generations: compile by import, judge on the CPU device)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from agent.batch.config import JudgingOptions
from agent.batch.runner import BatchRunner
from agent.batch.store import Store
from agent.cli.batch import register
from tests.batch.helpers import fake_config
from tests.batch.test_report import fill_store

app = typer.Typer()
register(app)
runner = CliRunner()


def test_batch_needs_exactly_one_of_model_and_solutions(tmp_path: Path) -> None:
    both = runner.invoke(app, ["batch", str(tmp_path), "--model", "openai:x", "--solutions", str(tmp_path)])
    assert both.exit_code == 2 and "exactly one of --model" in both.output
    neither = runner.invoke(app, ["batch", str(tmp_path)])
    assert neither.exit_code == 2 and "exactly one of --model" in neither.output


def test_batch_with_a_model_says_which_key_is_missing(tmp_path: Path) -> None:
    result = runner.invoke(app, ["batch", str(tmp_path), "--model", "anthropic:claude-x"])
    assert result.exit_code == 2 and "ANTHROPIC_API_KEY" in result.output


def test_evals_per_gpu_must_be_at_least_one(tmp_path: Path) -> None:
    result = runner.invoke(
        app, ["batch", str(tmp_path), "--solutions", str(tmp_path), "--evals-per-gpu", "0"]
    )
    assert result.exit_code == 2 and "--evals-per-gpu" in result.output


def test_report_command_prints_metrics_and_writes_files(tmp_path: Path) -> None:
    store = fill_store(tmp_path)
    result = runner.invoke(app, ["report", str(store.parent), "--out", str(tmp_path / "r")])
    assert result.exit_code == 0, result.output
    assert "fast_1" in result.output and "KernelBench metrics" in result.output
    assert (tmp_path / "r" / "report.md").is_file() and (tmp_path / "r" / "report.html").is_file()
    missing = runner.invoke(app, ["report", str(tmp_path / "nowhere")])
    assert missing.exit_code == 2 and "no batch store" in missing.output


RELU_TASK = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(64, 256)]


def get_init_inputs():
    return []
"""

# A generation as KernelBench's scripts save it (torch glue instead of load_inline, so that it
# "compiles" by import on a machine without nvcc time to spare; fine under policy kernelbench).
RELU_GENERATION = """import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x)
"""


def kernelbench_generations(tmp_path: Path) -> tuple[Path, Path]:
    tasks = tmp_path / "tasks" / "level1"
    tasks.mkdir(parents=True)
    (tasks / "1_relu_small.py").write_text(RELU_TASK)
    gen = tmp_path / "runs" / "my_run"
    gen.mkdir(parents=True)
    (gen / "level_1_problem_1_sample_0_kernel.py").write_text(RELU_GENERATION)
    (gen / "level_1_problem_1_sample_1_kernel.py").write_text("class ModelNew(:\n")
    return tmp_path / "tasks", gen


def digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in root.rglob("*")
        if p.is_file()
    }


@pytest.mark.slow
def test_batch_cli_judges_kernelbench_generations_without_a_gpu(tmp_path: Path) -> None:
    tasks, gen = kernelbench_generations(tmp_path)
    before = digest(gen)
    out = tmp_path / "out"
    args = [
        "batch",
        str(tasks),
        "--solutions",
        str(gen.parent),
        "--out",
        str(out),
        "--quiet",
        "--arch",
        "9.0",
    ]
    result = runner.invoke(app, [*args, "--no-profile", "--compile-mode", "none", "--trials", "1"])
    assert result.exit_code == 1, result.output  # no GPU here: recorded as an error, to redo on a GPU
    assert "1 attempt(s) ended in an error" in result.output
    with Store(out / "store.sqlite") as store:
        results = {r.candidate: r for r in store.results()}
    assert results["my_run/sample_0"].status == "error" and results["my_run/sample_0"].verdict == "no_gpu"
    assert results["my_run/sample_0"].compiled
    assert (
        results["my_run/sample_1"].status == "done" and results["my_run/sample_1"].verdict == "compile_error"
    )
    assert (out / "report.html").is_file()
    assert digest(gen) == before, "the batch wrote into the user's solution folder"


@pytest.mark.slow
def test_the_real_referee_judges_through_the_batch_on_the_cpu_device(tmp_path: Path) -> None:
    tasks, gen = kernelbench_generations(tmp_path)
    config = fake_config(
        tmp_path,
        tasks,
        gen.parent,
        gpus=[],
        concurrency=2,
        instantiate_tasks=True,
        eval=JudgingOptions(
            device="cpu", policy="kernelbench", profile=True, compile_mode=None, trials=2, arch="9.0"
        ),
    )
    summary = BatchRunner(config).run()
    assert summary.counts == {"correct": 1, "compile_error": 1}
    with Store(config.store) as store:
        (correct,) = [r for r in store.results() if r.verdict == "correct"]
        (result,) = store.evaluations(correct.attempt_id)
    assert correct.speedup_eager is not None and correct.gpu_s > 0
    assert result.correctness is not None and result.correctness.trials_run == 2
