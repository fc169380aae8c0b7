"""Real builds of the tuning skill's examples for sm_90 (no GPU needed)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from agent.build.compile import compile_solution
from agent.paths import skills_dir
from agent.tasks import load_task
from agent.tune.apply import read_tune_header, read_tune_literal
from agent.tune.runner import default_point
from agent.tune.space import Space, load_space_file, shape_names
from agent.tune.variants import VariantBuilder
from agent.workspace import Workspace
from sandbox.base import open_sandbox

EXAMPLES = skills_dir() / "tuning" / "examples"


def workspace_from_example(name: str, tmp_path: Path) -> tuple:
    task = load_task(EXAMPLES / "axpb_task.py")
    ws = Workspace.create(tmp_path / name, task)
    shutil.copy(EXAMPLES / name / "model_new.py", ws.entry)
    for path in (EXAMPLES / name / "kernels").iterdir():
        shutil.copy(path, ws.root / "kernels" / path.name)
    space = Space(load_space_file(ws.root), shapes=shape_names(task.spec.inputs))
    return task, ws, space


@pytest.mark.slow
def test_runtime_config_kernel_builds_once_for_every_point(tmp_path):
    _, ws, space = workspace_from_example("axpb_runtime", tmp_path)
    start, problem = default_point(space, ws)
    assert start is not None, problem
    assert space.config(start) == read_tune_literal(ws.entry)
    with open_sandbox("local", workspace=ws.root) as box:
        result = compile_solution(ws, box, arch="9.0")
    assert result.ok, result.feedback()
    assert Path(result.module_path).is_file()


@pytest.mark.slow
def test_define_variants_build_in_parallel_slots(tmp_path):
    _, ws, space = workspace_from_example("axpb_define", tmp_path)
    start, problem = default_point(space, ws)
    assert start is not None and space.config(start) == read_tune_header(ws.root), problem
    compiled: list[float] = []
    builder = VariantBuilder(
        ws,
        space,
        sandbox_kind="local",
        arch="9.0",
        slots=2,
        on_compile=compiled.append,
        root=tmp_path / "slots",
    )
    points = [space.point({"BLOCK": 128, "VEC": 4}), space.point({"BLOCK": 1024, "VEC": 2})]
    try:
        built = builder.build(points)
    finally:
        builder.close()
    assert [error for _, error in built] == ["", ""]
    modules = [Path(path) for path, _ in built]
    assert all(m.is_file() for m in modules) and modules[0] != modules[1]
    assert modules[1].name == "variant_1024_2.so"
    assert read_tune_header(tmp_path / "slots" / "slot_1") == {"BLOCK": 1024, "VEC": 2}
    assert read_tune_header(ws.root) == {"BLOCK": 256, "VEC": 1}  # the workspace itself is untouched
    assert compiled and compiled[0] > 0
