"""KernelBench single files through our toolchain (sandbox/workers/inline_build.py): the edits to
torch's build.ninja, a real load_inline build with the lean .cu and the precompiled header, the
candidate's import of it without any compiler run (build once), and the fallback to the solution
as written when the lean build fails."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent.build.compile import compile_solution
from agent.workspace import SingleFileSolution
from sandbox.base import WORKERS_DIR, open_sandbox

sys.path.insert(0, str(WORKERS_DIR))  # the workers import each other by module name
from sandbox.workers import inline_build

# What LLM generations for KernelBench look like: torch/extension.h in the CUDA source too.
GENERATION = '''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void relu_kernel(const float* x, float* y, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}

torch::Tensor relu_cuda(torch::Tensor x) {
    auto y = torch::empty_like(x);
    int64_t n = x.numel();
    BODY
    relu_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""
cpp_source = "torch::Tensor relu_cuda(torch::Tensor x);"

relu = load_inline(name="relu_generation", cpp_sources=cpp_source, cuda_sources=cuda_source,
                   functions=["relu_cuda"], verbose=False, extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def forward(self, x):
        return relu.relu_cuda(x)
'''
# torch::nn::functional lives in torch/all.h, which the lean .cu does not parse.
NEEDS_ALL_H = "if (n < 0) { y = torch::nn::functional::relu(x); }"
# A plain mistake: both the lean and the original build fail on it, at the same line.
TYPO = "int64_t m = q;"


def import_like_the_candidate(solution: Path, build_dir: str, cache: Path) -> dict[str, object]:
    """Run the candidate child's own import of a single file in a fresh process."""
    code = (
        "import json, sys\n"
        f"sys.path.insert(0, {str(WORKERS_DIR)!r})\n"
        "import candidate_child\n"
        "model = candidate_child._import_candidate(json.loads(sys.argv[1]))\n"
        "module = sys.modules['kernel_agent_solution']\n"
        "print(json.dumps({'model': model.__name__, 'exposed': hasattr(module.relu, 'relu_cuda')}))\n"
    )
    spec = {
        "kind": "single_file",
        "build_dir": build_dir,
        "cache_dir": str(cache),
        "entry": str(solution),
        "module_name": "kernel_agent_solution",
    }
    done = subprocess.run(
        [sys.executable, "-I", "-c", code, json.dumps(spec)],
        capture_output=True,
        text=True,
        timeout=600,
        # The sandbox's PATH, so the same ninja runs: ninja versions hash command lines differently.
        env={"TORCH_CUDA_ARCH_LIST": "9.0", "PATH": os.environ["PATH"]},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def ninja_log_entries(build_dir: str, name: str) -> list[str]:
    log = Path(build_dir) / name / ".ninja_log"
    return [line for line in log.read_text().splitlines() if not line.startswith("#")]


# -- the edits, on a build.ninja as torch writes it (no compiler) -------------------------------
TORCH_NINJA = """\
ninja_required_version = 1.3
cxx = c++
nvcc = /usr/local/cuda/bin/nvcc

cflags = -DTORCH_EXTENSION_NAME=ext -isystem /torch/include -fPIC -std=c++17
post_cflags =
cuda_cflags = -DTORCH_EXTENSION_NAME=ext -O3

rule compile
  command = $cxx -MMD -MF $out.d $cflags -c $in -o $out $post_cflags

build main.o: compile {dir}/main.cpp
build cuda.cuda.o: cuda_compile {dir}/cuda.cu
build outside.cuda.o: cuda_compile {outside}/outside.cu

build ext.so: link main.o cuda.cuda.o outside.cuda.o
"""


def write_torch_build(folder: Path, outside: Path) -> Path:
    folder.mkdir(parents=True)
    outside.mkdir(parents=True)
    (folder / "main.cpp").write_text("#include <torch/extension.h>\nint f();\n")
    cu = "#include <torch/types.h>\n#include <cuda.h>\n#include <cuda_runtime.h>\n#include <torch/extension.h>\nint g;\n"
    (folder / "cuda.cu").write_text(cu)
    (outside / "outside.cu").write_text("#include <torch/extension.h>\nint h;\n")
    ninja = folder / "build.ninja"
    ninja.write_text(TORCH_NINJA.format(dir=folder, outside=outside))
    return ninja


def test_route_leans_only_the_cuda_load_inline_wrote_and_keeps_its_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pch = tmp_path / "pch"
    monkeypatch.setattr(inline_build, "_precompiled_extension_h", lambda variables, cache: pch)
    ninja = write_torch_build(tmp_path / "ext", tmp_path / "user")
    inline_build.route(ninja, tmp_path / "cache")
    text = ninja.read_text()
    assert f"build cuda.cuda.o: cuda_compile {tmp_path / 'ext' / 'cuda.lean.cu'}" in text
    # A user's own file (torch's `load`) keeps its relative includes: never copied.
    assert f"cuda_compile {tmp_path / 'user' / 'outside.cu'}" in text
    lean = (tmp_path / "ext" / "cuda.lean.cu").read_text().split("\n")
    original = (tmp_path / "ext" / "cuda.cu").read_text().split("\n")
    assert len(lean) == len(original) and lean[3] == "#include <torch/types.h>" and lean[4] == "int g;"
    assert (
        f"-include {pch / inline_build.PCH_HEADER} -Winvalid-pch"
        in text.split("cflags = ", 1)[1].split("\n")[0]
    )
    lean_mtime = (tmp_path / "ext" / "cuda.lean.cu").stat().st_mtime_ns
    # The candidate's import: torch writes its build.ninja again, routed to the same text.
    ninja.write_text(TORCH_NINJA.format(dir=tmp_path / "ext", outside=tmp_path / "user"))
    inline_build.route(ninja, tmp_path / "cache")
    assert ninja.read_text() == text
    assert (tmp_path / "ext" / "cuda.lean.cu").stat().st_mtime_ns == lean_mtime
    inline_build.route(ninja, tmp_path / "cache")  # routing twice changes nothing either
    assert ninja.read_text() == text


def test_no_precompiled_header_when_a_cpp_source_does_not_start_with_extension_h(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(inline_build, "_precompiled_extension_h", lambda variables, cache: tmp_path / "pch")
    ninja = write_torch_build(tmp_path / "ext", tmp_path / "user")
    (tmp_path / "ext" / "main.cpp").write_text("#include <pybind11/pybind11.h>\n")  # no_implicit_headers
    inline_build.route(ninja, tmp_path / "cache")
    assert "-include" not in ninja.read_text()


def test_unlean_switches_back_to_the_original_and_remembers_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(inline_build, "_precompiled_extension_h", lambda variables, cache: None)
    ninja = write_torch_build(tmp_path / "ext", tmp_path / "user")
    inline_build.route(ninja, tmp_path / "cache")
    assert inline_build.unlean(ninja)
    assert "cuda.lean.cu" not in ninja.read_text()
    ninja.write_text(TORCH_NINJA.format(dir=tmp_path / "ext", outside=tmp_path / "user"))
    inline_build.route(ninja, tmp_path / "cache")  # a later process: straight to the original
    assert "cuda.lean.cu" not in ninja.read_text() and not inline_build.unlean(ninja)
    (tmp_path / "ext" / "cuda.cu").write_text((tmp_path / "ext" / "cuda.cu").read_text() + "int edited;\n")
    inline_build.route(ninja, tmp_path / "cache")  # an edit is tried lean again
    assert "cuda.lean.cu" in ninja.read_text()


# -- real builds ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("inline-cache")


@pytest.mark.slow
def test_a_generation_builds_lean_with_the_pch_and_the_candidate_import_runs_no_compiler(
    tmp_path: Path, cache: Path
) -> None:
    path = tmp_path / "level_1_problem_19_sample_0_kernel.py"
    path.write_text(GENERATION.replace("BODY", ""))
    solution = SingleFileSolution(path)
    box = open_sandbox("local", workspace=solution.root, cache_dir=cache)
    built = compile_solution(solution, box, arch="sm_90")
    assert built.ok, built.feedback()
    folder = Path(built.build_dir) / "relu_generation"
    ninja = (folder / "build.ninja").read_text()
    assert "cuda.lean.cu" in ninja and "-Winvalid-pch" in ninja
    assert list((cache / "inline_pch").glob(f"*/{inline_build.PCH_HEADER}.gch"))
    entries = ninja_log_entries(built.build_dir, "relu_generation")
    so = folder / "relu_generation.so"
    so_mtime = so.stat().st_mtime_ns

    imported = import_like_the_candidate(path, built.build_dir, cache)

    assert imported == {"model": "ModelNew", "exposed": True}
    assert ninja_log_entries(built.build_dir, "relu_generation") == entries, "the import rebuilt something"
    assert so.stat().st_mtime_ns == so_mtime


@pytest.mark.slow
def test_a_generation_that_needs_all_of_libtorch_builds_as_written(tmp_path: Path, cache: Path) -> None:
    path = tmp_path / "needs_all_h.py"
    path.write_text(GENERATION.replace("BODY", NEEDS_ALL_H))
    solution = SingleFileSolution(path)
    built = compile_solution(
        solution, open_sandbox("local", workspace=solution.root, cache_dir=cache), arch="sm_90"
    )
    assert built.ok, built.feedback()
    folder = Path(built.build_dir) / "relu_generation"
    assert "cuda.lean.cu" not in (folder / "build.ninja").read_text()
    assert (folder / f"cuda.cu{inline_build.FULL_MARK}").is_file()
    entries = ninja_log_entries(built.build_dir, "relu_generation")
    assert import_like_the_candidate(path, built.build_dir, cache)["exposed"] is True
    assert ninja_log_entries(built.build_dir, "relu_generation") == entries


@pytest.mark.slow
def test_a_broken_generation_reports_the_error_of_the_file_as_written(tmp_path: Path, cache: Path) -> None:
    path = tmp_path / "broken.py"
    path.write_text(GENERATION.replace("BODY", TYPO))
    solution = SingleFileSolution(path)
    built = compile_solution(
        solution, open_sandbox("local", workspace=solution.root, cache_dir=cache), arch="sm_90"
    )
    assert not built.ok and built.status == "compile_error"
    first = built.errors[0]
    assert first.file == path.name and 'identifier "q" is undefined' in first.message
    assert first.line == path.read_text().splitlines().index(f"    {TYPO}") + 1
    assert "(in cuda.cu:" in first.context  # the original's error, not the lean copy's
