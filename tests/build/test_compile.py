"""Real compiles (no GPU needed): a correct and a broken workspace, incremental rebuilds,
stale locks, concurrent builds and a KernelBench single-file solution."""

from __future__ import annotations

import json
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from agent.build.compile import build_dir_for, compile_solution
from agent.tasks import parse_task
from agent.workspace import SingleFileSolution, Workspace
from sandbox.base import open_sandbox

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
RELU_TASK = REPO / "benchmarks" / "tasks" / "level1" / "19_ReLU.py"
RELU_EXAMPLE = REPO / "skills" / "cuda-extension" / "examples" / "relu"


def relu_workspace(root: Path) -> Workspace:
    ws = Workspace.create(root, parse_task(RELU_TASK))
    shutil.copytree(RELU_EXAMPLE / "kernels", ws.root / "kernels", dirs_exist_ok=True)
    shutil.copy(RELU_EXAMPLE / "model_new.py", ws.root / "model_new.py")
    return ws


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("build-cache")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, cache: Path) -> Workspace:
    ws = relu_workspace(tmp_path_factory.mktemp("relu") / "ws")
    result = compile_solution(ws, open_sandbox("local", workspace=ws.root, cache_dir=cache), arch="sm_90")
    assert result.ok, result.feedback()
    assert result.status == "built" and result.mode == "configure"
    assert Path(result.module_path or "").is_file()
    return ws


