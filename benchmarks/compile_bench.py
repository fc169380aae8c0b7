"""Compile-time benchmark for a one-kernel workspace (the ReLU example).

Measures, through the product's own `compile_solution` and the local sandbox:
  first      a fresh cache: prepares the shared toolchain (ninja variables from torch, the
             precompiled torch headers) once per machine/torch/arch, then builds
  cold       a new workspace, toolchain already prepared (every later workspace)
  unchanged  the same workspace again (must be a no-op)
  cu_edit    after editing only kernels/relu.cu
and optionally a KernelBench-style `load_inline` single-file solution for comparison.

usage: python benchmarks/compile_bench.py [--repeats 3] [--arch sm_90] [--load-inline] [--out FILE.md]
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from agent.build.compile import compile_solution  # noqa: E402
from agent.build.toolkit import find_toolkit  # noqa: E402
from agent.tasks import parse_task  # noqa: E402
from agent.workspace import SingleFileSolution, Workspace  # noqa: E402
from sandbox.base import open_sandbox  # noqa: E402

TASK = REPO / "benchmarks" / "tasks" / "level1" / "19_ReLU.py"
EXAMPLE = REPO / "skills" / "cuda-extension" / "examples" / "relu"
TARGETS = {"cold": 12.0, "unchanged": 0.5, "cu_edit": 5.0}

LOAD_INLINE = '''
import torch
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
relu = load_inline(name="relu_bench", cpp_sources="torch::Tensor relu_cuda(torch::Tensor x);",
                   cuda_sources=cuda_source, functions=["relu_cuda"])
class ModelNew(torch.nn.Module):
    def forward(self, x):
        return relu.relu_cuda(x)
'''


def new_workspace(root: Path) -> Workspace:
    ws = Workspace.create(root, parse_task(TASK))
    shutil.copytree(EXAMPLE / "kernels", ws.root / "kernels", dirs_exist_ok=True)
    shutil.copy(EXAMPLE / "model_new.py", ws.root / "model_new.py")
    return ws


def first_build(scratch: Path, arch: str) -> float:
    ws = new_workspace(scratch / "first")
    result = compile_solution(
        ws, open_sandbox("local", workspace=ws.root, cache_dir=scratch / "cache"), arch=arch
    )
    if not result.ok:
        raise SystemExit(f"first build failed:\n{result.feedback()}")
    return result.duration_s


def one_round(scratch: Path, arch: str, index: int) -> dict[str, float]:
    ws = new_workspace(scratch / f"ws{index}")
    box = open_sandbox("local", workspace=ws.root, cache_dir=scratch / "cache")
    times: dict[str, float] = {}
    for stage in ("cold", "unchanged", "cu_edit"):
        if stage == "cu_edit":
            kernel = ws.root / "kernels" / "relu.cu"
            kernel.write_text(kernel.read_text().replace("fmaxf(v.w, 0.f);", "fmaxf(v.w, 0.0f);"))
        result = compile_solution(ws, box, arch=arch)
        if not result.ok:
            raise SystemExit(f"{stage} build failed:\n{result.feedback()}")
        expected = {"cold": "built", "unchanged": "up_to_date", "cu_edit": "built"}[stage]
        if result.status != expected:
            raise SystemExit(f"{stage}: expected status {expected}, got {result.status}")
        times[stage] = result.duration_s
    return times


def load_inline_round(scratch: Path, arch: str) -> float:
    path = scratch / "single" / "level_1_problem_19_sample_0_kernel.py"
    path.parent.mkdir(parents=True)
    path.write_text(LOAD_INLINE)
    solution = SingleFileSolution(path)
    result = compile_solution(
        solution, open_sandbox("local", workspace=solution.root, cache_dir=scratch / "cache"), arch=arch
    )
    if not result.ok:
        raise SystemExit(f"load_inline build failed:\n{result.feedback()}")
    return result.duration_s


def machine() -> str:
    gpu = ""
    try:
        gpu = (
            subprocess.run(
                ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                timeout=20,
            )
            .stdout.strip()
            .splitlines()[0]
        )
    except (OSError, IndexError, subprocess.TimeoutExpired):
        gpu = "no GPU"
    cpu = platform.processor() or "x86_64"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{os.cpu_count()} cores ({cpu}); {gpu}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--arch", default="sm_90")
    parser.add_argument("--load-inline", action="store_true")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    rounds = []
    inline_times = []
    with tempfile.TemporaryDirectory(prefix="compile-bench-") as tmp:
        first = first_build(Path(tmp), args.arch)
        print(f"first build (toolchain prep + build): {first:.2f}s", flush=True)
        for i in range(args.repeats):
            rounds.append(one_round(Path(tmp), args.arch, i))
            print(f"round {i + 1}: " + ", ".join(f"{k} {v:.2f}s" for k, v in rounds[-1].items()), flush=True)
        if args.load_inline:
            inline_times.append(load_inline_round(Path(tmp), args.arch))

    import torch

    lines = [
        "## Compile benchmark: one-kernel workspace (ReLU example)",
        "",
        f"- date: {dt.datetime.now(dt.UTC).strftime('%Y-%m-%d %H:%M UTC')}",
        f"- machine: {machine()}",
        f"- torch {torch.__version__}, nvcc {find_toolkit().nvcc_version}, arch {args.arch}, "
        f"MAX_JOBS={os.environ.get('MAX_JOBS', 'default (ninja: cores+2)')}",
        f"- command: `python benchmarks/compile_bench.py --repeats {args.repeats} --arch {args.arch}"
        + (" --load-inline" if args.load_inline else "")
        + "`",
        "",
        "| stage | median s | min s | max s | target (H200) |",
        "|---|---|---|---|---|",
    ]
    lines.append(
        f"| first build on a fresh cache (toolchain prep + build) | {first:.3f} | | | (once per machine) |"
    )
    for stage in ("cold", "unchanged", "cu_edit"):
        values = [r[stage] for r in rounds]
        lines.append(
            f"| {stage} | {statistics.median(values):.3f} | {min(values):.3f} | {max(values):.3f} | <= {TARGETS[stage]} s |"
        )
    if inline_times:
        lines.append(
            f"| load_inline single file (KernelBench style), cold | {inline_times[0]:.3f} | | | (reference) |"
        )
    table = "\n".join(lines) + "\n"
    print(table)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(table)


if __name__ == "__main__":
    main()
