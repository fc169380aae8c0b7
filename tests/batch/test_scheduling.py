"""Scheduling on one machine with fake evaluations (real worker processes pinned per GPU) and the
scripted model: GPU exclusivity, failures that do not stop the batch, provider outages that pause
the agents instead of burning through tasks."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from agent.batch.executors.local import LocalEvaluator
from agent.batch.fakes import scripted_solver
from agent.batch.models import WorkItem
from agent.batch.runner import BatchRunner
from agent.batch.scheduler import CircuitBreaker, GpuPool
from agent.batch.store import Store
from agent.messages import Usage
from agent.models.base import ModelError
from agent.models.scripted import ScriptedModel, text_turn
from tests.batch.helpers import (
    assert_gpu_exclusive,
    fake_config,
    fake_model_new,
    make_tasks,
    make_workspace_solution,
    read_log,
)


def overlap(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return a["start"] < b["end"] and b["start"] < a["end"]


def test_no_two_evaluations_overlap_on_one_gpu_and_both_gpus_work(
    tmp_path: Path, evaluator: LocalEvaluator
) -> None:
    names = [f"{i}_T{i}" for i in range(1, 11)]
    tasks = make_tasks(tmp_path / "tasks", {1: names})
    for name in names:
        make_workspace_solution(tmp_path / "sols", 1, name, {"speedup_eager": 1.1, "judge_s": 0.4})
    log = tmp_path / "log.jsonl"
    config = fake_config(tmp_path, tasks, tmp_path / "sols", concurrency=6, extra={"log": str(log)})
    summary = BatchRunner(config, evaluator=evaluator).run()
    assert summary.counts == {"correct": 10}
    entries = read_log(log)
    assert len(entries) == 10
    assert_gpu_exclusive(entries)
    assert {e["gpu"] for e in entries} == {"0", "1"}
    assert all(e["gpu"] == e["gpu_arg"] for e in entries)  # the worker process is pinned to its GPU
    assert any(overlap(a, b) for a in entries for b in entries if a["gpu"] != b["gpu"]), (
        "GPUs never ran together"
    )


def test_the_exclusivity_check_itself_catches_an_overlap() -> None:
    with pytest.raises(AssertionError, match="overlaps"):
        assert_gpu_exclusive([{"gpu": "0", "start": 0.0, "end": 2.0}, {"gpu": "0", "start": 1.0, "end": 3.0}])


def test_two_pools_on_one_machine_share_the_gpu_lock(tmp_path: Path) -> None:
    """Two batches (two pools, one lock folder) never hold GPU 0 at the same time."""
    spans: list[dict[str, Any]] = []
    pools = [GpuPool(["0"], lock_dir=tmp_path), GpuPool(["0"], lock_dir=tmp_path)]

    def use(pool: GpuPool) -> None:
        for _ in range(3):
            with pool.acquire() as gpu:
                start = time.time()
                time.sleep(0.05)
                spans.append({"gpu": gpu, "start": start, "end": time.time()})

    threads = [threading.Thread(target=use, args=(p,)) for p in pools for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(spans) == 12
    assert_gpu_exclusive(spans)


def test_failures_are_recorded_and_the_batch_goes_on(tmp_path: Path, evaluator: LocalEvaluator) -> None:
    specs = {
        "1_Raise": {"crash": "raise"},
        "2_Exit": {"crash": "exit"},  # the worker process dies; the next evaluation gets a new one
        "3_Hang": {"crash": "hang"},
        "4_NoBuild": {"compile": "error"},
        "5_Wrong": {"verdict": "incorrect"},
        "6_Good": {"speedup_eager": 1.4},
        "7_Good": {"speedup_eager": 0.9},
    }
    tasks = make_tasks(tmp_path / "tasks", {1: list(specs)})
    for name, spec in specs.items():
        make_workspace_solution(tmp_path / "sols", 1, name, spec)
    config = fake_config(tmp_path, tasks, tmp_path / "sols", concurrency=2)
    evaluator.eval_timeout_s = 8
    try:
        summary = BatchRunner(config, evaluator=evaluator).run()
        with Store(config.store) as store:
            by_task = {r.task_name: r for r in store.results()}
        assert summary.counts == {"error": 3, "compile_error": 1, "incorrect": 1, "correct": 2}
        assert "fake judge crashed" in (by_task["1_Raise"].error or "")
        assert "died" in (by_task["2_Exit"].error or "")
        assert "ran past 8s" in (by_task["3_Hang"].error or "")
        assert by_task["6_Good"].speedup_eager == 1.4 and by_task["7_Good"].correct

        # A rerun retries only the errors; the recorded verdicts stay as they are.
        again = BatchRunner(config, evaluator=evaluator).run()
        assert again.skipped == 4
        with Store(config.store) as store:
            attempts = store.attempts()
        assert sum(a.task_name == "6_Good" for a in attempts) == 1
        assert sum(a.task_name == "1_Raise" for a in attempts) == 2
    finally:
        evaluator.eval_timeout_s = 3600


def scripted(text: str, *extra: Any, tokens: int = 1000, usd: float = 0.25) -> ScriptedModel:
    return ScriptedModel(
        [*extra, text_turn(text)], usage=Usage(input_tokens=tokens - 100, output_tokens=100), cost_usd=usd
    )


def test_agent_mode_with_the_scripted_model(tmp_path: Path, evaluator: LocalEvaluator) -> None:
    tasks = make_tasks(tmp_path / "tasks", {1: ["1_A", "2_B"], 2: ["1_C"]})
    log = tmp_path / "log.jsonl"
    replies = {
        "1_A": fake_model_new({"speedup_eager": 1.8, "speedup_compile": 1.1}),
        "2_B": fake_model_new({"verdict": "incorrect"}),
        "1_C": fake_model_new({"speedup_eager": 0.7}),
    }
    models: dict[str, ScriptedModel] = {}

    def model_for(item: WorkItem) -> ScriptedModel:
        models[item.task.name] = scripted(replies[item.task.name])
        return models[item.task.name]

    config = fake_config(tmp_path, tasks, None, concurrency=3, extra={"log": str(log)})
    summary = BatchRunner(
        config, evaluator=evaluator, task_runner=scripted_solver, model_factory=model_for
    ).run()
    assert summary.counts == {"correct": 2, "incorrect": 1}
    for model in models.values():
        model.assert_complete()
    with Store(config.store) as store:
        results = {r.task_name: r for r in store.results()}
    assert results["1_A"].tokens == 1000 and results["1_A"].usd == 0.25
    assert results["1_A"].speedup_eager == 1.8 and results["1_A"].speedup_compile == 1.1
    assert results["1_A"].solution_path and Path(results["1_A"].solution_path).is_dir()
    assert_gpu_exclusive(read_log(log))


def test_a_provider_outage_pauses_every_agent_then_the_task_is_retried(
    tmp_path: Path, evaluator: LocalEvaluator
) -> None:
    tasks = make_tasks(tmp_path / "tasks", {1: ["1_A", "2_B", "3_C"]})
    calls: list[tuple[float, str]] = []
    outage = ModelError("503 overloaded", provider="fake", status_code=503, transient=True)

    def model_for(item: WorkItem) -> Any:
        reply = fake_model_new({"speedup_eager": 1.2})
        steps: list[Any] = [outage, text_turn(reply)] if item.task.name == "1_A" else [text_turn(reply)]
        model = ScriptedModel(steps)
        real_query = model.query

        def query(*args: Any, **kwargs: Any) -> Any:
            calls.append((time.monotonic(), item.task.name))
            return real_query(*args, **kwargs)

        model.query = query  # type: ignore[method-assign]
        return model

    breaker = CircuitBreaker(base_s=1.5)
    config = fake_config(tmp_path, tasks, None, concurrency=1)
    summary = BatchRunner(
        config, evaluator=evaluator, task_runner=scripted_solver, model_factory=model_for, breaker=breaker
    ).run()
    assert summary.counts == {"correct": 3}
    assert breaker.trips == 1
    first_failure = calls[0][0]
    assert calls[0][1] == "1_A"
    assert all(t - first_failure >= 1.4 for t, _ in calls[1:]), (
        "a model call went out while the breaker was open"
    )


def test_a_lasting_outage_is_an_error_that_the_next_run_redoes(
    tmp_path: Path, evaluator: LocalEvaluator
) -> None:
    tasks = make_tasks(tmp_path / "tasks", {1: ["1_A"]})
    down = ModelError("connection refused", provider="fake", transient=True)
    config = fake_config(tmp_path, tasks, None, max_outage_retries=1)
    summary = BatchRunner(
        config,
        evaluator=evaluator,
        task_runner=scripted_solver,
        model_factory=lambda item: ScriptedModel([down, down]),
        breaker=CircuitBreaker(base_s=0.1),
    ).run()
    assert summary.counts == {"error": 1}
    with Store(config.store) as store:
        (rec,) = store.results()
    assert rec.status == "error" and "provider outage" in (rec.error or "")
    reply = fake_model_new({"speedup_eager": 1.3})
    later = BatchRunner(
        config,
        evaluator=evaluator,
        task_runner=scripted_solver,
        model_factory=lambda item: ScriptedModel([text_turn(reply)]),
    ).run()
    assert later.counts == {"correct": 1}


def test_circuit_breaker_backoff_doubles_caps_and_resets() -> None:
    now = [0.0]
    breaker = CircuitBreaker(base_s=10, max_s=35, clock=lambda: now[0])
    error = ModelError("429", provider="fake", transient=True)
    assert breaker.trip(error) == 10
    now[0] = 5
    assert breaker.trip(error) == 5  # the same outage seen by a second agent: no escalation
    now[0] = 11
    assert breaker.open_for == 0
    assert breaker.trip(error) == 20
    now[0] = 40
    assert breaker.trip(error) == 35  # capped
    breaker.success()
    now[0] = 100
    assert breaker.trip(error) == 10
    assert breaker.trips == 4


def test_redo_reruns_only_the_chosen_tasks(tmp_path: Path, evaluator: LocalEvaluator) -> None:
    names = ["1_A", "2_B", "3_C"]
    tasks = make_tasks(tmp_path / "tasks", {1: names})
    for name in names:
        make_workspace_solution(tmp_path / "sols", 1, name, {"speedup_eager": 1.1})
    log = tmp_path / "log.jsonl"
    config = fake_config(tmp_path, tasks, tmp_path / "sols", extra={"log": str(log)})
    assert BatchRunner(config, evaluator=evaluator).run().counts == {"correct": 3}
    again = BatchRunner(config.model_copy(update={"redo": ["level1/2_*"]}), evaluator=evaluator).run()
    assert again.skipped == 2 and again.counts == {"correct": 1}
    judged = [Path(e["solution"]).parts[-4] for e in read_log(log)]
    assert sorted(judged) == ["1_A", "2_B", "2_B", "3_C"]
    with Store(config.store) as store:
        assert [a.status for a in store.attempts() if a.task_name == "2_B"] == ["superseded", "done"]


def test_live_display_renders(tmp_path: Path) -> None:
    import io

    from rich.console import Console

    from agent.batch.models import AttemptOutcome
    from agent.batch.progress import LiveProgress
    from agent.tasks import load_folder

    (task,) = load_folder(make_tasks(tmp_path / "tasks", {1: ["1_A"]}), instantiate=False)[0]
    buffer = io.StringIO()
    progress = LiveProgress(Console(file=buffer, width=120, force_terminal=True))
    progress.start(3, "batch test")
    item = WorkItem(task=task, candidate="v[2]")
    progress.begin(item)
    progress.end(item, AttemptOutcome(status="error", error="Traceback\nRuntimeError: boom", usd=1.25))
    progress.begin(WorkItem(task=task, candidate="base"))
    progress.stop()
    text = buffer.getvalue()
    assert "1/3 done" in text and "1 errors" in text and "$1.25" in text and "L1 1_A" in text
