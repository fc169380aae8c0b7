"""KernelBench's metrics against hand-computed examples."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from agent.batch.config import WorkItem
from agent.batch.metrics import (
    Sample,
    best_per_task,
    compute_metrics,
    fast_p,
    geomean_speedup,
    metrics_by_level,
)
from agent.batch.records import AttemptRecord
from agent.batch.report import build_reports, render_markdown
from agent.batch.store import Store
from agent.referee.results import EvalResult
from agent.tasks import load_folder
from tests.batch.helpers import fake_config, make_tasks

MEASURED = Path(__file__).resolve().parents[2] / (
    "benchmarks/results/fullsize-h200-2026-12-02/run1_before_import_fix/eval_40_LayerNorm_cold.json"
)


def sample(key: str, *, level: int = 1, compiled: bool = True, correct: bool = True, **kw: object) -> Sample:
    return Sample(task_key=key, name=key, level=level, compiled=compiled, correct=correct, **kw)  # type: ignore[arg-type]


# Five level-1 tasks and one level-2 task:
#   a: correct, 2.0x eager, 0.5x compile      d: compiled, incorrect
#   b: correct, 1.04x eager, 1.2x compile     e: not compiled
#   c: correct, eager not timed, 1.6x compile f (level 2): correct, 0.8x eager, no compile timing
SAMPLES = [
    sample("a", speedup_eager=2.0, speedup_compile=0.5, tokens=100, usd=1.0, gpu_s=10, wall_s=60),
    sample("b", speedup_eager=1.04, speedup_compile=1.2, tokens=200, usd=2.0, gpu_s=20, wall_s=60),
    sample("c", speedup_compile=1.6, tokens=300, usd=3.0, gpu_s=30, wall_s=60),
    sample("d", correct=False, tokens=400, usd=4.0, gpu_s=40, wall_s=60),
    sample("e", compiled=False, correct=False, tokens=500, usd=5.0, gpu_s=0, wall_s=60),
    sample("f", level=2, speedup_eager=0.8, tokens=600, usd=6.0, gpu_s=60, wall_s=60),
]


def test_fast_p_counts_correct_and_strictly_faster_over_all_tasks() -> None:
    # eager: fast_0 = 4 correct / 6; fast_1 = {a (2.0), b (1.04)} = 2/6; fast_1.05 = {a} = 1/6;
    # fast_1.5 = {a}; fast_2 = {} since 2.0 is not > 2.
    assert fast_p(SAMPLES, 0, "eager") == pytest.approx(4 / 6)
    assert fast_p(SAMPLES, 1, "eager") == pytest.approx(2 / 6)
    assert fast_p(SAMPLES, 1.05, "eager") == pytest.approx(1 / 6)
    assert fast_p(SAMPLES, 1.5, "eager") == pytest.approx(1 / 6)
    assert fast_p(SAMPLES, 2, "eager") == 0.0
    # compile: fast_1 = {b (1.2), c (1.6)}; fast_1.5 = {c}
    assert fast_p(SAMPLES, 1, "compile") == pytest.approx(2 / 6)
    assert fast_p(SAMPLES, 1.5, "compile") == pytest.approx(1 / 6)


def test_geomean_over_correct_tasks_with_a_speedup() -> None:
    # eager over a, b, f: (2.0 * 1.04 * 0.8) ** (1/3)
    assert geomean_speedup(SAMPLES, "eager") == pytest.approx((2.0 * 1.04 * 0.8) ** (1 / 3))
    # correct-and-faster only: a, b
    assert geomean_speedup(SAMPLES, "eager", faster_only=True) == pytest.approx(math.sqrt(2.0 * 1.04))
    assert geomean_speedup([sample("x", correct=False, speedup_eager=3.0)], "eager") is None


def test_compute_metrics_rates_and_costs() -> None:
    m = compute_metrics(SAMPLES)
    assert (m.n, m.compiled, m.correct) == (6, 5, 4)
    assert m.compiled_rate == pytest.approx(5 / 6)
    assert m.correct_rate == pytest.approx(4 / 6)
    assert m.fast_p["eager"]["fast_1.05"] == pytest.approx(1 / 6)
    assert m.timed == {"eager": 3, "compile": 3}
    assert m.total.usd == pytest.approx(21.0)
    assert m.total.tokens == 2100
    assert m.per_task.usd == pytest.approx(21.0 / 6)
    assert m.per_solved is not None and m.per_solved.usd == pytest.approx(21.0 / 4)
    assert m.per_solved.gpu_s == pytest.approx(160 / 4)


def test_per_level_breakdown() -> None:
    levels = metrics_by_level(SAMPLES)
    assert list(levels) == ["all", "level1", "level2"]
    assert levels["level1"].n == 5 and levels["level1"].correct == 3
    assert levels["level1"].fast_p["eager"]["fast_1"] == pytest.approx(2 / 5)
    assert levels["level2"].geomean["eager"] == pytest.approx(0.8)
    assert levels["level2"].fast_p["eager"]["fast_1"] == 0.0


def test_best_candidate_per_task_and_summed_cost() -> None:
    candidates = [
        sample("t", correct=False, usd=1.0),
        sample("t", speedup_eager=1.3, speedup_compile=0.7, usd=2.0),
        sample("t", speedup_eager=1.1, speedup_compile=0.9, usd=3.0),
        sample("u", compiled=False, correct=False, usd=4.0, errored=True),
    ]
    merged = {s.task_key: s for s in best_per_task(candidates)}
    assert merged["t"].correct and merged["t"].compiled
    assert merged["t"].speedup_eager == 1.3 and merged["t"].speedup_compile == 0.9
    assert merged["t"].usd == pytest.approx(6.0)
    assert not merged["u"].correct and merged["u"].errored
    m = compute_metrics(list(merged.values()))
    assert m.fast_p["eager"]["fast_1"] == 0.5 and m.errors == 1
    assert m.per_solved is not None and m.per_solved.usd == pytest.approx(10.0)


def test_empty_batch() -> None:
    m = compute_metrics([])
    assert m.n == 0 and m.correct_rate == 0.0 and m.per_solved is None
    assert m.geomean == {"eager": None, "compile": None}


def test_a_hack_flagged_candidate_is_correct_but_its_speed_counts_nowhere(tmp_path: Path) -> None:
    """`agent report` reads the final evaluation's flags from the store: a correct candidate whose
    speed is not its own (cuBLAS alone here) stays correct, but adds nothing to fast_p or geomean."""
    measured = json.loads(MEASURED.read_text())
    measured["performance"]["speedup_vs_eager"]["value"] = 3.0
    measured["performance"]["speedup_vs_compile"]["value"] = 2.0
    clean = EvalResult.model_validate(measured)
    measured["performance"]["flags"] = [{"code": "own_kernels_never_ran", "message": "cuBLAS alone"}]
    flagged = EvalResult.model_validate(measured)
    root = make_tasks(tmp_path / "tasks", {1: ["1_A", "2_B"]})
    tasks = load_folder(root, instantiate=False)[0]
    config = fake_config(tmp_path, root, tmp_path / "sols")
    with Store(config.store) as store:
        run = store.start_run(config, versions={}, gpus=[{"id": "0", "name": "NVIDIA H200"}])
        store.add_tasks(tasks)
        for task, result in zip(tasks, [clean, flagged], strict=True):
            claim = store.claim(run, config.batch_key(), WorkItem(task=task, candidate="base"))
            assert claim is not None
            store.finish_attempt(claim.attempt_id, AttemptRecord(status="done", result=result))
        store.finish_run(run, "finished")
        assert [r.flags for r in store.results()] == [(), ("own_kernels_never_ran",)]
    (report,) = build_reports(config.store)
    m = report.metrics["all"]
    assert (m.n, m.correct, m.flagged) == (2, 2, 1)
    assert m.fast_p["eager"]["fast_0"] == 1.0 and m.fast_p["eager"]["fast_1"] == 0.5
    assert m.fast_p["compile"]["fast_1.5"] == 0.5 and m.timed == {"eager": 1, "compile": 1}
    assert m.geomean["eager"] == pytest.approx(3.0)
    summary = render_markdown([report]).split("| scope | tasks |")[1]  # the first table: KernelBench's
    assert "| errors | hack-flagged |" in summary.splitlines()[0]
    all_row = next(line for line in summary.splitlines() if line.startswith("| all |"))
    assert all_row.endswith("| 0 | 1 |")  # errors, hack-flagged


def test_a_task_counts_as_flagged_only_when_no_clean_candidate_is_correct() -> None:
    merged = best_per_task(
        [
            sample("t", candidate="a", flagged=True),
            sample("t", candidate="b", speedup_eager=1.3),
            sample("u", candidate="a", flagged=True),
        ]
    )
    by_key = {s.task_key: s for s in merged}
    assert not by_key["t"].flagged and by_key["t"].speedup_eager == 1.3
    assert by_key["u"].flagged and by_key["u"].correct and by_key["u"].speedup_eager is None
    assert compute_metrics(merged).flagged == 1
