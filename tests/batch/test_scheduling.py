"""Scheduling on one machine with fake evaluations (real worker processes pinned per GPU, the real
GPU gates) and the scripted model: several evaluations per GPU with exclusive timings, the docker
fallback, failures that do not stop the batch, provider outages that pause the agents instead of
burning through tasks."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from agent.batch.config import WorkItem
from agent.batch.executors.local import LocalEvaluator
from agent.batch.fakes import scripted_solver
from agent.batch.runner import BatchRunner, interleave_levels
from agent.batch.scheduler import NO_GPU, CircuitBreaker, GpuPool
from agent.batch.store import Store
from agent.messages import Usage
from agent.models.base import ModelError
from agent.models.scripted import ScriptedModel, text_turn
from agent.tasks import Task
from tests.batch.helpers import (
    assert_timings_exclusive,
    fake_config,
    fake_evaluator,
    fake_model_new,
    make_tasks,
    make_workspace_solution,
    most_at_once,
    read_log,
)


def overlap(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return a["start"] < b["end"] and b["start"] < a["end"]


@pytest.mark.slow
def test_evaluations_share_each_gpu_but_their_timings_never_overlap(
    tmp_path: Path, evaluator: LocalEvaluator
) -> None:
    names = [f"{i}_T{i}" for i in range(1, 13)]
    tasks = make_tasks(tmp_path / "tasks", {1: names})
    for name in names:
        spec = {"speedup_eager": 1.1, "judge_s": 0.6, "timing_s": 0.15}
        make_workspace_solution(tmp_path / "sols", 1, name, spec)
    log = tmp_path / "log.jsonl"
    config = fake_config(tmp_path, tasks, tmp_path / "sols", concurrency=8, extra={"log": str(log)})
    summary = BatchRunner(config, evaluator=evaluator).run()
    assert summary.counts == {"correct": 12}
    entries = read_log(log)
    assert len(entries) == 12
    assert_timings_exclusive(entries)
    assert most_at_once(entries) == {"0": 2, "1": 2}  # two slots per GPU, both used, never more
    assert all(e["gpu"] == e["gpu_arg"] for e in entries)  # the worker process is pinned to its GPU
    assert {e["gate"] for e in entries} == {str(evaluator.lock_dir / f"gpu-{g}.lock") for g in "01"}
    assert any(overlap(a, b) for a in entries for b in entries if a["gpu"] != b["gpu"]), (
        "GPUs never ran together"
    )
    # Eight in flight for four slots: some waited for one, and the store says how long.
    with sqlite3.connect(config.store) as db:
        queued = [
            json.loads(r)["stage_times"]["judge_queue_s"]
            for (r,) in db.execute("SELECT result_json FROM evaluations")
        ]
    assert len(queued) == 12 and max(queued) > 0.3
    idle = {"compiling": 0, "waiting_gpu": 0, "judging": 0, "on gpu 0": 0, "on gpu 1": 0}
    assert evaluator.activity() == idle


def test_the_exclusivity_checks_themselves_catch_an_overlap() -> None:
    spans = [
        {"gpu": "0", "start": 0.0, "end": 2.0, "timing_start": 1.0, "timing_end": 2.0},
        {"gpu": "0", "start": 0.5, "end": 3.0, "timing_start": 1.5, "timing_end": 3.0},
    ]
    with pytest.raises(AssertionError, match="overlaps"):
        assert_timings_exclusive(spans)
    with pytest.raises(AssertionError, match="overlaps"):
        assert_timings_exclusive(spans, start="start")
    assert most_at_once(spans) == {"0": 2}
    assert most_at_once([{**spans[0], "end": 0.5}, spans[1]]) == {"0": 1}  # touching is not overlapping


def test_the_pool_spreads_over_gpus_and_never_exceeds_its_slots() -> None:
    pool = GpuPool(["0", "1"], slots_per_gpu=3)
    lock = threading.Lock()
    held: dict[str, set[int]] = {"0": set(), "1": set()}
    peaks = {"0": 0, "1": 0, "all": 0}

    def use() -> None:
        with pool.acquire("x") as slot:
            with lock:
                assert slot.index not in held[slot.gpu], "one slot given out twice"
                held[slot.gpu].add(slot.index)
                peaks[slot.gpu] = max(peaks[slot.gpu], len(held[slot.gpu]))
                peaks["all"] = max(peaks["all"], len(held["0"]) + len(held["1"]))
            time.sleep(0.2)
            with lock:
                held[slot.gpu].discard(slot.index)

    threads = [threading.Thread(target=use) for _ in range(14)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert peaks == {"0": 3, "1": 3, "all": 6}
    assert pool.busy == {"0": {}, "1": {}}
    assert GpuPool([], slots_per_gpu=4).gpus == [NO_GPU]
    assert GpuPool([], slots_per_gpu=4).slots_per_gpu == 1  # no GPU: CPU-device judging never overlaps


@pytest.mark.slow
def test_two_batches_on_one_machine_never_time_at_once(tmp_path: Path, evaluator: LocalEvaluator) -> None:
    """A second batch (its own evaluator and workers, the same gate folder) on GPU 0, beside one on
    GPUs 0 and 1: the timed sections on GPU 0 of both exclude each other."""
    logs = [tmp_path / "a.jsonl", tmp_path / "b.jsonl"]
    configs = []
    for n, log in enumerate(logs):
        names = [f"{i}_T{i}" for i in range(1, 7)]
        tasks = make_tasks(tmp_path / f"tasks{n}", {1: names})
        for name in names:
            spec = {"speedup_eager": 1.1, "judge_s": 0.5, "timing_s": 0.15}
            make_workspace_solution(tmp_path / f"sols{n}", 1, name, spec)
        configs.append(
            fake_config(
                tmp_path / f"b{n}", tasks, tmp_path / f"sols{n}", concurrency=4, extra={"log": str(log)}
            )
        )
    other = fake_evaluator(configs[1].model_copy(update={"gpus": ["0"], "gpu_lock_dir": evaluator.lock_dir}))
    try:
        warm = tmp_path / "warm"
        make_workspace_solution(warm / "sols", 1, "1_W", {"speedup_eager": 1.0})
        make_workspace_solution(warm / "sols", 1, "1_W__again", {"speedup_eager": 1.0})
        warm_up = fake_config(warm, make_tasks(warm / "tasks", {1: ["1_W"]}), warm / "sols", concurrency=2)
        assert BatchRunner(warm_up, evaluator=other).run().counts == {"correct": 2}  # both workers started
        summaries: list[Any] = []
        threads = [
            threading.Thread(target=lambda c=c, e=e: summaries.append(BatchRunner(c, evaluator=e).run()))
            for c, e in ((configs[0], evaluator), (configs[1], other))
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        other.close()
    assert [s.counts for s in summaries] == [{"correct": 6}, {"correct": 6}]
    first, second = read_log(logs[0]), read_log(logs[1])
    assert {e["gpu"] for e in second} == {"0"}
    on_zero = [e for e in first if e["gpu"] == "0"]
    assert any(overlap(a, b) for a in on_zero for b in second), "the two batches never shared GPU 0"
    assert_timings_exclusive(first + second)


@pytest.mark.slow
def test_docker_shares_a_gpu_like_local_and_the_referee_gets_the_gate(tmp_path: Path) -> None:
    """Docker containers see the gate folder (mounted read-only: tests/sandbox/test_docker_gpu.py),
    so a GPU gets its --evals-per-gpu slots as with the local sandbox, and timings stay exclusive."""
    names = [f"{i}_T{i}" for i in range(1, 5)]
    tasks = make_tasks(tmp_path / "tasks", {1: names})
    for name in names:
        make_workspace_solution(tmp_path / "sols", 1, name, {"speedup_eager": 1.1, "judge_s": 0.3})
    log = tmp_path / "log.jsonl"
    config = fake_config(
        tmp_path, tasks, tmp_path / "sols", gpus=["0"], evals_per_gpu=4, concurrency=4,
        extra={"log": str(log)},
    )  # fmt: skip
    config = config.model_copy(update={"eval": config.eval.model_copy(update={"sandbox": "docker"})})
    docker = fake_evaluator(config)
    try:
        assert isinstance(docker, LocalEvaluator) and docker.evals_per_gpu == 4
        assert docker.referee_gates and len(docker.workers["0"]) == 4
        summary = BatchRunner(config, evaluator=docker).run()
    finally:
        docker.close()
    assert summary.counts == {"correct": 4}
    entries = read_log(log)
    assert [e["gate"] for e in entries] == [str(tmp_path / "gpu-locks" / "gpu-0.lock")] * 4
    assert_timings_exclusive(entries)


@pytest.mark.slow
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


@pytest.mark.slow
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
    assert_timings_exclusive(read_log(log))


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

    from agent.batch.progress import LiveProgress
    from agent.batch.records import AttemptRecord
    from agent.tasks import load_folder

    (task,) = load_folder(make_tasks(tmp_path / "tasks", {1: ["1_A"]}), instantiate=False)[0]
    buffer = io.StringIO()
    progress = LiveProgress(Console(file=buffer, width=120, force_terminal=True))
    progress.start(3, "batch test")
    item = WorkItem(task=task, candidate="v[2]")
    progress.begin(item)
    progress.end(item, AttemptRecord(status="error", error="Traceback\nRuntimeError: boom", usd=1.25))
    progress.begin(WorkItem(task=task, candidate="base"))
    progress.stop()
    text = buffer.getvalue()
    assert "1/3 done" in text and "1 errors" in text and "$1.25" in text and "L1 1_A" in text


def test_the_fake_judge_resolves_auto_to_the_referees_gate_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agent.batch.fakes import _open_gate

    monkeypatch.setenv("KERNEL_AGENT_CACHE", str(tmp_path))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")  # a worker pinned to physical GPU 3
    with _open_gate("auto", "3") as gate:
        assert gate is not None and gate.path == str(tmp_path / "harness" / "gpu-locks" / "gpu-3.lock")
    with _open_gate("auto", None) as gate:
        assert gate is None  # no GPU, no gate
    with _open_gate(None, "3") as gate:
        assert gate is None  # the caller holds the GPU


def test_levels_start_interleaved_highest_level_first_each_in_its_own_order() -> None:
    def item(level: int | None, name: str) -> WorkItem:
        task = Task(path=Path(f"{name}.py"), name=name, level=level, sha256="0" * 64)
        return WorkItem(task=task, candidate="base")

    items = [item(1, "a1"), item(1, "b1"), item(1, "c1"), item(2, "a2"), item(3, "a3"), item(3, "b3")]
    items.append(item(None, "loose"))
    order = [i.task.name for i in interleave_levels(items)]
    assert order == ["a3", "a2", "a1", "loose", "b3", "b1", "c1"]
    assert sorted(order) == sorted(i.task.name for i in items)  # nothing lost or doubled
