"""Compile proves the workspace loads, with no GPU: the built module imports (every symbol bound)
and ModelNew, made on the meta device, has the reference Model's state_dict. Real builds."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.build.compile import CompileResult, compile_solution
from agent.tasks import parse_task
from agent.workspace import Workspace
from sandbox.base import open_sandbox

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
RELU_KERNELS = REPO / "skills" / "cuda-extension" / "examples" / "relu" / "kernels"
SCALED_RELU_TASK = """\
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(features))

    def forward(self, x):
        return torch.relu(x) * self.scale


def get_inputs():
    return [torch.randn(8, 16)]


def get_init_inputs():
    return [16]
"""
MODEL_NEW = """\
import cuda_extension
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(features))

    def forward(self, x):
        return cuda_extension.relu_forward(x) * self.scale
"""


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Workspace, Path]]:
    base = tmp_path_factory.mktemp("loads")
    task_file = base / "scaled_relu.py"
    task_file.write_text(SCALED_RELU_TASK)
    ws = Workspace.create(base / "ws", parse_task(task_file))
    shutil.copytree(RELU_KERNELS, ws.root / "kernels", dirs_exist_ok=True)
    (ws.root / "model_new.py").write_text(MODEL_NEW)
    cache = base / "cache"
    built = build(ws, cache)
    assert built.ok, built.feedback()
    assert "load_check_s" in built.worker_phases and not built.message
    yield ws, cache


def build(ws: Workspace, cache: Path) -> CompileResult:
    return compile_solution(ws, open_sandbox("local", workspace=ws.root, cache_dir=cache), arch="sm_90")


def test_a_binding_calling_a_launcher_no_source_defines_fails_compile(
    workspace: tuple[Workspace, Path],
) -> None:
    ws, cache = workspace
    binding = ws.root / "kernels" / "relu_binding.cpp"
    good = binding.read_text()
    # Not extern "C": the symbol is mangled, and the error names it as the model wrote it.
    declared = good.replace('extern "C" cudaError_t relu_launch(', "cudaError_t scale_launch(")
    broken = declared.replace("cudaError_t err = relu_launch(", "cudaError_t err = scale_launch(")
    binding.write_text(broken)
    try:
        result = build(ws, cache)
    finally:
        binding.write_text(good)
    assert not result.ok and result.status == "compile_error"
    first = result.errors[0]
    call_line = next(i for i, line in enumerate(broken.splitlines(), 1) if "err = scale_launch(" in line)
    assert (first.file, first.line) == ("kernels/relu_binding.cpp", call_line)
    assert "undefined symbol scale_launch(float const*, float*, long, CUstream_st*)" in first.message
    assert first.context == broken.splitlines()[call_line - 1]


def test_a_state_dict_verify_could_not_load_fails_compile(workspace: tuple[Workspace, Path]) -> None:
    ws, cache = workspace
    entry = ws.root / "model_new.py"
    entry.write_text(
        MODEL_NEW.replace(
            "self.scale = nn.Parameter(torch.ones(features))",
            "self.gain = nn.Parameter(torch.ones(features, 2))",
        ).replace("self.scale", "self.gain")
    )
    try:
        result = build(ws, cache)
    finally:
        entry.write_text(MODEL_NEW)
    assert not result.ok and result.status == "compile_error"
    (error,) = result.errors
    assert (error.file, error.line) == ("model_new.py", 6)  # class ModelNew
    assert "missing ['scale']" in error.message and "unexpected ['gain']" in error.message
    assert build(ws, cache).ok


def test_a_shape_that_differs_from_the_reference_is_named(workspace: tuple[Workspace, Path]) -> None:
    ws, cache = workspace
    entry = ws.root / "model_new.py"
    entry.write_text(MODEL_NEW.replace("torch.ones(features)", "torch.ones(features + 1)"))
    try:
        result = build(ws, cache)
    finally:
        entry.write_text(MODEL_NEW)
    assert not result.ok
    assert "scale is [17] in ModelNew, [16] in Model" in result.errors[0].message


def test_model_new_that_fails_to_import_is_a_compile_error(workspace: tuple[Workspace, Path]) -> None:
    ws, cache = workspace
    entry = ws.root / "model_new.py"
    entry.write_text(MODEL_NEW + "\nSCALE = cuda_extension.scale_forward\n")
    try:
        result = build(ws, cache)
    finally:
        entry.write_text(MODEL_NEW)
    assert not result.ok
    error = result.errors[0]
    assert (error.file, error.line) == ("model_new.py", MODEL_NEW.count("\n") + 2)
    assert "AttributeError" in error.message and "scale_forward" in error.message
    assert error.context == "SCALE = cuda_extension.scale_forward"


def test_a_workspace_without_model_new_fails_compile(workspace: tuple[Workspace, Path]) -> None:
    ws, cache = workspace
    entry = ws.root / "model_new.py"
    entry.unlink()
    try:
        result = build(ws, cache)
    finally:
        entry.write_text(MODEL_NEW)
    assert not result.ok and result.status == "compile_error"
    assert "no model_new.py" in result.feedback()
