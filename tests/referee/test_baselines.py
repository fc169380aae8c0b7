"""The baseline cache: keyed by everything that changes a timing."""

from __future__ import annotations

from pathlib import Path

from agent.referee.baselines import BaselineCache, BaselineKey
from agent.referee.results import TimingStats

STATS = TimingStats(
    median_ms=1.0,
    q1_ms=0.9,
    q3_ms=1.1,
    iqr_ms=0.2,
    mean_ms=1.0,
    std_ms=0.1,
    cv=0.1,
    min_ms=0.8,
    max_ms=1.5,
    n=100,
    warmup=5,
    method="cuda_event_stream_end+sync_gap",
    l2_flush=True,
    host_median_ms=1.05,
)


def key(**changes: str) -> BaselineKey:
    fields = {
        "task_sha256": "t",
        "input_spec": "s",
        "gpu": "H200",
        "torch": "2.11",
        "arm": "eager",
        "timing": "v1",
    }
    return BaselineKey(**(fields | changes))


def test_put_then_get_round_trips(tmp_path: Path) -> None:
    cache = BaselineCache(tmp_path / "b.json")
    assert cache.get(key()) is None
    cache.put(key(), stats=STATS)
    entry = cache.get(key())
    assert entry is not None and entry.stats == STATS and entry.recorded_at
    assert BaselineCache(tmp_path / "b.json").get(key()) is not None  # persisted


def test_any_key_field_makes_a_different_entry(tmp_path: Path) -> None:
    cache = BaselineCache(tmp_path / "b.json")
    cache.put(key(), stats=STATS)
    for field, value in [
        ("gpu", "H100"),
        ("torch", "2.14"),
        ("arm", "compile:default"),
        ("task_sha256", "u"),
        ("input_spec", "other"),
        ("timing", "v2"),
    ]:
        assert cache.get(key(**{field: value})) is None, field
    cache.put(key(arm="bandwidth"), value=4000.0)
    assert cache.get(key(arm="bandwidth")).value == 4000.0  # type: ignore[union-attr]
    assert len(cache) == 2


def test_a_corrupt_file_reads_as_empty(tmp_path: Path) -> None:
    path = tmp_path / "b.json"
    path.write_text("{not json")
    cache = BaselineCache(path)
    assert cache.get(key()) is None
    cache.put(key(), stats=STATS)
    assert cache.get(key()) is not None
