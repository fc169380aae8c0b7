"""KernelBench's metrics (score.py), per level and overall, plus what they cost.

- compiled rate, correct rate (= fast_0) over all tasks of the batch;
- fast_p: the fraction of ALL tasks that are correct AND faster than p x the baseline (eager or
  torch.compile), for p in {0, 1, 1.05, 1.5, 2}; p = 0 counts every correct task;
- geometric-mean speedup over the correct tasks (those with a measured speedup), and over the
  correct-and-faster ones;
- a correct candidate whose evaluation carries a hack flag (HACK_FLAGS: the speed or the work is
  not its own, e.g. cuBLAS alone) stays correct, but its speedups count in no fast_p (p > 0) and no
  geomean; `flagged` counts the tasks correct only through such candidates;
- cost: tokens, dollars, GPU-seconds and wall time, in total, per task and per solved (correct) task.

A unit is a task: with several candidates per task (samples, variants) the task counts as
compiled/correct if any candidate is, with the best correct candidate's speedup, and costs summed
(what it took). `per_candidate` units are available too.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Literal

from pydantic import BaseModel

from agent.batch.records import AttemptRecord
from agent.referee.results import HACK_FLAGS

Baseline = Literal["eager", "compile"]
BASELINES: tuple[Baseline, ...] = ("eager", "compile")
P_VALUES: tuple[float, ...] = (0.0, 1.0, 1.05, 1.5, 2.0)


def p_label(p: float) -> str:
    return f"fast_{p:g}"


class Sample(BaseModel):
    """One unit of the metrics: a task (its best candidate) or one candidate."""

    task_key: str
    name: str
    level: int | None = None
    candidate: str | None = None
    compiled: bool
    correct: bool
    errored: bool = False
    flagged: bool = False
    """correct, with a hack flag: its speedups (None here) are not its own"""
    speedup_eager: float | None = None
    speedup_compile: float | None = None
    tokens: int = 0
    usd: float = 0.0
    gpu_s: float = 0.0
    wall_s: float = 0.0

    def speedup(self, baseline: Baseline) -> float | None:
        return self.speedup_eager if baseline == "eager" else self.speedup_compile


class Cost(BaseModel):
    tokens: int
    usd: float
    gpu_s: float
    wall_s: float


class Metrics(BaseModel):
    n: int
    errors: int
    compiled: int
    correct: int
    flagged: int = 0
    """correct tasks whose every correct candidate carries a hack flag (no speedup counted)"""
    compiled_rate: float
    correct_rate: float
    fast_p: dict[str, dict[str, float]]
    """baseline -> {"fast_0": ..., "fast_1": ..., ...}"""
    geomean: dict[str, float | None]
    """baseline -> geometric-mean speedup over correct tasks with a measured speedup"""
    geomean_faster: dict[str, float | None]
    timed: dict[str, int]
    """baseline -> how many correct tasks have a measured speedup"""
    total: Cost
    per_task: Cost
    per_solved: Cost | None


def samples_from_records(records: Iterable[AttemptRecord]) -> list[Sample]:
    """One Sample per candidate (the attempts that count: store.results())."""
    return [
        Sample(
            task_key=r.task_key,
            name=r.task_name,
            level=r.level,
            candidate=r.candidate,
            compiled=r.compiled,
            correct=r.correct,
            errored=r.status == "error",
            flagged=(flagged := r.correct and bool(set(r.flags) & HACK_FLAGS)),
            speedup_eager=r.speedup_eager if r.correct and not flagged else None,
            speedup_compile=r.speedup_compile if r.correct and not flagged else None,
            tokens=r.tokens,
            usd=r.usd,
            gpu_s=r.gpu_s,
            wall_s=r.wall_s,
        )
        for r in records
    ]


def best_per_task(samples: Iterable[Sample]) -> list[Sample]:
    groups: dict[str, list[Sample]] = {}
    for s in samples:
        groups.setdefault(s.task_key, []).append(s)
    merged = []
    for group in groups.values():
        correct = [s for s in group if s.correct]

        def best(baseline: Baseline, correct: list[Sample] = correct) -> float | None:
            values = [v for s in correct if (v := s.speedup(baseline)) is not None]
            return max(values) if values else None

        merged.append(
            Sample(
                task_key=group[0].task_key,
                name=group[0].name,
                level=group[0].level,
                compiled=any(s.compiled for s in group),
                correct=bool(correct),
                errored=all(s.errored for s in group),
                flagged=bool(correct) and all(s.flagged for s in correct),
                speedup_eager=best("eager"),
                speedup_compile=best("compile"),
                tokens=sum(s.tokens for s in group),
                usd=sum(s.usd for s in group),
                gpu_s=sum(s.gpu_s for s in group),
                wall_s=sum(s.wall_s for s in group),
            )
        )
    return merged


def fast_p(samples: list[Sample], p: float, baseline: Baseline) -> float:
    if not samples:
        return 0.0
    hits = sum(
        1 for s in samples if s.correct and (p == 0 or ((v := s.speedup(baseline)) is not None and v > p))
    )
    return hits / len(samples)


def geomean_speedup(samples: list[Sample], baseline: Baseline, *, faster_only: bool = False) -> float | None:
    values = [v for s in samples if s.correct and (v := s.speedup(baseline)) is not None and v > 0]
    if faster_only:
        values = [v for v in values if v > 1]
    if not values:
        return None
    return math.exp(sum(math.log(v) for v in values) / len(values))


def compute_metrics(samples: list[Sample]) -> Metrics:
    n = len(samples)
    compiled = sum(s.compiled for s in samples)
    correct = sum(s.correct for s in samples)
    total = _cost(samples)
    return Metrics(
        n=n,
        errors=sum(s.errored for s in samples),
        compiled=compiled,
        correct=correct,
        flagged=sum(s.flagged for s in samples),
        compiled_rate=compiled / n if n else 0.0,
        correct_rate=correct / n if n else 0.0,
        fast_p={b: {p_label(p): fast_p(samples, p, b) for p in P_VALUES} for b in BASELINES},
        geomean={b: geomean_speedup(samples, b) for b in BASELINES},
        geomean_faster={b: geomean_speedup(samples, b, faster_only=True) for b in BASELINES},
        timed={b: sum(1 for s in samples if s.correct and s.speedup(b) is not None) for b in BASELINES},
        total=total,
        per_task=_scaled(total, n),
        per_solved=_scaled(total, correct) if correct else None,
    )


def metrics_by_level(samples: list[Sample]) -> dict[str, Metrics]:
    """Metrics for "all" first, then "level1", "level2", ... ("other": tasks without a level)."""
    levels = sorted({s.level for s in samples}, key=lambda lv: (lv is None, lv or 0))
    out = {"all": compute_metrics(samples)}
    for level in levels:
        name = f"level{level}" if level is not None else "other"
        out[name] = compute_metrics([s for s in samples if s.level == level])
    return out


def _cost(samples: list[Sample]) -> Cost:
    return Cost(
        tokens=sum(s.tokens for s in samples),
        usd=sum(s.usd for s in samples),
        gpu_s=sum(s.gpu_s for s in samples),
        wall_s=sum(s.wall_s for s in samples),
    )


def _scaled(cost: Cost, count: int) -> Cost:
    if count == 0:
        return Cost(tokens=0, usd=0.0, gpu_s=0.0, wall_s=0.0)
    return Cost(
        tokens=round(cost.tokens / count),
        usd=cost.usd / count,
        gpu_s=cost.gpu_s / count,
        wall_s=cost.wall_s / count,
    )
