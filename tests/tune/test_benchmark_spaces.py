"""The tuning benchmark's 12 tasks, as the tuner sees them: spaces of the documented size, a valid start."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.tasks import load_folder
from agent.tune.apply import read_tune_literal
from agent.tune.space import DeviceLimits, Space, load_space_file, shape_names

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "tuning"

# Valid points per task on an H100/H200 (227 KiB of opt-in shared memory), as in its README.
EXPECTED = {
    "colsum_16x4096x1024": 216,
    "colsum_64x1024x512": 216,
    "gelu_2048x1024": 342,
    "gelu_4096x4096": 342,
    "layernorm_1024x8192": 153,
    "layernorm_4096x2048": 162,
    "sgemm_2048x2048x2048": 210,
    "sgemm_4096x512x1024": 210,
    "softmax_16384x512": 162,
    "softmax_4096x2048": 162,
    "transpose_2048x3072": 136,
    "transpose_8192x4096": 136,
}


@pytest.mark.slow
def test_every_task_has_a_space_of_50_to_500_points_and_a_valid_start():
    tasks, errors = load_folder(BENCH / "tasks")
    assert not errors
    assert sorted(t.name for t in tasks) == sorted(EXPECTED)
    kernels = {t.name.split("_", 1)[0] for t in tasks}
    assert kernels == {p.name for p in (BENCH / "kernels").iterdir()}
    for task in tasks:
        kernel_dir = BENCH / "kernels" / task.name.split("_", 1)[0]
        assert task.spec is not None
        space = Space(
            load_space_file(kernel_dir), limits=DeviceLimits(), shapes=shape_names(task.spec.inputs)
        )
        assert len(space) == EXPECTED[task.name], (task.name, space.rejection_summary())
        assert 50 <= len(space) <= 500
        tune = read_tune_literal(kernel_dir / "model_new.py")
        assert tune is not None and space.check(tune) is None, (task.name, tune)
