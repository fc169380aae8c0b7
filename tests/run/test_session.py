"""Whole sessions: write -> compile -> verify -> profile -> revise -> submit.

- slow: on the CPU machine, every compile is real (nvcc for sm_90); verdicts come from the fake referee.
- gpu: on a GPU machine, end to end with the real referee, then replayed from its own transcript
  (agent.run.replay). Set KERNEL_AGENT_GPU_ARTIFACTS=DIR to keep both runs' files and the replay report
  under DIR, laid out as benchmarks/results/solve-h200/ (benchmarks/transcripts_gpu.sh does).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from agent.build.toolkit import find_toolkit
from agent.referee import EvalOptions
from agent.run.replay import ReplayReport, replay_run
from agent.tasks import load_task
from agent.tools.candidates import RefereeAdapter
from agent.transcripts.format import EvaluationEvent, ToolResultEvent
from agent.transcripts.reader import read_transcript
from tests.run.conftest import RELU_EXAMPLE, RELU_TASK, REPO, UNLIMITED, run_solve
from tests.run.fakes import FakeReferee
from tests.run.session import SessionPlan, pipeline_steps, solution_files

RELU_PLAN = SessionPlan(
    files={
        **solution_files(RELU_EXAMPLE),
        "model_new.py": (RELU_EXAMPLE / "model_new.py").read_text() + "# FAKE-SPEEDUP: 1.2\n",
    },
    typo=("kernels/relu.cu", "v.y = fmaxf(v.y, 0.f);", "v.y = fmaxf(v.y, zero);"),
    revision=[
        (
            "kernels/relu.cu",
            "if (blocks > 132 * 32) blocks = 132 * 32;",
            "if (blocks > 132 * 16) blocks = 132 * 16;",
        ),
        ("model_new.py", "# FAKE-SPEEDUP: 1.2", "# FAKE-SPEEDUP: 1.6"),
    ],
)


def results_by_call(out: Path) -> dict[str, ToolResultEvent]:
    return {r.tool_call_id: r for r in read_transcript(out / "transcript.jsonl").of_type(ToolResultEvent)}


@pytest.mark.slow
def test_pipeline_session_compiles_for_real(tmp_path: Path, relu_task, build_cache: Path) -> None:
    out = tmp_path / "out"
    referee = FakeReferee(compile_for_real=True)
    result, model = run_solve(
        out, pipeline_steps(RELU_PLAN), relu_task, referee=referee, cache_dir=build_cache
    )
    model.assert_complete()
    results = results_by_call(out)

    failed = results["compile_1"]
    typo_line = RELU_PLAN.files["kernels/relu.cu"].splitlines().index("    v.y = fmaxf(v.y, 0.f);") + 1
    assert failed.is_error and failed.data is not None and failed.data["status"] == "compile_error"
    assert f"kernels/relu.cu:{typo_line}" in failed.content and "zero" in failed.content
    second = results["compile_2"].data
    assert second is not None and (second["ok"], second["status"]) == (True, "built")
    assert results["compile_3"].data is not None and results["compile_3"].data["status"] == "built"
    assert results["verify_1"].content.startswith("VERDICT: correct")
    assert "1.20x vs eager" in results["profile_1"].content
    assert "this is the best verified candidate so far" in results["profile_2"].content

    assert result.status == "submitted" and result.verified
    assert result.best is not None and result.best.speedup == pytest.approx(1.6 * 0.9)  # vs torch.compile
    solution = out / "solution" / "kernels" / "relu.cu"
    assert "132 * 16" in solution.read_text()
    evaluations = read_transcript(out / "transcript.jsonl").of_type(EvaluationEvent)
    assert [e.source for e in evaluations] == ["verify", "profile", "profile", "submit"]
    assert all(e.result["compile"]["ok"] for e in evaluations)

    # The standalone file builds with torch alone (no kernel-agent on the path) and defines ModelNew.
    env = {
        "PATH": os.environ["PATH"],
        "CUDA_HOME": find_toolkit().cuda_home,
        "TORCH_CUDA_ARCH_LIST": "9.0",
        "KERNEL_AGENT_STANDALONE_DIR": str(tmp_path / "standalone-build"),
    }
    check = (
        "import importlib.util, sys; spec = importlib.util.spec_from_file_location('m', sys.argv[1]); "
        "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); "
        "print(type(m.ModelNew()).__name__, m.cuda_extension.relu_forward.__doc__.splitlines()[0])"
    )
    proc = subprocess.run(
        [sys.executable, "-I", "-c", check, str(out / "model_new.py")],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().startswith("ModelNew relu_forward(")


FUSED_SOLUTION = REPO / "benchmarks" / "solutions" / "level2" / "2_Scale_Bias_Sigmoid_Residual"
FUSED_TASK = REPO / "benchmarks" / "tasks" / "level2" / "2_Scale_Bias_Sigmoid_Residual.py"
VECTOR_CHECK = "const bool vec = plane_size % 4 == 0 &&"
FUSED_PLAN = SessionPlan(
    files={
        **solution_files(FUSED_SOLUTION),
        "kernels/scale_bias_sigmoid.cu": (FUSED_SOLUTION / "kernels" / "scale_bias_sigmoid.cu")
        .read_text()
        .replace(VECTOR_CHECK, "const bool vec = false && plane_size % 4 == 0 &&"),
    },
    typo=(
        "kernels/scale_bias_sigmoid.cu",
        "const float t = v * s + b;",
        "const float t = v * s + bias_value;",
    ),
    revision=[
        ("kernels/scale_bias_sigmoid.cu", "const bool vec = false && plane_size % 4 == 0 &&", VECTOR_CHECK),
    ],
)


ARTIFACTS_ENV = "KERNEL_AGENT_GPU_ARTIFACTS"
RUN_FILES = ("transcript.jsonl", "result.json", "report.md", "model_new.py", "run.json")


def _keep(out: Path, name: str, *extra: str) -> None:
    """Copy a run's files to $KERNEL_AGENT_GPU_ARTIFACTS/name (nothing when it is unset)."""
    folder = os.environ.get(ARTIFACTS_ENV)
    if not folder:
        return
    dest = Path(folder) / name
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    for file in (*RUN_FILES, *extra):
        if (out / file).is_file():
            shutil.copy2(out / file, dest / file)


