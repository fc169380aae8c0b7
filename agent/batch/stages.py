"""Where a batch's evaluation time went: queues, build, import, inputs, trials, GPU wait, timing,
baselines, judge.

Read from each counted attempt's final evaluation (`EvalResult.stage_times`): the batch's waits
for a build slot and for one of the GPU's evaluation slots (the local executor's; Ray queues its
tasks itself), the compile stage, the candidate worker's stages by its supervisor's clock, and the
judge's by its own. The stage names are the workers' own (candidate_child.py, judge.py); they are
grouped here into what a reader compares. Waits for the GPU count as "GPU wait" whichever process
waited; "judge" is what is left of the judge's time (reference outputs, comparisons, starting up).
A large "queued to judge" with a small "GPU wait" says the GPU's slots are the limit
(`--evals-per-gpu`); a large "queued to build", the build slots (`--compile-workers`); a large
"GPU memory wait", full-size tasks waiting in their slots for a share of the GPU's memory
(`sandbox/workers/gpu/gpu_memory.py`).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable

from pydantic import BaseModel

from agent.referee.results import EvalResult

# In the order a candidate meets them.
GROUPS = (
    "queued to build",
    "build",
    "queued to judge",
    "GPU memory wait",
    "import",
    "inputs + reference",
    "trials",
    "GPU wait",
    "timing",
    "profile",
    "baselines",
    "judge",
    "other",
)


class StageShare(BaseModel):
    stage: str
    total_s: float
    median_s: float
    """per evaluation that had the stage"""
    evaluations: int
    share: float
    """of the summed time of every stage"""


def group_of(candidate_stage: str) -> str:
    name = candidate_stage.lower()
    if name.startswith("waiting for the gpu"):
        return "GPU wait"
    if name.startswith("trial"):
        return "trials"
    if name.startswith(("import", "construct", "load state")):
        return "import"
    if name.startswith("reference state"):
        return "inputs + reference"
    if name in ("timing", "profile"):
        return name
    return "other"


def judge_group_of(judge_stage: str) -> str:
    name = judge_stage.lower()
    if name.startswith("waiting for the gpu"):
        return "GPU wait"
    if name.startswith(("eager", "torch.compile")):
        return "baselines"
    return "judge"


def evaluation_stages(result: EvalResult) -> dict[str, float]:
    """Seconds per group of one evaluation."""
    times = result.stage_times
    seconds: dict[str, float] = dict.fromkeys(GROUPS, 0.0)
    seconds["queued to build"] = times.build_queue_s
    seconds["build"] = times.compile_s
    seconds["queued to judge"] = times.judge_queue_s
    elsewhere = 0.0  # the judge's waits and baselines, grouped with their kind
    for name, value in times.judge_stages.items():
        group = judge_group_of(name)
        if group != "judge":
            seconds[group] += value
            elsewhere += value
    seconds["judge"] = max(0.0, times.judge_s - elsewhere)
    seconds["GPU memory wait"] = times.memory_wait_s  # for its share of it, in a slot
    stages = times.candidate_stages
    for name, value in stages.items():
        seconds[group_of(name)] += value
    # The worker's clock starts after its process does: the rest of the run is process start-up.
    seconds["other"] += max(0.0, times.candidate_s - sum(stages.values()))
    return seconds


def stage_breakdown(results: Iterable[EvalResult]) -> list[StageShare]:
    per_group: dict[str, list[float]] = {group: [] for group in GROUPS}
    for result in results:
        for group, value in evaluation_stages(result).items():
            if value > 0:
                per_group[group].append(value)
    grand = sum(sum(values) for values in per_group.values())
    return [
        StageShare(
            stage=group,
            total_s=sum(values),
            median_s=statistics.median(values),
            evaluations=len(values),
            share=sum(values) / grand if grand else 0.0,
        )
        for group, values in per_group.items()
        if values
    ]


def stage_rows(shares: list[StageShare]) -> tuple[list[str], list[list[str]]]:
    head = ["stage", "total s", "median s", "evals", "share"]
    rows = [
        [s.stage, f"{s.total_s:.1f}", f"{s.median_s:.2f}", str(s.evaluations), f"{100 * s.share:.0f}%"]
        for s in shares
    ]
    return head, rows
