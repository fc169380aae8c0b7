"""The timing procedure's settings and what it measured (sandbox/workers/gpu/timing.py)."""

from __future__ import annotations

from typing import TypedDict


class TimingSettings(TypedDict, total=False):
    """timing.TimingConfig as JSON (its to_dict / from_dict); a missing key takes the default."""

    warmup_ms: float
    min_warmup: int
    target_ms: float
    min_reps: int
    max_reps: int
    max_seconds: float
    blocking_sync: bool


class TimingRecord(TypedDict):
    """What timing.time_calls measured (timing.summarize); agent.referee.results.TimingStats reads it."""

    median_ms: float
    q1_ms: float
    q3_ms: float
    iqr_ms: float
    mean_ms: float
    std_ms: float
    cv: float
    min_ms: float
    max_ms: float
    n: int
    warmup: int
    method: str
    l2_flush: bool
    host_median_ms: float
    window_ms: float | None
    held_outputs: bool
    persisting_l2_reset: bool
    sync_gap_ms: float | None
    reference_gap_ms: float | None
    other_streams_ms: float
    version: int
