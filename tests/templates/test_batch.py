"""`agent batch --model templates`: the built-in policy on every task of a folder, through the batch's
real runner, store and report. Judging is the batch tests' fake evaluator (one fake GPU) and the
compile tool is replaced by a fake build, so no nvcc or GPU is needed; the template policy itself,
its trace of each task (in the local sandbox) and the agent loop are real."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

import agent.tools.pipeline
from agent.batch.runner import BatchRunner
from agent.batch.store import Store
from agent.build.compile import CompileResult
from agent.cli.batch import register
from agent.workspace import Workspace
from tests.batch.helpers import fake_config, fake_evaluator, make_tasks, read_log
from tests.templates.test_cli import UNCOVERED_TASK

app = typer.Typer()
register(app)


def fake_build(workspace: Workspace, sandbox: Any, *, arch: str | None, timeout: float) -> CompileResult:
    """What the compile tool gets instead of nvcc: a build that succeeds at once."""
    return CompileResult(
        ok=True,
        status="built",
        solution_kind="workspace",
        content_hash=workspace.content_hash(),
        arch=arch or "9.0",
        arch_source="fake",
        build_dir="/nonexistent/fake-build",
        duration_s=0.0,
    )


@pytest.mark.slow
def test_batch_runs_the_template_policy_per_task_and_records_what_it_does_not_cover(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(agent.tools.pipeline, "compile_solution", fake_build)
    tasks = make_tasks(tmp_path / "tasks", {1: ["1_Relu"]})  # torch.relu: the elementwise template
    (tasks / "level1" / "2_Sort.py").write_text(UNCOVERED_TASK)  # sort: not in the library
    log = tmp_path / "judged.jsonl"
    config = fake_config(
        tmp_path, tasks, None, model="templates", gpus=["0"], evals_per_gpu=1, concurrency=2,
        extra={"log": str(log)}, solve_options={"budget": "turns=12"},
    )  # fmt: skip
    evaluator = fake_evaluator(config)
    try:
        summary = BatchRunner(config, evaluator=evaluator).run()
        rerun = BatchRunner(config, evaluator=evaluator).run()  # the same command again: nothing to redo
    finally:
        evaluator.close()
    assert summary.total == 2 and summary.counts == {"correct": 1, "done": 1}, summary
    assert rerun.skipped == 2 and rerun.counts == {}, rerun

    with Store(config.store) as store:
        results = {r.task_name: r for r in store.results()}
    relu, uncovered = results["1_Relu"], results["2_Sort"]
    assert relu.status == "done" and relu.verdict == "correct" and relu.usd == 0 and relu.tokens == 0
    solution = Path(relu.solution_path or "")
    assert (solution / "kernels" / "s0_ewise.cu").is_file()  # the policy's instantiated template
    header = json.loads(Path(relu.transcript_path or "").read_text().splitlines()[0])
    assert header["model"] == "templates"
    judged = read_log(log)
    assert len(judged) >= 3 and all(
        "1_Relu" in e["solution"] for e in judged
    )  # profile, later candidates, submit
    # Not covered: a done attempt (not redone, not an error) with the library's reason, no agent run.
    assert uncovered.status == "done" and uncovered.verdict is None and uncovered.transcript_path is None
    assert uncovered.error == "not covered by the template library: operators not covered: sort"

    report = CliRunner().invoke(app, ["report", str(config.out), "--candidates", "--wide"])
    assert report.exit_code == 0, report.output
    assert "agent (model templates)" in report.output
    [relu_row] = [line.split() for line in report.output.splitlines() if " 1_Relu " in line]
    assert relu_row[2:4] == ["sample_0", "correct"]
    [uncovered_row] = [line for line in report.output.splitlines() if " 2_Sort " in line]
    assert uncovered_row.split()[3] == "done"
    assert "not covered by the template library: operators not covered: sort" in uncovered_row
    assert "operators not covered: sort" in (config.out / "report.md").read_text()


def test_the_batch_command_takes_templates_as_a_model_without_any_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No key is asked for; on this machine the command goes on to the GPU probe, and stops there."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    tasks = make_tasks(tmp_path / "tasks", {1: ["1_Relu"]})
    args = ["batch", str(tasks), "--model", "templates", "--out", str(tmp_path / "out"), "--arch", "9.0"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2
    assert "no CUDA GPU is visible here: agent runs need one" in " ".join(result.output.split())
    assert "API_KEY" not in result.output and "model spec" not in result.output
