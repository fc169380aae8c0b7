"""Cached eager and torch.compile timings, so a batch times each baseline once.

One JSON file under agent.paths.cache_dir(); entries are keyed by the task's content hash,
its input spec, the GPU, the torch version, the arm (eager, or compile with its mode), the
timing procedure's version and settings, and the precision the baseline ran at (a TF32 or
autocast baseline is a different number; docs/precision.md). Writers hold an exclusive lock; `--refresh-baselines`
re-times and overwrites.
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
from agent.referee.results import TimingStats
from sandbox.workers.protocol import BaselinePart, JudgeResult


class BaselineKey(BaseModel):
    task_sha256: str
    input_spec: str
    gpu: str
    torch: str
    arm: str  # "eager" | "compile:<mode>" | "bandwidth"
    timing: str
    precision: str = "fp32"  # what the baseline ran at: fp32, tf32, fp16, bf16

    def digest(self) -> str:
        return hashlib.sha256(self.model_dump_json().encode()).hexdigest()


class BaselineEntry(BaseModel):
    key: BaselineKey
    stats: TimingStats | None = None
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

    def put(self, key: BaselineKey, *, stats: TimingStats | None = None, value: float | None = None) -> None:
        entry = BaselineEntry(
            key=key, stats=stats, value=value, recorded_at=time.strftime("%Y-%m-%dT%H:%M:%S%z")
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
        precision: str = "fp32",
    ) -> Baselines:
        """The keys of this evaluation's baselines and what the cache holds of them. Under the
        `match` policy the precision is known only once the judge measured the candidate's: the
        judge times them at that precision (never read from the cache) and they are cached
        under it."""
        common = {
            "task_sha256": task_sha256,
            "input_spec": input_spec,
            "gpu": gpu,
            "torch": torch,
            "timing": timing,
            "precision": precision,
        }
        keys = {
            "eager": BaselineKey(arm="eager", **common),
            "compile": BaselineKey(arm=f"compile:{compile_mode}", **common),
            "bandwidth": BaselineKey(
                arm="bandwidth", task_sha256="", input_spec="", gpu=gpu, torch=torch, timing=""
            ),
        }
        cached = {
            arm: None if refresh or (precision == "match" and arm != "bandwidth") else cache.get(key)
            for arm, key in keys.items()
        }
        return cls(cache, keys, cached, compile_mode, configured_bandwidth)

    def request(self, *, measure_bandwidth: bool) -> BaselinePart:
        """The judge spec's part: which arms to time (those not cached)."""
        return {
            "baselines": {
                "eager": self.cached["eager"] is None,
                "compile_mode": self.compile_mode if self.cached["compile"] is None else None,
            },
            "measure_bandwidth": measure_bandwidth
            and self.configured_bandwidth is None
            and self.cached["bandwidth"] is None,
        }

    def resolve(self, judged: JudgeResult) -> None:
        """Take cached numbers, or the judge's fresh ones (and cache those)."""
        fresh = judged.get("baselines") or {}
        at = judged.get("baseline_precision")
        for arm in ("eager", "compile"):
            entry, measured = self.cached.get(arm), fresh.get(arm)
            self.stats[arm] = None
            if entry is not None and entry.stats is not None:
                self.stats[arm] = entry.stats.model_copy(update={"cached": True})
            elif isinstance(measured, dict) and "error" in measured:
                self.errors[arm] = str(measured["error"])
            elif measured:
                self.stats[arm] = TimingStats.model_validate(measured)
                key = self.keys[arm]
                if at and at != key.precision:  # `match`: what the judge measured
                    key = key.model_copy(update={"precision": at})
                if key.precision != "match":
                    self.cache.put(key, stats=self.stats[arm])
        if self.configured_bandwidth:
            self.bandwidth, self.bandwidth_source = self.configured_bandwidth, "configured"
        elif self.cached["bandwidth"] is not None:
            self.bandwidth, self.bandwidth_source = self.cached["bandwidth"].value, "measured"
        elif bandwidth := judged.get("bandwidth_gbps"):
            self.bandwidth, self.bandwidth_source = float(bandwidth), "measured"
            self.cache.put(self.keys["bandwidth"], value=self.bandwidth)
