from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from agent.cli.app import app
from agent.tasks import TaskLoadError, discover_task_files, load_folder, load_task, parse_task

REPO = Path(__file__).resolve().parent.parent

# KernelBench's file shapes, written for these tests: module-level sizes read at call time,
# scalar init inputs, several inputs, helper classes and a lambda attribute.
LEVEL1 = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=self.dim)

batch_size = 16
dim = 1024

def get_inputs():
    x = torch.randn(batch_size, dim)
    return [x]

def get_init_inputs():
    return [1]
"""

LEVEL2 = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    """Conv2d, scale, then min over channels."""
    def __init__(self, in_channels, out_channels, kernel_size, scale_factor):
        super(Model, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.scale_factor = scale_factor

    def forward(self, x):
        x = self.conv(x) * self.scale_factor
        return torch.min(x, dim=1, keepdim=True)[0]

batch_size = 2
in_channels = 3
out_channels = 8
height, width = 16, 16
kernel_size = 3
scale_factor = 2.0

def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]

def get_init_inputs():
    return [in_channels, out_channels, kernel_size, scale_factor]
'''

LEVEL3 = """
import math
import torch
import torch.nn as nn
import torch.nn.functional as F

class NewGELU(nn.Module):
    def forward(self, x):
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))

class Model(nn.Module):
    def __init__(self, n_embd, n_head, max_seqlen):
        super().__init__()
        self.ln = nn.LayerNorm(n_embd)
        self.fc = nn.Linear(n_embd, 4 * n_embd)
        self.act = NewGELU()
        self.register_buffer("bias", torch.tril(torch.ones(max_seqlen, max_seqlen)))
        m = self
        self.mlpf = lambda x: m.act(m.fc(x))

    def forward(self, x, mask_len: int):
        return self.mlpf(self.ln(x))

batch_size = 2
seq_len = 8
n_embd = 16

def get_inputs():
    return [torch.rand(batch_size, seq_len, n_embd), 8]

def get_init_inputs():
    return [n_embd, 4, 32]
