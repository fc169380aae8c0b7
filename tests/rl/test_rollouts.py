"""Many rollouts at once (agent/rl/rollouts.py): identical candidates judged once, and scripted
rollouts of two tasks on a local Ray instance (this CPU machine, one logical GPU) with the batch's
fake compile and judge, every rollout's transcript and outcome written and its attempt in the store."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.batch.config import JudgingOptions
from agent.batch.store import Store
from agent.models.scripted import ScriptedModel, text_turn, tool_call_turn
from agent.referee.options import EvalOptions
from agent.referee.results import EvalResult, SolutionRef, TaskRef
from agent.rl.rollouts import OUTCOME, TRANSCRIPT, DedupReferee, converse, run_rollouts
from agent.rl.session import KernelSession, RolloutConfig, RolloutOutcome
from agent.tasks import Task, load_task
from agent.transcripts.format import ToolResultEvent
from agent.transcripts.reader import read_transcript
from agent.workspace import Workspace
from tests.batch.helpers import fake_model_new, local_ray_evaluator, make_tasks


class CountingReferee:
    """Answers after a pause (so identical candidates overlap), counting what it judged."""

    def __init__(self, fail_first: bool = False) -> None:
        self.judged: list[tuple[str, bool]] = []
        self.fail_first = fail_first
        self._lock = threading.Lock()

    def device(self) -> str | None:
        return "counting"

    def evaluate(self, task: Task, workspace: Workspace, *, sandbox: Any, profile: bool) -> EvalResult:
        time.sleep(0.2)
        with self._lock:
            self.judged.append((workspace.content_hash(), profile))
            if self.fail_first and len(self.judged) == 1:
                raise RuntimeError("the evaluator broke")
        return EvalResult(
            task=TaskRef.of(task),
            solution=SolutionRef(
                kind="workspace", content_hash=workspace.content_hash(), path=str(workspace.root)
            ),
            policy="strict",
            verdict="correct",
            reason="counted",
            compile={  # type: ignore[arg-type]
                "ok": True,
                "status": "built",
                "solution_kind": "workspace",
                "content_hash": workspace.content_hash(),
                "arch": "9.0",
                "arch_source": "test",
                "build_dir": "/nonexistent",
                "duration_s": 0.0,
            },
        )


def workspaces(tmp_path: Path, task: Task, sources: list[str]) -> list[Workspace]:
    made = []
    for index, source in enumerate(sources):
        ws = Workspace.create(tmp_path / f"ws{index}", task)
        (ws.root / "model_new.py").write_text(source)
        made.append(ws)
    return made


def judge_all(referee: DedupReferee, task: Task, spaces: list[Workspace], profile: bool = True) -> list[Any]:
    results: list[Any] = [None] * len(spaces)

    def one(index: int) -> None:
        try:
            results[index] = referee.evaluate(task, spaces[index], sandbox=None, profile=profile)  # type: ignore[arg-type]
        except Exception as exc:
            results[index] = exc

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(spaces))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


@pytest.fixture
def task(tmp_path: Path) -> Task:
    root = make_tasks(tmp_path / "tasks", {1: ["1_Relu"]})
    return load_task(root / "level1" / "1_Relu.py", instantiate=False)


def test_identical_candidates_arriving_together_are_judged_once(tmp_path: Path, task: Task) -> None:
    inner = CountingReferee()
    referee = DedupReferee(inner)
    spaces = workspaces(tmp_path, task, ["# same\n"] * 4 + ["# other\n"])
    results = judge_all(referee, task, spaces)
    assert len(inner.judged) == 2 and (referee.judged, referee.reused) == (2, 3)
    assert all(r.verdict == "correct" for r in results)
    assert [r.solution.path for r in results] == [str(ws.root) for ws in spaces]  # each its own copy
    judge_all(referee, task, spaces[:1], profile=False)  # untimed is another question
    assert len(inner.judged) == 3


def test_a_failed_evaluation_is_not_kept(tmp_path: Path, task: Task) -> None:
    inner = CountingReferee(fail_first=True)
    referee = DedupReferee(inner)
    (space,) = workspaces(tmp_path, task, ["# same\n"])
    with pytest.raises(RuntimeError, match="broke"):
        referee.evaluate(task, space, sandbox=None, profile=True)  # type: ignore[arg-type]
    assert referee.evaluate(task, space, sandbox=None, profile=True).verdict == "correct"  # type: ignore[arg-type]
    assert len(inner.judged) == 2


def test_a_rollout_runs_the_agent_loop_over_its_session(tmp_path: Path, task: Task) -> None:
    config = RolloutConfig(referee=EvalOptions(arch="9.0"))
    session = KernelSession.open(task, root=tmp_path / "r", referee=CountingReferee(), config=config)
    model = ScriptedModel(
        [tool_call_turn("write_file", {"path": "binding.cpp", "content": "x"}), text_turn("done")]
    )
    converse(session, model, tmp_path / TRANSCRIPT)
    outcome = session.finish()
    transcript = read_transcript(tmp_path / TRANSCRIPT)
    (result,) = [e for e in transcript.events if isinstance(e, ToolResultEvent)]
    assert result.is_error and result.content.startswith("ERROR: ")  # what the verifiers env shows
    assert transcript.run_end is not None and transcript.run_end.status == "model_stopped"
    assert outcome.status == "stopped" and not outcome.failed


def test_a_model_that_raises_is_a_failed_sample(tmp_path: Path, task: Task) -> None:
    config = RolloutConfig(referee=EvalOptions(arch="9.0"))
    session = KernelSession.open(task, root=tmp_path / "r", referee=CountingReferee(), config=config)
    converse(session, ScriptedModel([RuntimeError("the policy broke")]), tmp_path / TRANSCRIPT)
    outcome = session.finish()
    assert outcome.failed and "the policy broke" in outcome.reason
    run_end = read_transcript(tmp_path / TRANSCRIPT).run_end
    assert run_end is not None and run_end.status == "error"


ray = pytest.importorskip("ray", reason="ray is not installed: pip install 'kernel-agent[ray]'")


@pytest.fixture(scope="module")
def ray_evaluator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    # one logical GPU: Ray schedules the judges on it
    with local_ray_evaluator(tmp_path_factory.mktemp("ray-gates"), num_cpus=4, num_gpus=1) as evaluator:
        yield evaluator


def scripted(task: Task) -> ScriptedModel:
    """Writes the task's fake solution (the same in every rollout of a task), times it, submits."""
    faster = "Relu" in task.name  # faster than both baselines: reward 1; slower: correct only, 1/3
    speedups = {"speedup_eager": 1.5, "speedup_compile": 1.2} if faster else {"speedup_eager": 0.8}
    source = fake_model_new({"verdict": "correct", **speedups, "judge_s": 0.1})
    return ScriptedModel(
        [
            tool_call_turn("write_file", {"path": "model_new.py", "content": source}),
            tool_call_turn("profile", {}),
            tool_call_turn("submit", {"summary": "a fake solution"}),
            text_turn("unused after the submission"),
        ],
        name="scripted",
    )


