"""`agent report`'s "where the evaluation time went": the candidate worker's stages grouped into
build, import, inputs, trials, GPU wait, timing, profile and judge."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.batch.config import WorkItem
from agent.batch.records import AttemptRecord
from agent.batch.report import build_reports, render_markdown
from agent.batch.stages import evaluation_stages, stage_breakdown
from agent.batch.store import Store
from agent.referee.results import EvalResult
from agent.tasks import load_folder
from tests.batch.helpers import fake_config, make_tasks

# A real evaluation's stage times: KernelBench level1/40_LayerNorm at full size on the H200.
MEASURED = Path(__file__).resolve().parents[2] / (
    "benchmarks/results/fullsize-h200-2026-12-02/run1_before_import_fix/eval_40_LayerNorm_cold.json"
)


def test_stages_group_as_a_reader_compares_them() -> None:
    result = json.loads(MEASURED.read_text())
    seconds = evaluation_stages(EvalResult.model_validate(result))
    stages = result["stage_times"]["candidate_stages"]
    assert seconds["build"] == pytest.approx(27.735, abs=1e-3)
    assert seconds["judge"] == pytest.approx(14.092, abs=1e-3)
    assert seconds["trials"] == pytest.approx(sum(v for k, v in stages.items() if k.startswith("trial")))
    assert seconds["import"] == pytest.approx(
        stages["import torch"]
        + stages["import candidate"]
        + stages["construct ModelNew"]
        + stages["load state"]
    )
    assert seconds["inputs + reference"] == pytest.approx(4.3111)
    assert seconds["GPU wait"] == pytest.approx(0.0002)
    # What the worker's clock did not see of the candidate's run is process start-up.
    assert sum(seconds.values()) == pytest.approx(
        result["stage_times"]["compile_s"]
        + result["stage_times"]["candidate_s"]
        + result["stage_times"]["judge_s"]
    )


def test_the_breakdown_sums_evaluations_and_gives_shares() -> None:
    result = json.loads(MEASURED.read_text())
    shares = {s.stage: s for s in stage_breakdown([EvalResult.model_validate(result)] * 2)}
    assert shares["build"].evaluations == 2 and shares["build"].total_s == pytest.approx(2 * 27.735, abs=1e-3)
    assert sum(s.share for s in shares.values()) == pytest.approx(1.0)


def test_the_report_shows_where_the_time_went(tmp_path: Path) -> None:
    root = make_tasks(tmp_path / "tasks", {1: ["1_A"]})
    (task,) = load_folder(root, instantiate=False)[0]
    config = fake_config(tmp_path, root, tmp_path / "sols")
    with Store(config.store) as store:
        run = store.start_run(config, versions={}, gpus=[{"id": "0", "name": "NVIDIA H200"}])
        store.add_tasks([task])
        claim = store.claim(run, config.batch_key(), WorkItem(task=task, candidate="base"))
        assert claim is not None
        measured = EvalResult.model_validate_json(MEASURED.read_text())
        store.finish_attempt(claim.attempt_id, AttemptRecord(status="done", result=measured))
        store.finish_run(run, "finished")
    (report,) = build_reports(config.store)
    shares = {s.stage: s for s in report.stages}
    assert shares["build"].total_s == pytest.approx(27.735, abs=1e-3) and shares["trials"].evaluations == 1
    text = render_markdown([report])
    assert "### Where the evaluation time went" in text and "| GPU wait |" in text


def test_the_judges_waits_and_baselines_are_told_apart_from_the_rest_of_its_time() -> None:
    result = json.loads(MEASURED.read_text())
    result["stage_times"]["judge_s"] = 100.0
    result["stage_times"]["judge_stages"] = {
        "reference": 3.0,
        "comparisons": 2.0,
        "waiting for the GPU (exclusive, eager)": 10.0,
        "eager timing": 4.0,
        "torch.compile compiling": 60.0,
        "waiting for the GPU (shared, after compiling)": 5.0,
        "waiting for the GPU (exclusive, torch.compile)": 6.0,
        "torch.compile timing": 4.0,
    }
    without_judge_stages = evaluation_stages(
        EvalResult.model_validate({**result, "stage_times": {**result["stage_times"], "judge_stages": {}}})
    )
    seconds = evaluation_stages(EvalResult.model_validate(result))
    assert seconds["GPU wait"] == pytest.approx(without_judge_stages["GPU wait"] + 10.0 + 5.0 + 6.0)
    assert seconds["baselines"] == pytest.approx(68.0)
    assert seconds["judge"] == pytest.approx(100.0 - 21.0 - 68.0)
    # Nothing counted twice: the groups still add up to the evaluation's time.
    assert sum(seconds.values()) == pytest.approx(
        result["stage_times"]["compile_s"] + result["stage_times"]["candidate_s"] + 100.0
    )


def test_the_batchs_queues_are_their_own_stages() -> None:
    result = json.loads(MEASURED.read_text())
    result["stage_times"] |= {"build_queue_s": 7.0, "judge_queue_s": 120.0}
    seconds = evaluation_stages(EvalResult.model_validate(result))
    assert seconds["queued to build"] == 7.0 and seconds["queued to judge"] == 120.0
    assert list(seconds)[:3] == ["queued to build", "build", "queued to judge"]  # in the order met
    assert sum(seconds.values()) == pytest.approx(
        127.0
        + result["stage_times"]["compile_s"]
        + result["stage_times"]["candidate_s"]
        + result["stage_times"]["judge_s"]
    )


def test_a_wait_for_gpu_memory_is_its_own_row() -> None:
    """It holds one of the GPU's slots while nothing runs: the measured H200 batch lost half its
    slots that way, which "GPU wait" (the gate) does not say."""
    result = json.loads(MEASURED.read_text())
    before = evaluation_stages(EvalResult.model_validate(result))
    result["stage_times"]["memory_wait_s"] = 42.0
    seconds = evaluation_stages(EvalResult.model_validate(result))
    assert seconds["GPU memory wait"] == pytest.approx(42.0)
    assert seconds["GPU wait"] == pytest.approx(before["GPU wait"])
    assert seconds["queued to judge"] == pytest.approx(before["queued to judge"])
