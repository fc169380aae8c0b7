"""Task inspection reports shapes and dtypes without building the inputs: KernelBench's level-1
inputs are 6 GB each, so `agent tasks` must not allocate them."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from agent.tasks import load_folder, load_task

# 2**40 float32 elements: 4 TiB. Only the meta device can "build" this.
HUGE = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        return self.linear(x)


def get_inputs():
    return [torch.rand(2**20, 2**20)]


def get_init_inputs():
    return [1 << 14]
"""

# A task that needs values while it builds its inputs cannot follow the meta device.
NEEDS_VALUES = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x * 2


def get_inputs():
    n = int(torch.randint(3, 4, (1,)).item())
    return [torch.rand(n, 5)]


def get_init_inputs():
    return []
"""


def write(folder: Path, name: str, source: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(textwrap.dedent(source))
    return path


# Run in a fresh process, whose only children are the inspector's: this one's peak child RSS is
# that of every earlier test's child (a compiler may well pass 2 GiB).
PROBE = """
import json, resource, sys
from pathlib import Path
from agent.tasks import load_task
spec = load_task(Path(sys.argv[1])).spec
[x] = spec.inputs
print(json.dumps({"built_on": spec.built_on, "input": [x.kind, x.shape, x.dtype, x.device],
                  "parameters": spec.parameters,
                  "peak_kib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}))
"""


@pytest.mark.slow
def test_huge_inputs_are_described_without_being_built(tmp_path: Path) -> None:
    path = write(tmp_path / "level1", "1_Huge.py", HUGE)
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(path)], capture_output=True, text=True, check=True
    )
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["built_on"] == "meta"
    assert seen["input"] == ["tensor", [2**20, 2**20], "float32", "cpu"]
    assert seen["parameters"] == (1 << 14) ** 2 + (1 << 14)  # a 1 GiB Linear, counted, not allocated
    assert 0 < seen["peak_kib"] < 2 * 1024 * 1024, f"the inspector's peak RSS was {seen['peak_kib']} KiB"


@pytest.mark.slow
def test_a_task_that_needs_values_is_built_on_the_cpu_and_says_so(tmp_path: Path) -> None:
    task = load_task(write(tmp_path / "level1", "2_Values.py", NEEDS_VALUES))
    assert task.spec is not None
    assert task.spec.built_on.startswith("cpu (on meta: RuntimeError")
    assert task.spec.inputs[0].shape == [3, 5]


@pytest.mark.slow
def test_a_folder_is_inspected_in_one_worker(tmp_path: Path) -> None:
    folder = tmp_path / "level1"
    for i in range(6):
        write(folder, f"{i + 1}_Huge{i}.py", HUGE)
    write(folder, "7_Values.py", NEEDS_VALUES)
    found, errors = load_folder(tmp_path, instantiate=True)
    assert not errors
    assert sorted(t.problem_id for t in found) == list(range(1, 8))
    assert sum(t.spec is not None and t.spec.built_on == "meta" for t in found) == 6


ROW_MAX = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.max(x, dim=1)  # values and indices


def get_inputs():
    return [torch.rand(4096, 393216)]


def get_init_inputs():
    return []
"""


@pytest.mark.slow
def test_outputs_are_described_from_a_call_on_meta(tmp_path: Path) -> None:
    task = load_task(write(tmp_path, "row_max.py", ROW_MAX))
    assert task.spec is not None and task.spec.built_on == "meta"
    assert [(o.shape, o.dtype) for o in task.spec.outputs or []] == [([4096], "float32"), ([4096], "int64")]
    huge = load_task(write(tmp_path, "huge.py", HUGE))  # forward's shapes do not fit: no outputs, no error
    assert huge.spec is not None and huge.spec.outputs is None


SLOW_FORWARD = """
import time
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        time.sleep(30)  # as an unrolled recurrent net takes seconds on meta
        return x


def get_inputs():
    return [torch.rand(8, 8)]


def get_init_inputs():
    return []
"""


def test_a_slow_forward_on_meta_gives_up_on_outputs_not_on_the_task(tmp_path: Path) -> None:
    import time

    started = time.monotonic()
    task = load_task(write(tmp_path, "slow.py", SLOW_FORWARD))
    assert task.spec is not None and task.spec.outputs is None
    assert [a.shape for a in task.spec.inputs] == [[8, 8]]
    assert time.monotonic() - started < 20