@pytest.mark.slow
def test_rollouts_on_ray_are_judged_once_per_candidate_and_recorded(
    tmp_path: Path, ray_evaluator: Any
) -> None:
    root = make_tasks(tmp_path / "tasks", {1: ["1_Relu", "2_Tanh"]})
    tasks = [load_task(root / "level1" / f"{name}.py", instantiate=False) for name in ("1_Relu", "2_Tanh")]
    report = run_rollouts(
        tasks,
        scripted,
        samples=3,
        concurrency=4,
        evaluator=ray_evaluator,
        options=JudgingOptions(arch="9.0"),
        out=tmp_path / "out",
    )
    assert len(report.rollouts) == 6 and report.skipped == 0
    assert report.judged == 2  # one candidate per task: profile judged it, every other call reused it
    assert report.reused == 6 * 2 - 2
    rewards = {r.task.split("@")[0]: r.outcome.reward.reward for r in report.rollouts}
    assert rewards == {"level1/1_Relu": 1.0, "level1/2_Tanh": pytest.approx(1 / 3)}
    for record in report.rollouts:
        assert record.outcome.status == "submitted" and not record.outcome.failed
        transcript = read_transcript(Path(record.transcript))
        assert (
            transcript.ended and transcript.run_end is not None and transcript.run_end.status == "submitted"
        )
        outcome = RolloutOutcome.model_validate_json((Path(record.transcript).parent / OUTCOME).read_text())
        assert outcome.reward.reward == record.outcome.reward.reward
    with Store(Path(report.store), readonly=True) as store:
        attempts = store.attempts()
    assert len(attempts) == 6 and {a.status for a in attempts} == {"done"}
    assert {a.verdict for a in attempts} == {"correct"}
    # a rerun resumes: every rollout is done already
    again = run_rollouts(
        tasks,
        scripted,
        samples=3,
        concurrency=4,
        evaluator=ray_evaluator,
        options=JudgingOptions(arch="9.0"),
        out=tmp_path / "out",
    )
    assert (len(again.rollouts), again.skipped) == (0, 6)
