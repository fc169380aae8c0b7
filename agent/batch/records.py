"""The store's rows as pydantic models: an attempt (as the runner writes it and the report reads it
back) and a run, plus the columns an evaluation is stored with."""

from __future__ import annotations

import json
import sqlite3
from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

from agent.referee.results import EvalResult
from agent.run.region_records import RegionRun

AttemptStatus = Literal["running", "done", "error", "abandoned", "superseded"]
"""done: a result (any verdict, or an agent run that found nothing); error: the harness or a provider
failed (redone on the next run); abandoned: its process died; superseded: `--redo` replaced it."""


class AttemptRecord(BaseModel):
    """One attempt: how it ended and what it spent, as the runner hands it to `Store.finish_attempt`,
    and as `Store.attempts` reads it back with its final evaluation's key numbers and the store's own
    fields (ids, task, when). A record built from a `result` takes those numbers from it; one read back
    has them from the evaluation's columns, and `result`/`evaluations` stay empty (`Store.evaluations`
    reads them)."""

    status: AttemptStatus
    result: EvalResult | None = None
    """the final evaluation (written; not read back)"""
    evaluations: list[EvalResult] = Field(default_factory=list, description="besides `result` (written)")
    tokens: int = 0
    usd: float = 0.0
    gpu_s: float = 0.0
    wall_s: float = 0.0
    solution_path: str | None = None
    transcript_path: str | None = None
    error: str | None = None
    regions: RegionRun | None = Field(default=None, description="a region-by-region run's regions (written)")

    # the final evaluation's key numbers
    verdict: str | None = None
    compiled: bool = False
    correct: bool = False
    speedup_eager: float | None = None
    speedup_compile: float | None = None
    compile_s: float = 0.0
    flags: tuple[str, ...] = ()
    """the codes of the final evaluation's performance flags (HACK_FLAGS among them mark a speed
    that is not the candidate's own)"""

    # the store's own (read back)
    attempt_id: int = 0
    run_id: int = 0
    batch_key: str = ""
    item_key: str = ""
    task_key: str = ""
    task_name: str = ""
    level: int | None = None
    problem_id: int | None = None
    candidate: str = ""
    output_dir: str | None = None
    started_at: float = 0.0
    """when the attempt was claimed (epoch seconds)"""

    @model_validator(mode="after")
    def _numbers_from_result(self) -> AttemptRecord:
        if self.result is not None:
            columns = evaluation_columns(self.result)
            self.verdict = self.result.verdict
            self.compiled, self.correct = bool(columns[2]), bool(columns[3])
            self.speedup_eager, self.speedup_compile = columns[4], columns[5]
            self.compile_s = self.result.stage_times.compile_s
            perf = self.result.performance
            self.flags = tuple(f.code for f in perf.flags) if perf else ()
        return self


class RunRecord(BaseModel):
    """One `agent batch` invocation on the store: its config (as JSON, from whichever version wrote
    it), the versions and GPUs it ran with, and whether it is still alive."""

    id: int
    batch_key: str
    mode: str
    config: dict[str, Any]
    versions: dict[str, Any]
    gpus: list[dict[str, Any]]
    load_errors: list[str]
    host: str
    pid: int
    owner: str
    status: str
    started_at: float
    heartbeat_at: float
    finished_at: float | None = None


def evaluation_columns(result: EvalResult) -> tuple[Any, ...]:
    perf = result.performance
    eager = perf.speedup_vs_eager.value if perf and perf.speedup_vs_eager else None
    compiled = perf.speedup_vs_compile.value if perf and perf.speedup_vs_compile else None
    times = result.stage_times
    return (
        result.verdict,
        result.reason,
        int(result.compile.ok),
        int(result.verdict == "correct"),
        eager,
        compiled,
        times.candidate_s + times.judge_s,
        times.compile_s,
        times.total_s,
        result.device.name if result.device else None,
        result.model_dump_json(),
        result.precision,
        result.precision_check.measured if result.precision_check else None,
    )


def record_from_row(row: sqlite3.Row) -> AttemptRecord:
    return AttemptRecord(
        attempt_id=row["id"],
        run_id=row["run_id"],
        batch_key=row["batch_key"],
        item_key=row["item_key"],
        task_key=row["task_key"],
        task_name=row["task_name"],
        level=row["level"],
        problem_id=row["problem_id"],
        candidate=row["candidate"],
        status=row["status"],
        verdict=row["verdict"],
        compiled=bool(row["compiled"]),
        correct=bool(row["correct"]),
        speedup_eager=row["speedup_eager"],
        speedup_compile=row["speedup_compile"],
        tokens=row["tokens"] or 0,
        usd=row["usd"] or 0.0,
        gpu_s=row["gpu_s"] or 0.0,
        wall_s=row["wall_s"] or 0.0,
        compile_s=row["compile_s"] or 0.0,
        error=row["error"],
        solution_path=row["solution_path"],
        transcript_path=row["transcript_path"],
        output_dir=row["output_dir"],
        flags=_flag_codes(row["flags_json"]),
        started_at=row["started_at"],
    )


def run_from_row(row: sqlite3.Row) -> RunRecord:
    return RunRecord(
        id=row["id"],
        batch_key=row["batch_key"],
        mode=row["mode"],
        config=json.loads(row["config_json"] or "{}"),
        versions=json.loads(row["versions_json"] or "{}"),
        gpus=json.loads(row["gpus_json"] or "[]"),
        load_errors=json.loads(row["load_errors_json"] or "[]"),
        host=row["host"],
        pid=row["pid"],
        owner=row["owner"],
        status=row["status"],
        started_at=row["started_at"],
        heartbeat_at=row["heartbeat_at"],
        finished_at=row["finished_at"],
    )


def _flag_codes(flags_json: str | None) -> tuple[str, ...]:
    try:
        flags = json.loads(flags_json) if flags_json else []
    except ValueError:
        return ()
    return tuple(str(f["code"]) for f in flags if isinstance(f, dict) and "code" in f)
