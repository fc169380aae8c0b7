"""Regions as tasks and back: each extracted region loads as a task with the model's shapes, and
the model composed from its regions' reference Models computes what the model computes."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.regions.compose import check_composition, composed_source
from agent.regions.extract import write_region_tasks
from agent.regions.partition import partition
from agent.regions.whole import compose_reference_check, scaled_source
from agent.tasks import instantiate_tasks, parse_task
from agent.templates import trace_task
from tests.regions.conftest import LEVEL3

pytestmark = pytest.mark.slow

TASK = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 32)
        self.norm = nn.LayerNorm(32)

    def forward(self, x):
        y = torch.relu(self.fc(x)) * 2.0
        return self.norm(y).transpose(0, 1).sum(dim=1)

batch_size = 64

def get_inputs():
    return [torch.randn(batch_size, 16)]

def get_init_inputs():
    return []
"""


def _level3(name: str) -> Path:
    path = LEVEL3 / name
    if not path.is_file():
        pytest.skip(f"{path} not found")
    return path


def test_scaled_source_lowers_only_a_top_level_batch_size():
    text, changed = scaled_source(TASK, 2)
    assert changed and "batch_size = 2\n" in text and "nn.Linear(16, 32)" in text
    assert scaled_source(TASK, 128) == (TASK, False)
    assert scaled_source("x = 1\n", 2) == ("x = 1\n", False)


def test_each_region_of_minigpt_loads_as_a_task_with_the_models_shapes(tmp_path):
    graph = trace_task(_level3("44_MiniGPTBlock.py"))
    regions = partition(graph)
    written = write_region_tasks(graph, regions, tmp_path)
    tasks = instantiate_tasks([parse_task(w.path) for w in written])
    for region, task in zip(regions, tasks, strict=True):
        assert task.spec is not None, task
        assert [a.shape for a in task.spec.inputs] == [v.meta.shape for v in region.inputs], region.label
        assert [a.dtype for a in task.spec.inputs] == [v.meta.dtype for v in region.inputs]
        assert task.spec.parameters == sum(
            graph.param(p).numel for p in region.params if graph.param(p).kind == "parameter"
        )
        assert [o.shape for o in task.spec.outputs or []] == [v.meta.shape for v in region.outputs]


@pytest.mark.parametrize("name", ["1_MLP.py", "8_ResNetBasicBlock.py", "44_MiniGPTBlock.py"])
def test_a_level3_model_composed_from_its_region_references_matches_it(name):
    regions, check = compose_reference_check(_level3(name), batch=2)
    assert len(regions) >= 3
    assert check.ok, check.error
    assert check.max_abs_diff is not None and check.max_abs_diff <= 1e-5


def test_a_composition_with_a_region_solution_is_checked_and_a_wrong_one_fails(tmp_path):
    task = tmp_path / "task.py"
    task.write_text(TASK, encoding="utf-8")
    graph = trace_task(task)
    regions = partition(graph)
    assert [r.kind for r in regions][:2] == ["gemm", "norm"]
    written = write_region_tasks(graph, regions, tmp_path / "regions")
    reference = written[0].path.read_text(encoding="utf-8")
    good = reference.replace("class Model(", "class ModelNew(")
    assert check_composition(task, composed_source(graph, regions, TASK, {0: good})).ok
    wrong = good + "\n_forward = ModelNew.forward\nModelNew.forward = lambda self, *a: -_forward(self, *a)\n"
    check = check_composition(task, composed_source(graph, regions, TASK, {0: wrong}))
    assert not check.ok and check.error == "outputs differ"
