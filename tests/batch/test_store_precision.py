"""The store records the precision policy each evaluation was judged under and the precision the
judge measured (docs/precision.md), in columns a report can group by."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from agent.batch.config import EvalJob, JudgingOptions, WorkItem
from agent.batch.fakes import fake_compile, fake_result
from agent.batch.records import AttemptRecord
from agent.batch.store import Store
from agent.referee.results import PrecisionReport
from agent.tasks import load_folder
from tests.batch.helpers import fake_config, make_tasks


def test_an_evaluations_precision_and_measured_class_are_columns(tmp_path: Path) -> None:
    tasks, _ = load_folder(make_tasks(tmp_path / "tasks", {1: ["1_A", "2_B"]}), instantiate=False)
    judged, legacy = (WorkItem(task=t, candidate="base") for t in tasks)
    with Store(tmp_path / "s.sqlite") as store:
        run = store.start_run(
            fake_config(tmp_path, tmp_path / "tasks", tmp_path / "sols"), versions={}, gpus=[]
        )
        store.add_tasks(tasks)
        for item, precision, check in (
            (judged, "tf32", PrecisionReport(policy="tf32", measured="tf32", baseline_precision="tf32")),
            (legacy, None, None),  # a result from before precision policies
        ):
            job = EvalJob(task=item.task, solution=item.task.path, options=JudgingOptions())
            result = fake_result(job, fake_compile(job), {"verdict": "correct", "speedup_eager": 1.2})
            result = result.model_copy(update={"precision": precision, "precision_check": check})
            claim = store.claim(run, "k", item)
            assert claim is not None
            store.finish_attempt(claim.attempt_id, AttemptRecord(status="done", result=result))
    with sqlite3.connect(tmp_path / "s.sqlite") as db:
        rows = db.execute("SELECT precision, measured_precision FROM evaluations ORDER BY id").fetchall()
    assert rows == [("tf32", "tf32"), (None, None)]
