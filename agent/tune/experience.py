"""The experience library: past tuning runs in SQLite, and warm starts from the most similar.

Each run is stored with the features of its task and kernel (operator kinds, input shapes and
dtypes, GPU, a hash of the kernel sources, the space's parameters and signature) and every
point it measured, one row per configuration (so adding a value to a space never invalidates
what was learnt). A new run ranks the stored runs by similarity and starts from their best
points, projected into its own space (missing parameters take the new default's value, values
not in the new lists snap to the nearest, invalid points to the nearest valid one).

The tables are prefixed `tune_`, so the file may be the batch results store.
"""

from __future__ import annotations

import json
import math
import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, Field

from agent.paths import cache_dir
from agent.tune.results import Measurement, WarmStart
from agent.tune.space import Point, Space

_SCHEMA = """
CREATE TABLE IF NOT EXISTS tune_runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    created REAL NOT NULL,
    task_name TEXT NOT NULL,
    task_key TEXT NOT NULL,
    features TEXT NOT NULL,
    space_sig TEXT NOT NULL,
    space TEXT NOT NULL,
    default_key TEXT,
    default_ms REAL,
    best_key TEXT,
    best_ms REAL,
    evaluations INTEGER NOT NULL,
    complete INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS tune_points (
    run_id INTEGER NOT NULL REFERENCES tune_runs(id) ON DELETE CASCADE,
    config TEXT NOT NULL,
    time_ms REAL,
    status TEXT NOT NULL,
    PRIMARY KEY (run_id, config)
);
CREATE INDEX IF NOT EXISTS tune_runs_sig ON tune_runs(space_sig);
"""


class Features(BaseModel):
    """What makes two tuning problems alike."""

    task_name: str = ""
    task_key: str = ""
    ops: list[str] = Field(
        default_factory=list, description="operator kinds of the reference (aten ops, modules)"
    )
    shapes: list[list[int]] = Field(default_factory=list, description="tensor input shapes")
    dtypes: list[str] = Field(default_factory=list)
    gpu: str = ""
    kernel_hash: str = ""
    params: list[str] = Field(default_factory=list)
    space_sig: str = ""


def _jaccard(a: Sequence[str], b: Sequence[str]) -> float:
    sa, sb = set(a), set(b)
    if not sa and not sb:
        return 0.5
    return len(sa & sb) / len(sa | sb)


def _shape_similarity(a: list[list[int]], b: list[list[int]]) -> float:
    if not a or not b:
        return 0.0
    scores = []
    for sa, sb in zip(a, b, strict=False):
        na, nb = math.prod(sa) or 1, math.prod(sb) or 1
        closeness = math.exp(-abs(math.log(na / nb)) / math.log(16))
        scores.append(closeness * (1.0 if len(sa) == len(sb) else 0.5))
    return sum(scores) / max(len(a), len(b))


def similarity(stored: Features, query: Features) -> float:
    """0 (nothing transfers: no parameter in common) .. 1 (same kernel, task, space and GPU)."""
    params = _jaccard(stored.params, query.params)
    if not set(stored.params) & set(query.params):
        return 0.0
    return (
        0.30 * params
        + 0.20 * _jaccard(stored.ops, query.ops)
        + 0.15 * _shape_similarity(stored.shapes, query.shapes)
        + 0.10 * float(stored.dtypes == query.dtypes)
        + 0.10 * float(stored.gpu == query.gpu and bool(query.gpu))
        + 0.10 * float(stored.kernel_hash == query.kernel_hash and bool(query.kernel_hash))
        + 0.05 * float(stored.space_sig == query.space_sig)
    )


class StoredRun(BaseModel):
    id: int
    task_name: str
    features: Features
    best_key: str | None
    best_ms: float | None
    default_ms: float | None = None
    points: list[tuple[dict[str, int], float]] = Field(description="correct points, fastest first")


