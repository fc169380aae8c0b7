"""Brute-force cache files in Kernel Tuner's format, and replaying them without a GPU.

The file is Kernel Tuner's cache JSON (so its simulation mode reads it as it is), with one
extra top-level key, `kernel_agent`, that holds our space file, the task's features and the
timing method. A failed or incorrect point has `"time": "RuntimeFailedConfig"`, as Kernel
Tuner writes it, and our `status` beside it.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from agent.tune.results import Measurement
from agent.tune.search import Retimed
from agent.tune.space import DeviceLimits, Point, Space, SpaceFile

FAILED = "RuntimeFailedConfig"


class CacheFile(BaseModel):
    device_name: str
    kernel_name: str
    problem_size: list[int] = Field(default_factory=list)
    tune_params_keys: list[str]
    tune_params: dict[str, list[int]]
    objective: str = "time"
    objective_higher_is_better: bool = False
    kernel_agent: dict[str, Any] = Field(default_factory=dict)
    cache: dict[str, dict[str, Any]]

    def times(self) -> dict[str, float | None]:
        """key -> median ms, or None for a point that failed or was incorrect."""
        return {
            key: (float(entry["time"]) if not isinstance(entry.get("time"), str) else None)
            for key, entry in self.cache.items()
        }

    def space(self) -> Space:
        meta = self.kernel_agent
        return Space(
            SpaceFile.model_validate(meta["space"]),
            limits=DeviceLimits.model_validate(meta.get("limits", {})),
            shapes=meta.get("shapes", {}),
        )


def cache_entry(m: Measurement, *, verification_s: float = 0.0) -> dict[str, Any]:
    entry: dict[str, Any] = dict(m.config)
    entry["time"] = m.time_ms if m.ok else FAILED
    entry["status"] = m.status
    if m.error:
        entry["error"] = m.error[:300]
    entry["iqr_ms"] = m.iqr_ms
    entry["reps"] = m.reps
    entry["compile_time"] = 0.0
    entry["verification_time"] = verification_s * 1e3
    entry["benchmark_time"] = m.gpu_s * 1e3
    entry["strategy_time"] = 0.0
    entry["framework_time"] = 0.0
    entry["timestamp"] = time.strftime("%Y-%m-%d %H:%M:%S+00:00", time.gmtime())
    return entry


def write_cache(
    path: Path,
    *,
    space: Space,
    measurements: Sequence[Measurement],
    kernel_name: str,
    device_name: str,
    meta: dict[str, Any],
    problem_size: list[int] | None = None,
) -> CacheFile:
    cache = CacheFile(
        device_name=device_name,
        kernel_name=kernel_name,
        problem_size=problem_size or [],
        tune_params_keys=list(space.names),
        tune_params={n: list(v) for n, v in zip(space.names, space.values, strict=True)},
        kernel_agent={
            "space": space.file.model_dump(),
            "limits": space.limits.model_dump(),
            "shapes": {k: v for k, v in space.env.items() if k.startswith("in")},
            "valid_points": len(space),
            **meta,
        },
        cache={m.key: cache_entry(m) for m in measurements},
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(cache.model_dump_json(indent=1))
    return cache


def load_cache(path: Path) -> CacheFile:
    return CacheFile.model_validate(json.loads(Path(path).read_text()))


class ReplayEvaluator:
    """Serves measurements from a complete cache. `noise` multiplies re-timings by a seeded
    log-normal factor so the paired final pick can be exercised; first measurements are exact."""

    def __init__(
        self,
        space: Space,
        times: dict[str, float | None],
        *,
        noise: float = 0.0,
        seed: int = 0,
        gpu_s_per_eval: float = 0.0,
    ) -> None:
        missing = [space.key(p) for p in space.points if space.key(p) not in times]
        if missing:
            raise ValueError(f"the cache lacks {len(missing)} valid points, e.g. {missing[:3]}")
        self.space = space
        self.times = times
        self.noise = noise
        self.rng = random.Random(seed)
        self.gpu_s_per_eval = gpu_s_per_eval
        self.measured: list[str] = []

    def measure(self, points: Sequence[Point], phase: str) -> list[Measurement]:
        out = []
        for point in points:
            key = self.space.key(point)
            self.measured.append(key)
            value = self.times[key]
            out.append(
                Measurement(
                    key=key,
                    config=self.space.config(point),
                    status="ok" if value is not None else "failed",
                    time_ms=value,
                    gpu_s=self.gpu_s_per_eval,
                    error="" if value is not None else "failed in the brute-force run",
                )
            )
        return out

    def retime(self, points: Sequence[Point], rounds: int) -> Retimed:
        table: list[list[float | None]] = []
        for _ in range(rounds):
            row: list[float | None] = []
            for point in points:
                value = self.times[self.space.key(point)]
                if value is not None and self.noise > 0:
                    value *= self.rng.lognormvariate(0.0, self.noise)
                row.append(value)
            table.append(row)
        return Retimed(times=table, gpu_s=0.0)
