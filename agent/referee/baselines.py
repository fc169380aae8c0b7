"""The baselines of one evaluation: eager timed fresh, torch.compile from a cache.

Eager is re-timed in every evaluation, by the judge right after the candidate, so the speedup
vs eager compares two timings of the same minute: a machine that drifts (clocks, host latency,
both seen on the H200) moves both alike. torch.compile costs seconds to tens of seconds to
build, so a batch times it once: its cache entry keeps the eager median timed back to back with
it, and later evaluations scale the cached time by how far eager has drifted since
(`TimingStats.rescaled_by`). The speedup vs torch.compile is therefore the paired speedup vs
eager times torch.compile's speedup over eager, each a ratio of timings taken back to back.

One JSON file under agent.paths.cache_dir(); entries are keyed by the task's content hash,
its input spec, the GPU, the torch version, the arm (compile with its mode, or the copy
bandwidth) and the timing procedure's version and settings. Writers hold an exclusive lock;
`--refresh-baselines` re-times and overwrites.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel

from agent.paths import cache_dir
from agent.referee.models import TimingStats


class BaselineKey(BaseModel):
    task_sha256: str
    input_spec: str
    gpu: str
    torch: str
    arm: str  # "compile:<mode>" | "bandwidth"
    timing: str

    def digest(self) -> str:
        return hashlib.sha256(self.model_dump_json().encode()).hexdigest()


class BaselineEntry(BaseModel):
    key: BaselineKey
    stats: TimingStats | None = None
    eager_median_ms: float | None = None  # eager, timed back to back with these stats
    value: float | None = None
    recorded_at: str


class BaselineCache:
    def __init__(self, path: Path | None = None) -> None:
        self.path = Path(path) if path is not None else cache_dir() / "referee" / "baselines.json"

    def get(self, key: BaselineKey) -> BaselineEntry | None:
        entry = self._read().get(key.digest())
        if entry is None:
            return None
        try:
            return BaselineEntry.model_validate(entry)
        except ValueError:
            return None

    def put(
        self,
        key: BaselineKey,
        *,
        stats: TimingStats | None = None,
        eager_median_ms: float | None = None,
        value: float | None = None,
    ) -> None:
        entry = BaselineEntry(
            key=key,
            stats=stats,
            eager_median_ms=eager_median_ms,
            value=value,
            recorded_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        )
        with self._locked():
            entries = self._read()
            entries[key.digest()] = entry.model_dump(mode="json")
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps(entries, indent=1, sort_keys=True))
            tmp.replace(self.path)

    def __len__(self) -> int:
        return len(self._read())

    def _read(self) -> dict:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path.with_suffix(".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)


@dataclass
class Baselines:
    """What the judge must time for one evaluation, and the numbers once it did."""

    cache: BaselineCache
    keys: dict[str, BaselineKey]
    cached: dict[str, BaselineEntry | None]
    compile_mode: str | None
    configured_bandwidth: float | None = None
    stats: dict[str, TimingStats | None] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    bandwidth: float | None = None
    bandwidth_source: str | None = None

    @classmethod
    def plan(
        cls,
        cache: BaselineCache,
        *,
        task_sha256: str,
        input_spec: str,
        gpu: str,
        torch: str,
        compile_mode: str | None,
        timing: str,
        refresh: bool,
        configured_bandwidth: float | None,
    ) -> Baselines:
        common = {
            "task_sha256": task_sha256,
            "input_spec": input_spec,
            "gpu": gpu,
            "torch": torch,
            "timing": timing,
        }
        keys = {
            "compile": BaselineKey(arm=f"compile:{compile_mode}", **common),
            "bandwidth": BaselineKey(
                arm="bandwidth", task_sha256="", input_spec="", gpu=gpu, torch=torch, timing=""
            ),
        }
        cached = {arm: None if refresh else cache.get(key) for arm, key in keys.items()}
        if cached["compile"] is not None and not cached["compile"].eager_median_ms:
            cached["compile"] = None  # from before eager was paired: nothing to rescale it by
        return cls(cache, keys, cached, compile_mode, configured_bandwidth)

    def request(self, *, measure_bandwidth: bool) -> dict[str, object]:
        """The judge spec's part: which arms to time (eager always, the others when not cached)."""
        return {
            "baselines": {
                "eager": True,
                "compile_mode": self.compile_mode if self.cached["compile"] is None else None,
            },
            "measure_bandwidth": measure_bandwidth
            and self.configured_bandwidth is None
            and self.cached["bandwidth"] is None,
        }

    def resolve(self, judged: dict) -> None:
        """Take the judge's fresh numbers (and cache a fresh torch.compile), or the cached one."""
        fresh = judged.get("baselines") or {}
        eager = self._measured("eager", fresh.get("eager"))
        self.stats["eager"] = eager
        self.stats["compile"] = None
        measured = self._measured("compile", fresh.get("compile"))
        entry = self.cached.get("compile")
        if measured is not None:
            self.stats["compile"] = measured
            self.cache.put(
                self.keys["compile"], stats=measured, eager_median_ms=eager.median_ms if eager else None
            )
        elif entry is not None and entry.stats is not None:
            self.stats["compile"] = rescaled(entry, eager)
        if self.configured_bandwidth:
            self.bandwidth, self.bandwidth_source = self.configured_bandwidth, "configured"
        elif self.cached["bandwidth"] is not None:
            self.bandwidth, self.bandwidth_source = self.cached["bandwidth"].value, "measured"
        elif judged.get("bandwidth_gbps"):
            self.bandwidth, self.bandwidth_source = float(judged["bandwidth_gbps"]), "measured"
            self.cache.put(self.keys["bandwidth"], value=self.bandwidth)

    def _measured(self, arm: str, record: object) -> TimingStats | None:
        if isinstance(record, dict) and "error" in record:
            self.errors[arm] = str(record["error"])
        elif isinstance(record, dict) and record:
            return TimingStats.model_validate(record)
        return None


def rescaled(entry: BaselineEntry, eager_now: TimingStats | None) -> TimingStats:
    """The cached torch.compile timing as it would read now: scaled by eager's drift since it was
    cached (unscaled when either eager time is missing)."""
    assert entry.stats is not None
    stats = entry.stats.model_copy(update={"cached": True})
    then = entry.eager_median_ms
    if eager_now is None or not then or then <= 0 or eager_now.median_ms <= 0:
        return stats
    factor = eager_now.median_ms / then
    return stats.scaled(factor).model_copy(update={"rescaled_by": factor})
