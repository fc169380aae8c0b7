"""The results store: schema migrations, claiming and resuming, two writers, and a batch killed
with kill -9 that a rerun finishes without losing or redoing anything recorded."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agent.batch.config import BatchConfig, EvalJob, JudgingOptions, WorkItem
from agent.batch.fakes import fake_compile, fake_result
from agent.batch.migrations import MIGRATIONS
from agent.batch.records import AttemptRecord
from agent.batch.store import Store, StoreError
from agent.tasks import load_folder
from tests.batch.helpers import REPO, fake_config, make_tasks, make_workspace_solution, read_log


@pytest.fixture
def items(tmp_path: Path) -> list[WorkItem]:
    root = make_tasks(tmp_path / "tasks", {1: ["1_A", "2_B", "3_C"]})
    tasks, _ = load_folder(root, instantiate=False)
    return [WorkItem(task=t, candidate="base") for t in tasks]


def config(tmp_path: Path) -> BatchConfig:
    return fake_config(tmp_path, tmp_path / "tasks", tmp_path / "sols")


def done(item: WorkItem, verdict: str = "correct") -> AttemptRecord:
    job = EvalJob(task=item.task, solution=item.task.path, options=JudgingOptions())
    result = fake_result(job, fake_compile(job), {"verdict": verdict, "speedup_eager": 1.5})
    return AttemptRecord(status="done", result=result, tokens=10, usd=0.5, wall_s=1.0)


def test_schema_is_migrated_once_and_newer_schemas_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    with Store(path) as store:
        assert store.schema_version == len(MIGRATIONS)
    with Store(path) as store:  # reopening applies nothing twice
        assert store.schema_version == len(MIGRATIONS)
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"runs", "tasks", "attempts", "evaluations"} <= tables
    db.execute(f"PRAGMA user_version = {len(MIGRATIONS) + 1}")
    db.commit()
    db.close()
    with pytest.raises(StoreError, match="newer than this kernel-agent"):
        Store(path)


def test_claim_skips_done_items_and_retries_errors(tmp_path: Path, items: list[WorkItem]) -> None:
    cfg = config(tmp_path)
    with Store(tmp_path / "s.sqlite") as store:
        run = store.start_run(cfg, versions={}, gpus=[])
        store.add_tasks([i.task for i in items])
        a, b, c = items
        claim_a = store.claim(run, "k", a)
        assert claim_a is not None
        assert store.claim(run, "k", a) is None  # running, and its owner (us) is alive
        store.finish_attempt(claim_a.attempt_id, done(a))
        assert store.claim(run, "k", a) is None  # done
        assert store.claim(run, "other-batch", a) is not None  # another batch key is other work

        claim_b = store.claim(run, "k", b)
        assert claim_b is not None
        store.finish_attempt(claim_b.attempt_id, AttemptRecord(status="error", error="boom"))
        assert store.claim(run, "k", b, retry_errors=False) is None
        retry = store.claim(run, "k", b)
        assert retry is not None and retry.attempt_id != claim_b.attempt_id

        results = {r.item_key: r for r in store.results("k")}
        assert results[a.item_key].verdict == "correct" and results[a.item_key].usd == 0.5
        assert results[a.item_key].speedup_eager == 1.5
        assert results[b.item_key].status == "error"  # the retry is still running
        assert c.item_key not in results
        assert store.evaluations(claim_a.attempt_id)[0].verdict == "correct"


def test_a_running_attempt_of_a_dead_process_is_abandoned_and_redone(
    tmp_path: Path, items: list[WorkItem]
) -> None:
    cfg = config(tmp_path)
    path = tmp_path / "s.sqlite"
    with Store(path) as store:
        dead_run = store.start_run(cfg, versions={}, gpus=[])
        store.add_tasks([i.task for i in items])
        stale = store.claim(dead_run, "k", items[0])
        assert stale is not None
        store.set_output_dir(stale.attempt_id, tmp_path / "stale-dir")
    proc = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    dead_pid = int(proc.stdout)
    db = sqlite3.connect(path)
    db.execute("UPDATE runs SET owner = ? WHERE id = ?", (f"{socket.gethostname()}:{dead_pid}:1", dead_run))
    db.commit()
    db.close()
    with Store(path) as store:
        run = store.start_run(cfg, versions={}, gpus=[])
        claim = store.claim(run, "k", items[0])
        assert claim is not None and claim.stale_output_dirs == [str(tmp_path / "stale-dir")]
        assert store.attempt_status(stale.attempt_id) == "abandoned"
        # the dead process's late write (impossible, but) cannot resurrect the abandoned row
        store.finish_attempt(stale.attempt_id, done(items[0]))
        assert store.attempt_status(stale.attempt_id) == "abandoned"


def test_redo_supersedes_finished_attempts(tmp_path: Path, items: list[WorkItem]) -> None:
    cfg = config(tmp_path)
    with Store(tmp_path / "s.sqlite") as store:
        run = store.start_run(cfg, versions={}, gpus=[])
        store.add_tasks([i.task for i in items])
        first = store.claim(run, "k", items[0])
        assert first is not None
        store.finish_attempt(first.attempt_id, done(items[0], "incorrect"))
        assert store.supersede("k", [items[0].item_key]) == 1
        second = store.claim(run, "k", items[0])
        assert second is not None
        store.finish_attempt(second.attempt_id, done(items[0]))
        (result,) = store.results("k")
        assert result.attempt_id == second.attempt_id and result.verdict == "correct"
        assert [a.status for a in store.attempts("k")] == ["superseded", "done"]


WRITER = """
import sys, time
from pathlib import Path
from agent.batch.store import Store
from tests.batch.test_store import writer_main
writer_main(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3])
"""


def writer_main(tmp: Path, go: Path, name: str) -> None:
    """Claims every item of 40 it can and finishes it, racing another process on one store."""
    from agent.tasks import Task

    cfg = fake_config(tmp, tmp / "tasks", tmp / "sols")
    while not go.exists():
        time.sleep(0.01)
    with Store(tmp / "shared.sqlite", busy_timeout_s=60) as store:
        run = store.start_run(cfg, versions={"writer": name}, gpus=[])
        tasks = [
            Task(path=tmp / f"t{i}.py", name=f"t{i}", level=1, problem_id=i, sha256=f"{i:064d}")
            for i in range(40)
        ]
        store.add_tasks(tasks)
        for task in tasks:
            item = WorkItem(task=task, candidate="base")
            claim = store.claim(run, "k", item)
            if claim is not None:
                store.finish_attempt(claim.attempt_id, done(item))


@pytest.mark.slow
def test_two_writer_processes_share_a_store_without_corruption(tmp_path: Path) -> None:
    go = tmp_path / "go"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(tmp_path), str(go), name],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("w1", "w2")
    ]
    time.sleep(1.0)
    go.touch()
    for proc in procs:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
    with Store(tmp_path / "shared.sqlite") as store:
        assert store.integrity_check() == "ok"
        attempts = store.attempts("k")
        assert len(attempts) == 40 and all(a.status == "done" for a in attempts)
        assert len({a.item_key for a in attempts}) == 40  # nothing done twice
        assert len(store.runs()) == 2


@pytest.mark.slow
def test_kill_minus_9_mid_batch_then_resume_finishes_only_the_rest(tmp_path: Path) -> None:
    names = [f"{i}_T{i}" for i in range(1, 9)]
    tasks = make_tasks(tmp_path / "tasks", {1: names})
    sols = tmp_path / "sols"
    for name in names:
        make_workspace_solution(sols, 1, name, {"speedup_eager": 1.2, "judge_s": 1.0})
    spec_path = tmp_path / "batch.json"

    def launch(log: str) -> subprocess.Popen[str]:
        # one worker process per GPU: this is about the store, and every worker imports torch
        cfg = fake_config(
            tmp_path, tasks, sols, concurrency=2, evals_per_gpu=1, extra={"log": str(tmp_path / log)}
        )
        spec_path.write_text(json.dumps({"config": json.loads(cfg.model_dump_json())}))
        return subprocess.Popen(
            [sys.executable, "-m", "tests.batch.helpers", str(spec_path)],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # its worker processes die with it
        )

    store_path = tmp_path / "out" / "store.sqlite"
    first = launch("run1.jsonl")
    deadline = time.monotonic() + 240
    statuses: list[str] = []
    while time.monotonic() < deadline:
        if store_path.exists():
            db = sqlite3.connect(store_path, timeout=30)
            with contextlib.suppress(sqlite3.OperationalError):  # not migrated yet
                statuses = [r[0] for r in db.execute("SELECT status FROM attempts")]
            db.close()
            if statuses.count("done") >= 2 and "running" in statuses:
                break
        assert first.poll() is None, first.communicate()[1]
        time.sleep(0.05)
    else:
        pytest.fail(f"the batch never got going: {statuses}")
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()

    with Store(store_path) as store:
        assert store.integrity_check() == "ok"
        before = {a.item_key: a for a in store.attempts()}
    done_before = {k for k, a in before.items() if a.status == "done"}
    running_before = {k for k, a in before.items() if a.status == "running"}
    assert done_before and running_before and len(done_before) < len(names)

    second = launch("run2.jsonl")
    out, err = second.communicate(timeout=300)
    assert second.returncode == 0, err
    assert json.loads(out.splitlines()[-1])["skipped"] == len(done_before)

    with Store(store_path) as store:
        attempts = store.attempts()
        results = store.results()
    assert len(results) == len(names) and all(r.status == "done" for r in results)
    for rec in results:  # what was recorded before the kill is what counts, untouched
        if rec.item_key in done_before:
            assert rec.attempt_id == before[rec.item_key].attempt_id
    abandoned = {a.item_key for a in attempts if a.status == "abandoned"}
    assert abandoned == running_before
    done_names = {before[k].task_name for k in done_before}
    judged_again = {Path(e["solution"]).parts[-4] for e in read_log(tmp_path / "run2.jsonl")}
    assert judged_again == set(names) - done_names


def test_a_store_from_an_older_kernel_agent_is_reported_as_it_is(tmp_path: Path) -> None:
    """The store of the 2026-12-03 H200 batch (schema 2: before region runs and precision columns):
    `agent report` reads it through the current schema, and the file is left at its own version."""
    import gzip
    import sqlite3

    from agent.batch.report import build_reports

    saved = Path(__file__).resolve().parents[2] / "benchmarks/results/h200-2026-12-03d/store.sqlite.gz"
    path = tmp_path / "store.sqlite"
    path.write_bytes(gzip.decompress(saved.read_bytes()))
    (report,) = build_reports(path)
    assert (report.per_candidate.n, report.per_candidate.correct) == (70, 70)
    assert report.regions == {}
    with Store(path, readonly=True) as store:
        ids = [r[0] for r in store._db.execute("SELECT DISTINCT attempt_id FROM evaluations")]
        judged = [e for i in ids for e in store.evaluations(i)]
    assert len(judged) == 70 and {e.verdict for e in judged} == {"correct"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["store.sqlite"]  # no -wal, no -shm
    untouched = sqlite3.connect(f"{path.as_uri()}?mode=ro&immutable=1", uri=True)
    assert untouched.execute("PRAGMA user_version").fetchone()[0] == 2
