"""Rows of the store as the report reads them, and the columns an evaluation is stored with."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Any

from agent.referee.results import EvalResult


@dataclass(frozen=True)
class AttemptRecord:
    """One attempt as the report reads it, with its final evaluation's key numbers."""

    attempt_id: int
    run_id: int
    batch_key: str
    item_key: str
    task_key: str
    task_name: str
    level: int | None
    problem_id: int | None
    candidate: str
    status: str
    verdict: str | None
    compiled: bool
    correct: bool
    speedup_eager: float | None
    speedup_compile: float | None
    tokens: int
    usd: float
    gpu_s: float
    wall_s: float
    compile_s: float
    error: str | None
    solution_path: str | None
    transcript_path: str | None
    output_dir: str | None
    flags: tuple[str, ...] = ()
    """the codes of the final evaluation's performance flags (HACK_FLAGS among them mark a speed
    that is not the candidate's own)"""
    started_at: float = 0.0
    """when the attempt was claimed (epoch seconds)"""


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


def _flag_codes(flags_json: str | None) -> tuple[str, ...]:
    try:
        flags = json.loads(flags_json) if flags_json else []
    except ValueError:
        return ()
    return tuple(str(f["code"]) for f in flags if isinstance(f, dict) and "code" in f)
