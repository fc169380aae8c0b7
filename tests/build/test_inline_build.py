"""KernelBench single files through our toolchain (sandbox/workers/build/inline_build.py): the edits to
torch's build.ninja, real load_inline builds with the min and lean .cu and the precompiled
header, the candidate's import of them without any compiler run (build once), and the fallback
from tier to tier down to the solution as written."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import sandbox.workers.siblings  # noqa: F401  (the workers import each other by name)
from agent.build.compile import compile_solution
from agent.workspace import SingleFileSolution
from sandbox.base import WORKERS_DIR, open_sandbox
from sandbox.workers.build import inline_build

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
# TensorIndexing is in ATen.h (the lean tier) but not in the min tier's narrowed set.
NEEDS_ATEN_H = "if (n < 0) { y = x.index({torch::indexing::Slice(0, 1)}); }"
# torch::nn::functional lives in torch/all.h, which neither the min nor the lean .cu parses.
NEEDS_ALL_H = "if (n < 0) { y = torch::nn::functional::relu(x); }"
# A plain mistake: both the lean and the original build fail on it, at the same line.
TYPO = "int64_t m = q;"


def import_like_the_candidate(solution: Path, build_dir: str, cache: Path) -> dict[str, object]:
    """Run the candidate child's own import of a single file in a fresh process."""
    code = (
        "import json, sys\n"
        f"sys.path.insert(0, {str(WORKERS_DIR)!r})\n"
        "import siblings\n"
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
cuda_post_cflags = --compiler-options '-fPIC'

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
    # Only the copy's edge runs nvcc's steps as a graph; the user's own file runs nvcc as torch wrote.
    assert (
        text.count(f"\n  nvcc = {sys.executable} {inline_build.PARALLEL_NVCC} /usr/local/cuda/bin/nvcc\n")
        == 1
    )
    assert text.index("cuda.lean.cu\n  nvcc = ") > 0


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
    assert "cuda.lean.cu" in ninja.read_text()  # no torch headers found: no min tier
    assert inline_build.unlean(ninja, tmp_path / "cache")
    assert "cuda.lean.cu" not in ninja.read_text()
    ninja.write_text(TORCH_NINJA.format(dir=tmp_path / "ext", outside=tmp_path / "user"))
    inline_build.route(ninja, tmp_path / "cache")  # a later process: straight to the original
    assert "cuda.lean.cu" not in ninja.read_text() and not inline_build.unlean(ninja)
    (tmp_path / "ext" / "cuda.cu").write_text((tmp_path / "ext" / "cuda.cu").read_text() + "int edited;\n")
    inline_build.route(ninja, tmp_path / "cache")  # an edit is tried lean again
    assert "cuda.lean.cu" in ninja.read_text()


def fake_torch_headers(root: Path) -> Path:
    """An include folder with torch's two headers the tiers read: enough for route(), no nvcc."""
    (root / "ATen").mkdir(parents=True)
    (root / "ATen" / "Functions.h").write_text(
        "#pragma once\n#include <ATen/Context.h>\n#include <ATen/ops/empty.h>\n#include <ATen/ops/abs.h>\n"
    )
    (root / "torch").mkdir()
    (root / "torch" / "types.h").write_text(
        "#pragma once\n#include <ATen/ATen.h>\n#include <torch/csrc/autograd/variable.h>\n"
        "#include <torch/library.h>\nnamespace torch { using namespace at; }\n"
    )
    return root


def test_tiers_min_then_lean_then_the_original_each_failure_remembered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(inline_build, "_precompiled_extension_h", lambda variables, cache: None)
    monkeypatch.setattr(inline_build.slim_aten, "header_operators", lambda *args, **kwargs: set())
    include = fake_torch_headers(tmp_path / "include")
    ext = tmp_path / "ext"
    ninja = write_torch_build(ext, tmp_path / "user")
    ninja.write_text(ninja.read_text().replace("cuda_cflags = ", f"cuda_cflags = -isystem {include} "))
    slim_flag = f"-I{ext / 'kernel_agent_aten'}"

    inline_build.route(ninja, tmp_path / "cache")
    text = ninja.read_text()
    assert f"cuda_compile {ext / 'cuda.min.cu'}" in text and slim_flag in text
    lines = (ext / "cuda.min.cu").read_text().split("\n")
    assert lines[0] == lines[3] == "#include <kernel_agent_torch.h>" and lines[4] == "int g;"
    header = (ext / "kernel_agent_aten" / "kernel_agent_torch.h").read_text()
    assert "<ATen/core/Tensor.h>" in header and "<ATen/ATen.h>" not in header
    assert "torch/library.h" not in header and "autograd/variable.h" not in header
    assert "namespace torch { using namespace at; }" in header

    assert inline_build.unlean(ninja, tmp_path / "cache")  # the min build failed: lean next
    text = ninja.read_text()
    assert f"cuda_compile {ext / 'cuda.lean.cu'}" in text and text.count(slim_flag) == 1
    assert inline_build.unlean(ninja, tmp_path / "cache")  # lean failed too: the original
    text = ninja.read_text()
    assert f"cuda_compile {ext / 'cuda.cu'}" in text and slim_flag not in text
    assert not inline_build.unlean(ninja, tmp_path / "cache")

    ninja.write_text(
        TORCH_NINJA.format(dir=ext, outside=tmp_path / "user").replace(
            "cuda_cflags = ", f"cuda_cflags = -isystem {include} "
        )
    )
    inline_build.route(ninja, tmp_path / "cache")  # the candidate's import: the same decision
    assert ninja.read_text() == text
    (ext / "cuda.cu").write_text((ext / "cuda.cu").read_text() + "int edited;\n")
    inline_build.route(ninja, tmp_path / "cache")  # an edit starts over at the min tier
    assert f"cuda_compile {ext / 'cuda.min.cu'}" in ninja.read_text()


def test_worker_phases_keep_only_numbers_from_the_sandbox() -> None:
    from agent.build.compile import _worker_phases

    record = {"ok": True, "log": "", "mode": "configure", "module": None, "duration_s": 3.0, "niceness": 10}
    assert _worker_phases({**record, "phases": {"import_torch_s": 1.0, "x": "no", "y": True}}) == {
        "worker_s": 3.0,
        "import_torch_s": 1.0,
    }
    assert _worker_phases({**record, "phases": ["not", "a", "dict"]}) == {"worker_s": 3.0}  # type: ignore[typeddict-item]


def test_min_header_keeps_torch_factories_only_where_requires_grad_is_named() -> None:
    types_h = "#include <ATen/ATen.h>\n#include <torch/csrc/autograd/generated/variable_factories.h>\n"
    plain = inline_build.slim_aten.min_header(types_h, ["auto y = torch::empty_like(x);"])
    graded = inline_build.slim_aten.min_header(types_h, ["torch::empty({1}, o.requires_grad(true));"])
    assert plain is not None and "variable_factories" not in plain
    assert graded is not None and "variable_factories" in graded
    assert inline_build.slim_aten.min_header("#include <ATen/Everything.h>\n", []) is None


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
    phases = built.worker_phases  # where a build's time went, for the benchmarks
    assert phases["import_torch_s"] + phases["solution_s"] <= phases["worker_s"] <= built.duration_s
    folder = Path(built.build_dir) / "relu_generation"
    ninja = (folder / "build.ninja").read_text()
    assert "cuda.min.cu" in ninja and "-Winvalid-pch" in ninja
    assert (
        f"nvcc = {sys.executable} {inline_build.PARALLEL_NVCC}" in ninja
    )  # the tier copy's steps as a graph
    assert list((cache / "inline_pch").glob(f"*/{inline_build.PCH_HEADER}.gch"))
    entries = ninja_log_entries(built.build_dir, "relu_generation")
    so = folder / "relu_generation.so"
    so_mtime = so.stat().st_mtime_ns

    imported = import_like_the_candidate(path, built.build_dir, cache)

    assert imported == {"model": "ModelNew", "exposed": True}
    assert ninja_log_entries(built.build_dir, "relu_generation") == entries, "the import rebuilt something"
    assert so.stat().st_mtime_ns == so_mtime


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "body", "built_from", "failed_tiers"),
    [
        pytest.param(
            "needs_all_h.py", NEEDS_ALL_H, "cuda.cu", ["min", "lean"], id="needs_all-builds_as_written"
        ),
        pytest.param("needs_aten_h.py", NEEDS_ATEN_H, "cuda.lean.cu", ["min"], id="needs_aten-builds_lean"),
    ],
)
def test_a_generation_that_needs_more_than_the_min_tier_builds_on_the_first_tier_that_parses_it(
    tmp_path: Path, cache: Path, name: str, body: str, built_from: str, failed_tiers: list[str]
) -> None:
    path = tmp_path / name
    path.write_text(GENERATION.replace("BODY", body))
    solution = SingleFileSolution(path)
    built = compile_solution(
        solution, open_sandbox("local", workspace=solution.root, cache_dir=cache), arch="sm_90"
    )
    assert built.ok, built.feedback()
    folder = Path(built.build_dir) / "relu_generation"
    sources = re.findall(r"\S+\.cu\b", (folder / "build.ninja").read_text())
    assert {Path(s).name for s in sources if "cuda." in Path(s).name} == {built_from}
    # each tier that failed is remembered, so a rebuild starts where this one ended
    assert (folder / f"cuda.cu{inline_build.FAILED_MARK}").read_text().split()[::2] == failed_tiers
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
    ninja = (Path(built.build_dir) / "relu_generation" / "build.ninja").read_text()
    assert "nvcc_parallel" not in ninja  # the original is compiled by nvcc itself


