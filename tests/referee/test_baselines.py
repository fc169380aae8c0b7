"""The baseline cache (keyed by everything that changes a timing) and what one evaluation takes
from it: eager timed fresh, torch.compile cached and rescaled by eager's drift."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.referee.baselines import BaselineCache, BaselineKey, Baselines
from agent.referee.models import TimingStats

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
    method="cuda_event+device_sync",
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


def plan(cache: BaselineCache, *, refresh: bool = False) -> Baselines:
    return Baselines.plan(
        cache,
        task_sha256="t",
        input_spec="s",
        gpu="H200",
        torch="2.11",
        compile_mode="default",
        timing="v1",
        refresh=refresh,
        configured_bandwidth=1000.0,
    )


def timed(median_ms: float) -> dict:
    return STATS.scaled(median_ms / STATS.median_ms).model_dump()


def test_eager_is_timed_every_time_and_compile_once(tmp_path: Path) -> None:
    cache = BaselineCache(tmp_path / "b.json")
    first = plan(cache)
    assert first.request(measure_bandwidth=True)["baselines"] == {"eager": True, "compile_mode": "default"}
    first.resolve({"baselines": {"eager": timed(1.0), "compile": timed(0.8)}})
    assert first.stats["compile"] is not None and not first.stats["compile"].cached

    second = plan(cache)
    assert second.request(measure_bandwidth=True)["baselines"] == {"eager": True, "compile_mode": None}
    second.resolve({"baselines": {"eager": timed(1.1)}})  # the machine runs 10% slower now
    eager, compiled = second.stats["eager"], second.stats["compile"]
    assert eager is not None and not eager.cached and eager.median_ms == pytest.approx(1.1)
    assert compiled is not None and compiled.cached and compiled.rescaled_by == pytest.approx(1.1)
    assert compiled.median_ms == pytest.approx(0.88)  # torch.compile stays 1.25x over eager
    assert compiled.iqr_ms == pytest.approx(STATS.iqr_ms * 0.88)

    assert plan(cache, refresh=True).request(measure_bandwidth=True)["baselines"]["compile_mode"] == "default"


def test_without_a_fresh_eager_the_cached_compile_is_not_rescaled(tmp_path: Path) -> None:
    cache = BaselineCache(tmp_path / "b.json")
    plan(cache).resolve({"baselines": {"eager": timed(1.0), "compile": timed(0.8)}})
    failed = plan(cache)
    failed.resolve({"baselines": {"eager": {"error": "RuntimeError: boom"}}})
    assert failed.stats["eager"] is None and failed.errors == {"eager": "RuntimeError: boom"}
    compiled = failed.stats["compile"]
    assert compiled is not None and compiled.rescaled_by is None and compiled.median_ms == pytest.approx(0.8)


def test_a_compile_entry_without_its_eager_pair_is_timed_again(tmp_path: Path) -> None:
    cache = BaselineCache(tmp_path / "b.json")
    baselines = plan(cache)
    cache.put(baselines.keys["compile"], stats=STATS)  # as cached before eager was paired
    assert plan(cache).request(measure_bandwidth=True)["baselines"]["compile_mode"] == "default"
