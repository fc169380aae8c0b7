"""benchmarks/templates_table.py: the template tables count a correct candidate carrying a hack flag
(a GEMM that is cuBLAS alone, an implausible speedup) as correct but never as faster, and "faster"
is the referee's noise-aware call, not the raw ratio."""

from __future__ import annotations

from typing import Any

from benchmarks import templates_table as tt


def result(
    verdict: str, eager: float, compile_: float, *, flags: tuple[str, ...] = (), outcome: str = "faster"
) -> dict[str, Any]:
    def speedup(value: float) -> dict[str, Any]:
        return {"value": value, "outcome": outcome if value > 1 else "slower"}

    return {
        "verdict": verdict,
        "performance": {
            "flags": [{"code": f, "message": ""} for f in flags],
            "speedup_vs_eager": speedup(eager),
            "speedup_vs_compile": speedup(compile_),
            "candidate": {"median_ms": 2.0},
            "memory_floor_ms": 1.0,
        },
    }


def row(family: str, data: dict[str, Any]) -> tt.TaskRow:
    r = tt.TaskRow(level=1, name=f"1_{family}", family=family, finished=True, evaluations=2)
    tt.fill(r, data)
    return r


def test_hack_flags_and_noise_never_count_as_faster() -> None:
    clean = row("elementwise", result("correct", 1.5, 1.2))
    library_only = row("gemm", result("correct", 1.5, 1.2, flags=("own_kernels_never_ran",)))
    within_noise = row("reduction", result("correct", 1.01, 1.01, outcome="within_noise"))
    stream_note = row("softmax", result("correct", 1.3, 1.1, flags=("other_streams_time",)))
    assert clean.faster_compile and clean.floor_share == 0.5
    assert library_only.correct and not library_only.clean and not library_only.faster_compile
    assert within_noise.clean and not within_noise.faster_compile
    assert stream_note.clean and stream_note.faster_compile  # not a hack flag: its time is already added

    table = "\n".join(tt.family_table([clean, library_only, within_noise, stream_note]))
    assert "| gemm | 1 | 1 | 1 | 0 | 1 (own_kernels_never_ran) | 0 (0%) |" in table
    assert "| elementwise | 1 | 1 | 1 | 1 | 0 | 1 (100%) | 1.20x |" in table

    levels = tt.level_table([clean, library_only, within_noise, stream_note], [1], {1: 100})[2]
    cells = [c.strip() for c in levels.strip("|").split("|")]
    # 4 finished, all correct, 3 without a hack flag. fast_1 vs compile (KernelBench's raw ratio):
    # 3 of 4, the flagged GEMM's 1.2x not among them; beyond noise: 2 of 4.
    assert cells[:6] == ["1", "100", "4", "4", "4", "3"]
    assert cells[6 + 5 + 1] == "75%" and cells[16] == "50%"


def test_a_resumed_batch_counts_each_task_once(tmp_path) -> None:
    """A batch resumed after its machine went away holds the killed run's `abandoned` attempts
    beside the ones that redid them: the table counts the redone attempt, once, and a task still
    running when the store was copied by its latest attempt."""
    from agent.batch.config import WorkItem
    from agent.batch.records import AttemptRecord
    from agent.batch.store import Store
    from agent.tasks import load_folder
    from tests.batch.helpers import fake_config, make_tasks

    root = make_tasks(tmp_path / "tasks", {1: ["1_A", "2_B", "3_C"]})
    tasks, _ = load_folder(root, instantiate=False)
    a, b, c = (WorkItem(task=t, candidate="sample_0") for t in tasks)
    config = fake_config(tmp_path, root, tmp_path / "sols")
    path = tmp_path / "store.sqlite"
    with Store(path) as store:
        store.add_tasks(tasks)
        first = store.start_run(config, versions={}, gpus=[])
        for item in (a, b, c):
            claim = store.claim(first, "k", item)
            assert claim is not None
            if item is a:
                store.finish_attempt(claim.attempt_id, AttemptRecord(status="done", wall_s=1.0))
        store.abandon_running(first, "the machine went away")  # b and c were in flight
        second = store.start_run(config, versions={}, gpus=[])
        redo = store.claim(second, "k", b)
        assert redo is not None
        store.finish_attempt(redo.attempt_id, AttemptRecord(status="done", wall_s=2.0))
    with Store(path, readonly=True) as store:
        counted = [(r.task_name, r.status, r.wall_s) for r in tt.counted_attempts(store)]
    assert counted == [("1_A", "done", 1.0), ("3_C", "abandoned", 0.0), ("2_B", "done", 2.0)]


def test_a_rerun_replaces_the_tasks_it_finished_and_no_others() -> None:
    """Rows of a later store (a rerun of some tasks) replace the first store's for the tasks it
    finished; a task it left unfinished keeps its earlier result, and each row says its run."""
    first = [
        row("pooling", result("correct", 1.2, 0.9)),
        tt.TaskRow(level=1, name="2_softmax", family="softmax", finished=True),
        tt.TaskRow(level=1, name="3_reduction", family="reduction", finished=True),
    ]
    rerun_pool = row("pooling", result("correct", 2.0, 1.6))
    rerun_softmax = tt.TaskRow(level=1, name="2_softmax", family="softmax", finished=False)
    merged = {r.name: r for r in tt.merge_runs([first, [rerun_pool, rerun_softmax]])}
    assert len(merged) == 3
    assert merged["1_pooling"] is rerun_pool and merged["1_pooling"].run == 2
    assert merged["1_pooling"].faster_compile
    assert merged["2_softmax"].finished and merged["2_softmax"].run == 1
    assert merged["3_reduction"].run == 1