"""


def write(root: Path, rel: str, text: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_levels_names_ids_and_specs_from_kernelbench_layout(tmp_path: Path) -> None:
    write(tmp_path, "level1/23_Softmax.py", LEVEL1)
    write(tmp_path, "level2/32_Conv2d_Scaling_Min.py", LEVEL2)
    write(tmp_path, "level3/44_MiniGPTBlock.py", LEVEL3)
    tasks, errors = load_folder(tmp_path)
    assert errors == []
    assert [(t.level, t.problem_id, t.name) for t in tasks] == [
        (1, 23, "23_Softmax"),
        (2, 32, "32_Conv2d_Scaling_Min"),
        (3, 44, "44_MiniGPTBlock"),
    ]
    softmax, conv, gpt = tasks
    assert softmax.spec is not None and softmax.spec.inputs[0].shape == [16, 1024]
    assert softmax.spec.inputs[0].dtype == "float32"
    assert softmax.spec.init_inputs[0].kind == "int"
    assert conv.spec is not None and conv.spec.parameters == 8 * 3 * 3 * 3 + 8
    assert gpt.spec is not None and [a.kind for a in gpt.spec.inputs] == ["tensor", "int"]
    assert gpt.spec.buffers == 32 * 32
    assert len(softmax.sha256) == 64 and softmax.key.startswith("level1/23_Softmax@")


def test_our_benchmark_tasks_all_load() -> None:
    tasks, errors = load_folder(REPO / "benchmarks" / "tasks")
    assert errors == []
    assert {t.level for t in tasks} >= {1}
    assert all(t.spec is not None for t in tasks)


def test_hash_changes_with_content_and_not_with_location(tmp_path: Path) -> None:
    a = parse_task(write(tmp_path, "a/1_X.py", LEVEL1))
    b = parse_task(write(tmp_path, "b/1_X.py", LEVEL1))
    c = parse_task(write(tmp_path, "c/1_X.py", LEVEL1 + "\n# changed\n"))
    assert a.sha256 == b.sha256 != c.sha256


@pytest.mark.slow
@pytest.mark.parametrize(
    ("source", "problem"),
    [
        ("x = (\n", "7_Bad.py:1: SyntaxError: "),
        (LEVEL1.replace("def get_inputs", "def other_inputs"), "missing `get_inputs`"),
        (LEVEL1.replace("class Model", "class Network"), "missing `Model`"),
        (LEVEL1.replace("def get_init_inputs", "def init_inputs"), "missing `get_init_inputs`"),
        (
            LEVEL1.replace("x = torch.randn", "raise ValueError('no data')\n    x = torch.randn"),
            "get_inputs() raised: ValueError: no data",
        ),
        (LEVEL1.replace("return [1]", "return [1, 2, 3]"), "Model(*get_init_inputs()) raised"),
        ("import not_a_module_anywhere\n" + LEVEL1, "running the file failed: ModuleNotFoundError"),
    ],
)
def test_bad_task_files_get_clear_errors(tmp_path: Path, source: str, problem: str) -> None:
    path = write(tmp_path, "level1/7_Bad.py", source)
    with pytest.raises(TaskLoadError) as info:
        load_task(path)
    assert info.value.path == path
    assert problem in str(info.value)
    assert str(path) in str(info.value)
    assert "Traceback" not in str(info.value)


def test_non_python_files_are_rejected(tmp_path: Path) -> None:
    binary = tmp_path / "1_Binary.py"
    binary.write_bytes(b"\x7fELF\x02\x01\x01\x00\xff\xfe")
    with pytest.raises(TaskLoadError, match="not UTF-8"):
        parse_task(binary)
    text = write(tmp_path, "1_Notes.txt", LEVEL1)
    with pytest.raises(TaskLoadError, match="not a Python file"):
        parse_task(text)


@pytest.mark.slow
def test_a_crashing_task_does_not_cost_the_others_their_spec(tmp_path: Path) -> None:
    write(tmp_path, "level1/1_Good.py", LEVEL1)
    write(tmp_path, "level1/2_Exits.py", "import os\nos._exit(3)\n" + LEVEL1)
    tasks, errors = load_folder(tmp_path)
    assert [t.name for t in tasks] == ["1_Good"]
    assert len(errors) == 1 and errors[0].path.name == "2_Exits.py"
    assert "crashed the worker" in errors[0].problem


@pytest.mark.slow
def test_tasks_cannot_change_each_others_globals(tmp_path: Path) -> None:
    # The second file reads a global the first one sets at import: it must not see it.
    write(tmp_path, "level1/1_Sets.py", "import builtins\nbuiltins.LEAK = 1\n" + LEVEL1)
    write(tmp_path, "level1/2_Reads.py", LEVEL1.replace("return [1]", "return [LEAK]"))
    tasks, errors = load_folder(tmp_path)
    names = [t.name for t in tasks]
    assert "1_Sets" in names
    # builtins are process-wide, so isolation must come from separate worker processes
    assert any(e.path.name == "2_Reads.py" and "NameError" in e.problem for e in errors), errors


def test_discovery_order_is_level_then_problem_id(tmp_path: Path) -> None:
    for rel in ("level2/3_C.py", "level1/10_B.py", "level1/2_A.py", "level1/__init__.py"):
        write(tmp_path, rel, LEVEL1)
    assert [p.name for p in discover_task_files(tmp_path)] == ["2_A.py", "10_B.py", "3_C.py"]


@pytest.mark.slow
def test_cli_lists_tasks_and_reports_errors_without_traceback(tmp_path: Path) -> None:
    write(tmp_path, "level1/23_Softmax.py", LEVEL1)
    write(tmp_path, "level1/24_Broken.py", "def (:\n")
    result = CliRunner().invoke(app, ["tasks", str(tmp_path), "--json"])
    assert result.exit_code == 1
    assert '"name": "23_Softmax"' in result.stdout
    assert "SyntaxError" in result.stdout and '"line": 1' in result.stdout
    assert "Traceback" not in result.output