def _write_replay_report(report: ReplayReport, folder: Path) -> None:
    from rich.console import Console

    from agent.cli.transcripts import print_report

    (folder / "replay.json").write_text(report.model_dump_json(indent=2))
    with (folder / "replay.txt").open("w") as text:
        print_report(report, Console(file=text, width=200, color_system=None))


@pytest.mark.gpu
def test_pipeline_session_end_to_end_on_the_gpu_then_replayed(tmp_path: Path) -> None:
    task = load_task(FUSED_TASK)
    referee = RefereeAdapter(EvalOptions(policy="strict"))
    limits = UNLIMITED.model_copy(update={"gpu": 1800.0})
    out = tmp_path / "scripted"
    result, model = run_solve(out, pipeline_steps(FUSED_PLAN), task, referee=referee, limits=limits)
    _keep(out, "2_Scale_Bias_Sigmoid_Residual-scripted")
    model.assert_complete()
    results = results_by_call(out)
    assert results["compile_1"].is_error and "bias_value" in results["compile_1"].content
    assert results["verify_1"].content.startswith("VERDICT: correct"), results["verify_1"].content
    assert result.status == "submitted" and result.verified, result.message
    best = json.loads((out / "result.json").read_text())
    assert best["verdict"] == "correct"
    assert best["performance"]["speedup_vs_eager"]["outcome"] == "faster", best["performance"]
    assert result.best is not None and result.best.speedup is not None and result.best.speedup > 1.5

    # What `agent replay` does: the recorded turns through the loop again, the real referee, the
    # recorded configuration; then every tool result compared with the recording.
    replayed_out = tmp_path / "replayed"
    report = replay_run(out / "transcript.jsonl", out=replayed_out)
    _write_replay_report(report, replayed_out)
    _keep(replayed_out, "2_Scale_Bias_Sigmoid_Residual-replayed", "replay.json", "replay.txt")
    assert report.recorded_gpu == report.replay_gpu
    assert report.replay_status == "submitted", report.summary()
    replayed = json.loads((replayed_out / "run.json").read_text())
    assert replayed["verified"] and replayed["best"]["speedup"] > 1.5, replayed
    assert not report.diverged, (replayed_out / "replay.txt").read_text()


@pytest.mark.gpu
def test_relu_session_with_the_real_referee(tmp_path: Path) -> None:
    plan = SessionPlan(
        files=solution_files(RELU_EXAMPLE), typo=RELU_PLAN.typo, revision=RELU_PLAN.revision[:1]
    )
    result, _ = run_solve(
        tmp_path / "out",
        pipeline_steps(plan),
        load_task(RELU_TASK),
        referee=RefereeAdapter(EvalOptions(policy="strict")),
        limits=UNLIMITED.model_copy(update={"gpu": 1800.0}),
    )
    assert result.status == "submitted" and result.verified, result.message
    assert result.best is not None and result.best.speedup is not None