class ExperienceLibrary:
    def __init__(self, path: Path | None = None) -> None:
        self.path = Path(path) if path is not None else cache_dir() / "tune" / "experience.sqlite"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(self.path), timeout=30)
        self._db.execute("PRAGMA foreign_keys = ON")
        self._db.executescript(_SCHEMA)

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> ExperienceLibrary:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def record(
        self,
        features: Features,
        space: Space,
        measurements: Sequence[Measurement],
        *,
        default_key: str | None,
        default_ms: float | None,
        best_key: str | None,
        best_ms: float | None,
    ) -> int:
        with self._db:
            cursor = self._db.execute(
                "INSERT INTO tune_runs (created, task_name, task_key, features, space_sig, space, default_key,"
                " default_ms, best_key, best_ms, evaluations, complete) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    time.time(),
                    features.task_name,
                    features.task_key,
                    features.model_dump_json(),
                    space.signature(),
                    space.file.model_dump_json(),
                    default_key,
                    default_ms,
                    best_key,
                    best_ms,
                    len(measurements),
                    int(len(measurements) >= len(space)),
                ),
            )
            run_id = int(cursor.lastrowid or 0)
            self._db.executemany(
                "INSERT OR REPLACE INTO tune_points (run_id, config, time_ms, status) VALUES (?,?,?,?)",
                [
                    (run_id, json.dumps(m.config, sort_keys=True), m.time_ms if m.ok else None, m.status)
                    for m in measurements
                ],
            )
        return run_id

    def runs(self) -> list[StoredRun]:
        rows = self._db.execute(
            "SELECT id, task_name, features, best_key, best_ms, default_ms FROM tune_runs ORDER BY id"
        ).fetchall()
        out = []
        for run_id, task_name, features, best_key, best_ms, default_ms in rows:
            points = self._db.execute(
                "SELECT config, time_ms FROM tune_points WHERE run_id = ? AND status = 'ok'"
                " AND time_ms IS NOT NULL ORDER BY time_ms, config",
                (run_id,),
            ).fetchall()
            out.append(
                StoredRun(
                    id=run_id,
                    task_name=task_name,
                    features=Features.model_validate_json(features),
                    best_key=best_key,
                    best_ms=best_ms,
                    default_ms=default_ms,
                    points=[(json.loads(c), t) for c, t in points],
                )
            )
        return out

    def similar(
        self, query: Features, *, min_similarity: float = 0.5, limit: int = 3
    ) -> list[tuple[float, StoredRun]]:
        scored = [(similarity(run.features, query), run) for run in self.runs() if run.points]
        scored = [(s, r) for s, r in scored if s >= min_similarity]
        scored.sort(key=lambda sr: (-sr[0], -sr[1].id))
        return scored[:limit]

    def warm_start(
        self,
        query: Features,
        space: Space,
        default: Point,
        *,
        per_run: int = 3,
        max_points: int = 5,
        min_similarity: float = 0.5,
    ) -> tuple[list[Point], list[WarmStart]]:
        """Points to measure right after the default, and where each came from."""
        points: dict[Point, None] = {}
        sources: list[WarmStart] = []
        base = space.config(default)
        for score, run in self.similar(query, min_similarity=min_similarity):
            taken: list[str] = []
            # Only what beat its own run's start is experience worth repeating.
            better = [c for c, t in run.points if run.default_ms is None or t < run.default_ms]
            for config in better[:per_run]:
                projected = {name: int(config.get(name, base[name])) for name in space.names}
                point = space.nearest(projected)
                if point != default and point not in points and len(points) < max_points:
                    points[point] = None
                    taken.append(space.key(point))
            if taken:
                sources.append(
                    WarmStart(
                        run_id=run.id,
                        similarity=round(score, 3),
                        task_name=run.task_name,
                        reason=_reason(run.features, query),
                        points=taken,
                    )
                )
        return list(points), sources


def _reason(stored: Features, query: Features) -> str:
    same = []
    if stored.kernel_hash and stored.kernel_hash == query.kernel_hash:
        same.append("kernel")
    if stored.space_sig == query.space_sig:
        same.append("space")
    if stored.task_key and stored.task_key == query.task_key:
        same.append("task")
    if set(stored.ops) == set(query.ops) and stored.ops:
        same.append("ops")
    if stored.shapes == query.shapes:
        same.append("shapes")
    if stored.gpu and stored.gpu == query.gpu:
        same.append("gpu")
    return "same " + ", ".join(same) if same else "shared parameters"
