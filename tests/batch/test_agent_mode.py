"""Agent mode through the real agent (agent.run.solve) with the scripted model: its verify and submit
go through the batch's GPU slots, and its run lands in the store with tokens, dollars and the
transcript."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.batch.agent_runs import solve_runner
from agent.batch.config import WorkItem
from agent.batch.executors.local import LocalEvaluator
from agent.batch.runner import BatchRunner
from agent.batch.scheduler import CircuitBreaker
from agent.batch.store import Store
from agent.messages import Usage
from agent.models.base import ModelError
from agent.models.scripted import ScriptedModel, tool_call_turn
from tests.batch.helpers import assert_timings_exclusive, fake_config, fake_model_new, make_tasks, read_log


def session(spec: dict[str, object]) -> ScriptedModel:
    return ScriptedModel(
        [
            tool_call_turn("write_file", {"path": "model_new.py", "content": fake_model_new(spec)}),
            tool_call_turn("verify"),
            tool_call_turn("submit", {"summary": "fake kernels"}),
        ],
        usage=Usage(input_tokens=900, output_tokens=100),
        cost_usd=0.5,
    )


@pytest.mark.slow
def test_agent_solve_runs_under_the_batch(tmp_path: Path, evaluator: LocalEvaluator) -> None:
    tasks = make_tasks(tmp_path / "tasks", {1: ["1_A", "2_B"]})
    specs = {"1_A": {"speedup_eager": 1.6, "speedup_compile": 1.2}, "2_B": {"speedup_eager": 0.8}}
    models: dict[str, ScriptedModel] = {}

    def model_for(item: WorkItem) -> ScriptedModel:
        models[item.task.name] = session(specs[item.task.name])
        return models[item.task.name]

    log = tmp_path / "log.jsonl"
    config = fake_config(
        tmp_path, tasks, None, model="openai:scripted", concurrency=2, extra={"log": str(log)},
        solve_options={"budget": "turns=10"},
    )  # fmt: skip
    summary = BatchRunner(
        config, evaluator=evaluator, task_runner=solve_runner, model_factory=model_for
    ).run()
    assert summary.counts == {"correct": 2}, summary
    for model in models.values():
        model.assert_complete()
    with Store(config.store) as store:
        results = {r.task_name: r for r in store.results()}
        attempts = store.attempts()
        intermediate = store.evaluations(results["1_A"].attempt_id, role="intermediate")
    a = results["1_A"]
    assert a.speedup_eager == 1.6 and a.tokens == 3000 and a.usd == 1.5
    assert a.transcript_path and Path(a.transcript_path).is_file()
    assert a.solution_path and (Path(a.solution_path) / "model_new.py").is_file()
    assert len(intermediate) == 1 and intermediate[0].verdict == "correct"  # the verify before submit
    assert len(attempts) == 2
    entries = read_log(log)
    assert len(entries) == 4  # verify + submit of each run, all through the GPU slots
    assert_timings_exclusive(entries)


def test_an_outage_inside_the_agent_loop_is_retried_not_recorded(
    tmp_path: Path, evaluator: LocalEvaluator
) -> None:
    """The loop turns a ModelError into status model_error; the batch still sees it was an outage."""
    tasks = make_tasks(tmp_path / "tasks", {1: ["1_A"]})
    outage = ModelError("overloaded", provider="fake", status_code=529, transient=True)
    model = session({"speedup_eager": 1.1})
    model.steps.insert(0, outage)
    config = fake_config(tmp_path, tasks, None, model="openai:scripted")
    breaker = CircuitBreaker(base_s=0.2)
    summary = BatchRunner(
        config,
        evaluator=evaluator,
        task_runner=solve_runner,
        model_factory=lambda item: model,
        breaker=breaker,
    ).run()
    assert summary.counts == {"correct": 1}
    model.assert_complete()
    assert breaker.trips == 1
    with Store(config.store) as store:
        (rec,) = store.results()
    # the first run's folder is kept beside the retry's
    assert Path(rec.transcript_path or "").parent.name.endswith("-retry1")


def test_a_run_the_referee_cut_short_is_redone_not_recorded_as_its_best(
    tmp_path: Path, evaluator: LocalEvaluator
) -> None:
    """The agent verified a candidate, then the referee failed (not the agent's fault) and the run
    aborted: its best so far was verified but never timed. The attempt is an error, redone on the
    next run, not a finished task with an untimed result."""
    tasks = make_tasks(tmp_path / "tasks", {1: ["1_A"]})
    model = ScriptedModel(
        [
            tool_call_turn("write_file", {"path": "model_new.py", "content": fake_model_new({})}),
            tool_call_turn("verify"),
            tool_call_turn(
                "write_file",
                {"path": "model_new.py", "content": fake_model_new({"verdict": "referee_error"})},
            ),
            tool_call_turn("profile"),
        ]
    )
    config = fake_config(tmp_path, tasks, None, model="openai:scripted")
    BatchRunner(config, evaluator=evaluator, task_runner=solve_runner, model_factory=lambda item: model).run()
    model.assert_complete()
    with Store(config.store) as store:
        (attempt,) = store.attempts()
    assert attempt.status == "error" and "referee_error" in (attempt.error or "")