def test_the_built_extension_imports_with_torch_alone(built: Workspace, cache: Path) -> None:
    # Importing needs no GPU: it catches missing torch libraries or unresolved symbols at link time.
    import subprocess
    import sys

    module = compile_solution(
        built, open_sandbox("local", workspace=built.root, cache_dir=cache), arch="sm_90"
    )
    code = (
        "import torch, importlib.util as u\n"
        f"s = u.spec_from_file_location('cuda_extension', {module.module_path!r})\n"
        "m = u.module_from_spec(s); s.loader.exec_module(m)\n"
        "print(m.relu_forward.__doc__)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "y = max(x, 0)" in proc.stdout


def test_unchanged_workspace_is_a_no_op(built: Workspace, cache: Path) -> None:
    box = open_sandbox("local", workspace=built.root, cache_dir=cache)
    result = compile_solution(built, box, arch="sm_90")
    assert result.ok and result.status == "up_to_date"
    assert result.duration_s < 0.5


def test_editing_one_cu_recompiles_only_that_file(built: Workspace, cache: Path) -> None:
    box = open_sandbox("local", workspace=built.root, cache_dir=cache)
    kernel = built.root / "kernels" / "relu.cu"
    kernel.write_text(kernel.read_text() + "\n// an edit\n")
    result = compile_solution(built, box, arch="sm_90")
    assert result.ok and result.status == "built" and result.mode == "ninja", result.feedback()
    log = Path(result.log_path or "").read_text()
    compiled = [line for line in log.splitlines() if line.startswith("[") and " -c " in line]
    assert len(compiled) == 1 and "kernels/relu.cu" in compiled[0], compiled


def test_broken_workspace_reports_file_and_line(built: Workspace, cache: Path) -> None:
    box = open_sandbox("local", workspace=built.root, cache_dir=cache)
    kernel = built.root / "kernels" / "relu.cu"
    good = kernel.read_text()
    lines = good.splitlines()
    line_no = next(i for i, line in enumerate(lines, 1) if "v.y = fmaxf" in line)
    lines[line_no - 1] = "    v.y = fmaxf(v.y, zero_value);"
    kernel.write_text("\n".join(lines) + "\n")
    try:
        result = compile_solution(built, box, arch="sm_90")
        assert not result.ok and result.status == "compile_error"
        first = result.errors[0]
        assert (first.file, first.line) == ("kernels/relu.cu", line_no)
        assert "zero_value" in first.message
        assert "zero_value" in result.feedback()
        assert Path(result.log_path or "").is_file()
    finally:
        kernel.write_text(good)
    assert compile_solution(built, box, arch="sm_90").ok


def test_broken_binding_reports_gcc_location(built: Workspace, cache: Path) -> None:
    box = open_sandbox("local", workspace=built.root, cache_dir=cache)
    binding = built.root / "kernels" / "relu_binding.cpp"
    good = binding.read_text()
    binding.write_text(good.replace("auto y = torch::empty_like(xc);", "auto y = torch::empty_like(xc)\n"))
    try:
        result = compile_solution(built, box, arch="sm_90")
        assert not result.ok
        assert result.errors[0].file == "kernels/relu_binding.cpp"
        assert result.errors[0].line is not None and result.errors[0].column is not None
    finally:
        binding.write_text(good)


def test_stale_lock_from_a_killed_build_does_not_block(built: Workspace, cache: Path) -> None:
    box = open_sandbox("local", workspace=built.root, cache_dir=cache)
    build_dir = Path(build_dir_for(built, box, "9.0"))
    (build_dir / "lock").write_text("")  # torch's FileBaton, left by a build killed mid-way
    (build_dir / ".kernel-agent-built.json").unlink()
    result = compile_solution(built, box, arch="sm_90", timeout=300)
    assert result.ok, result.feedback()
    assert not (build_dir / "lock").exists()


def test_harness_files_are_restored_before_building(built: Workspace, cache: Path) -> None:
    box = open_sandbox("local", workspace=built.root, cache_dir=cache)
    entry = built.root / "binding.cpp"
    entry.chmod(0o644)
    entry.write_text("#error hijacked\n")
    assert compile_solution(built, box, arch="sm_90").ok
    assert "#error" not in entry.read_text()


def test_concurrent_builds_of_different_workspaces_never_collide(tmp_path: Path, cache: Path) -> None:
    spaces = [relu_workspace(tmp_path / f"ws{i}") for i in range(2)]
    boxes = [open_sandbox("local", workspace=ws.root, cache_dir=cache) for ws in spaces]
    assert build_dir_for(spaces[0], boxes[0], "9.0") != build_dir_for(spaces[1], boxes[1], "9.0")
    with ThreadPoolExecutor(2) as pool:
        results = list(
            pool.map(
                lambda pair: compile_solution(pair[0], pair[1], arch="sm_90"), zip(spaces, boxes, strict=True)
            )
        )
    assert all(r.ok for r in results), [r.feedback() for r in results]


SINGLE_FILE = '''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = """
__global__ void relu_kernel(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
torch::Tensor relu_cuda(torch::Tensor x) {
    auto y = torch::empty_like(x);
    int n = x.numel();
    relu_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""
cpp_source = "torch::Tensor relu_cuda(torch::Tensor x);"

relu = load_inline(name="relu", cpp_sources=cpp_source, cuda_sources=cuda_source,
                   functions=["relu_cuda"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return relu.relu_cuda(x)
'''


def test_kernelbench_single_file_solution_builds_and_breaks_clearly(tmp_path: Path, cache: Path) -> None:
    good = tmp_path / "level_1_problem_19_sample_0_kernel.py"
    good.write_text(SINGLE_FILE)
    solution = SingleFileSolution(good)
    box = open_sandbox("local", workspace=solution.root, cache_dir=cache)
    result = compile_solution(solution, box, arch="sm_90")
    assert result.ok, result.feedback()
    assert compile_solution(solution, box, arch="sm_90").status == "up_to_date"

    good.write_text(SINGLE_FILE.replace("y[i] = x[i]", "y[i] = q[i]"))
    result = compile_solution(solution, box, arch="sm_90")
    assert not result.ok
    # Named where the model wrote it: the line of the solution, not of torch's generated cuda.cu.
    assert result.errors and result.errors[0].file == good.name
    assert (
        result.errors[0].line
        == SINGLE_FILE.splitlines().index("    if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;") + 1
    )
    assert 'identifier "q" is undefined' in result.errors[0].message
    assert "cuda.cu:" in result.errors[0].context
    assert json.loads(result.model_dump_json())["solution_kind"] == "single_file"


def test_a_new_workspace_reuses_the_prepared_toolchain(built: Workspace, tmp_path: Path, cache: Path) -> None:
    toolchains = list((cache / "toolchain").iterdir())
    assert len(toolchains) == 1 and (toolchains[0] / "header.ninja").is_file()
    fresh = relu_workspace(tmp_path / "fresh")
    result = compile_solution(
        fresh, open_sandbox("local", workspace=fresh.root, cache_dir=cache), arch="sm_90"
    )
    assert result.ok and result.mode == "configure"
    log = Path(result.log_path or "").read_text()
    assert "kernel_agent_torch.h" in log  # the precompiled torch headers are used
    assert "Winvalid-pch" in log and "warning: " not in log.split("kernel_agent_torch.h.gch")[-1]
    assert list((cache / "toolchain").iterdir()) == toolchains


def test_the_build_worker_gives_way_to_timings(tmp_path: Path) -> None:
    """Compiles run below normal priority, so a timing loop beside a batch's builds gets its core."""
    import subprocess
    import sys

    from agent.build.compile import parse_worker_result
    from sandbox.base import WORKERS_DIR
    from sandbox.workers.build.build import BUILD_NICENESS

    spec = {
        "kind": "single_file",
        "solution": str(tmp_path / "missing.py"),
        "build_dir": str(tmp_path),
        "cache_dir": str(tmp_path / "cache"),
    }
    done = subprocess.run(
        [sys.executable, "-I", str(WORKERS_DIR / "build/build.py"), json.dumps(spec)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    record = parse_worker_result(done.stdout)
    assert record is not None and not record["ok"] and "missing.py" in record["log"]
    assert record["niceness"] >= BUILD_NICENESS
