"""The Ray executor on a local Ray instance (this CPU machine, two logical GPUs): evaluations run in
Ray workers, two per GPU (num_gpus=0.5) with their timings kept apart by the GPU gates; results
come back to the driver, which alone writes the store."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.batch.runner import BatchRunner
from agent.batch.store import Store
from tests.batch.helpers import (
    assert_timings_exclusive,
    fake_config,
    local_ray_evaluator,
    make_tasks,
    make_workspace_solution,
    most_at_once,
    read_log,
)

pytestmark = pytest.mark.slow

ray = pytest.importorskip(
    "ray", reason="ray is not installed: pip install 'kernel-agent[ray]' to run the Ray tests"
)


@pytest.fixture(scope="module")
def ray_evaluator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    # logical: six CPUs (two compiles and four judges at once) and two GPUs
    with local_ray_evaluator(tmp_path_factory.mktemp("ray-gates"), num_cpus=6, num_gpus=2) as evaluator:
        yield evaluator


def test_a_batch_on_ray_shares_gpus_with_exclusive_timings_and_the_driver_writes_the_store(
    tmp_path: Path, ray_evaluator: Any
) -> None:
    specs: dict[str, dict[str, Any]] = {
        f"{i}_T{i}": {"speedup_eager": 1.0 + i / 10, "judge_s": 1.0, "timing_s": 0.2} for i in range(1, 9)
    }
    specs["7_NoBuild"] = {"compile": "error"}
    specs["8_Raise"] = {"crash": "raise"}
    tasks = make_tasks(tmp_path / "tasks", {1: list(specs)})
    for name, spec in specs.items():
        make_workspace_solution(tmp_path / "sols", 1, name, spec)
    log = tmp_path / "log.jsonl"
    config = fake_config(
        tmp_path, tasks, tmp_path / "sols", executor="ray", concurrency=6, extra={"log": str(log)}
    )
    summary = BatchRunner(config, evaluator=ray_evaluator).run()
    assert summary.counts == {"correct": 8, "compile_error": 1, "error": 1}

    entries = read_log(log)
    assert len(entries) == 8
    assert_timings_exclusive(entries)
    assert {e["gpu"] for e in entries} == {"0", "1"}
    assert max(most_at_once(entries).values()) == 2  # Ray placed two judges on one GPU, never more
    assert {Path(e["gate"]).name for e in entries} == {"gpu-0.lock", "gpu-1.lock"}
    assert all(e["pid"] != os.getpid() for e in entries)  # judged in Ray workers
    assert all("kernel-agent-ray" in e["solution"] for e in entries)  # on files shipped to the worker

    with Store(config.store) as store:
        results = {r.task_name: r for r in store.results()}
        assert len(store.runs()) == 1
    assert results["6_T6"].speedup_eager == pytest.approx(1.6)
    assert "fake judge crashed" in (results["8_Raise"].error or "")
    # the recorded solution is the driver's copy, not the worker's temporary one
    assert Path(results["1_T1"].solution_path or "").is_dir()