@pytest.mark.slow
def test_agent_compile_of_a_generation_shows_its_kernels_resource_table(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A single file's load_inline build reports registers, spills, shared memory and occupancy
    per kernel like a workspace build, built or up to date."""
    from typer.testing import CliRunner

    from agent.cli.app import app

    monkeypatch.setenv("KERNEL_AGENT_CACHE", str(tmp_path / "state"))
    monkeypatch.setenv("KERNEL_AGENT_BUILD_CACHE", str(cache))
    path = tmp_path / "relu_generation.py"
    path.write_text(GENERATION.replace("BODY", ""))

    replies = [CliRunner().invoke(app, ["compile", str(path), "--arch", "sm_90"]) for _ in range(2)]

    for reply in replies:
        assert reply.exit_code == 0, reply.output
        table = reply.output.split("kernel resources (ptxas", 1)[-1]
        row = next(line for line in table.splitlines() if line.startswith("relu_kernel("))
        assert "(relu_generation/cuda.cu) | sm_90 | " in row and "threads/block" in row
    assert "up to date" in replies[1].output


BUILD_IN_PROCESS = """
import runpy, sys
sys.path.insert(0, sys.argv[3])
import siblings
import inline_build
inline_build.install(sys.argv[2])
module = runpy.run_path(sys.argv[1])
print(callable(module["relu"].relu_cuda))
"""


@pytest.mark.slow
def test_a_second_generation_compiles_its_host_side_against_the_first_ones_precompiled_torch(
    tmp_path: Path, cache: Path
) -> None:
    """The torch part of cudafe++'s output is precompiled once (host_pch) and read by the next
    generation, whose operators differ; both build and expose their functions."""
    times = tmp_path / "times.jsonl"
    env = {
        "PATH": os.environ["PATH"],
        "CUDA_HOME": os.environ.get("CUDA_HOME", "/usr/local/cuda"),
        "TORCH_CUDA_ARCH_LIST": "9.0",
        "TORCH_EXTENSIONS_DIR": str(tmp_path / "extensions"),
        "NVCC_PARALLEL_TIMES": str(times),
    }
    bodies = {"first": "", "second": "if (n < 0) { y = torch::zeros_like(x).contiguous(); }"}
    for name, body in bodies.items():
        path = tmp_path / f"{name}.py"
        path.write_text(GENERATION.replace("BODY", body).replace("relu_generation", f"relu_{name}"))
        done = subprocess.run(
            [sys.executable, "-c", BUILD_IN_PROCESS, str(path), str(cache), str(WORKERS_DIR)],
            capture_output=True,
            text=True,
            timeout=900,
            env=env,
        )
        assert done.returncode == 0 and done.stdout.split()[-1] == "True", done.stderr[-3000:]
    first, second = (json.loads(line)["host_cc_note"] for line in times.read_text().splitlines())
    # "plain, made KEY" where it is new, "KEY, N of M lines" where another test made it
    key = first.split()[-1] if first.startswith("plain, made ") else first.split(",")[0]
    assert (cache / inline_build.HOST_PCH_DIR / key / "prefix.h.gch").is_file()
    assert second.startswith(f"{key}, "), second
    slim = (
        tmp_path / "extensions" / "relu_second" / "kernel_agent_aten" / "ATen" / "Functions.h"
    ).read_text()
    assert "ATen/ops/zeros_like.h" in slim  # its own operators, past the cut
