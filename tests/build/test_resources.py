"""Per-kernel resources from ptxas (registers, spills, shared and constant memory), theoretical
occupancy, the table the compile tool shows, and the error summary that leaves them out."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from agent.build.diagnostics import parse_log
from agent.build.resources import (
    RESOURCES_FILE,
    base_name,
    inline_resources,
    kernel_resources,
    launch_bounds,
    occupancy,
    parse_ptxas,
    render_resources,
    without_resource_lines,
    workspace_resources,
)
from agent.workspace import Workspace

# nvcc 13 (sm_90): registers and barriers, shared memory only when used, no constant banks.
NVCC13_LOG = """\
[1/3] /usr/local/cuda/bin/nvcc --generate-dependencies-with-compile -O3 -lineinfo --resource-usage \
-c /workspace/kernels/gemm.cu -o gemm.cuda.o
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_Z11gemm_kernelPKfS0_Pfiii' for 'sm_90'
ptxas info    : Function properties for _Z11gemm_kernelPKfS0_Pfiii
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 128 registers, used 1 barriers, 16384 bytes smem
ptxas info    : Compile time = 41.112 ms
ptxas info    : Compiling entry function '_ZN5fused8epilogueILi4EEEvPfPKfi' for 'sm_90'
ptxas info    : Function properties for _ZN5fused8epilogueILi4EEEvPfPKfi
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 24 registers, used 0 barriers
ptxas info    : Compile time = 3.018 ms
[2/3] /usr/local/cuda/bin/nvcc --generate-dependencies-with-compile -O3 -lineinfo --resource-usage \
-c /workspace/kernels/spill.cu -o spill.cuda.o
ptxas info    : Compiling entry function '_Z5spillPfPKf' for 'sm_90'
ptxas info    : Function properties for _Z5spillPfPKf
    336 bytes stack frame, 336 bytes spill stores, 512 bytes spill loads
ptxas info    : Used 32 registers, used 0 barriers, 336 bytes cumulative stack size
[3/3] c++ gemm.cuda.o spill.cuda.o binding.o -shared -o kernel_agent_extension.so
"""

# CUDA 11/12 style (sm_80): constant banks listed, no barriers.
NVCC12_LOG = """\
ptxas info    : Compiling entry function '_Z4reluPKfPfi' for 'sm_80'
ptxas info    : Function properties for _Z4reluPKfPfi
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 10 registers, 380 bytes cmem[0], 1024 bytes cmem[3]
"""

GEMM_SOURCE = """\
#define TILE 64
__global__ void __launch_bounds__(TILE * 4) other(float* x) {}
__global__ void __launch_bounds__(128, 2) gemm_kernel(const float* a, const float* b, float* c,
                                                       int m, int n, int k) {}
namespace fused {
template <int V> __global__ __launch_bounds__(TILE) void epilogue(float* y, const float* x, int n) {}
}
"""


def test_each_entry_function_is_read_with_its_source_file() -> None:
    found = parse_ptxas(NVCC13_LOG)
    assert [(src, k.mangled) for src, k in found] == [
        ("/workspace/kernels/gemm.cu", "_Z11gemm_kernelPKfS0_Pfiii"),
        ("/workspace/kernels/gemm.cu", "_ZN5fused8epilogueILi4EEEvPfPKfi"),
        ("/workspace/kernels/spill.cu", "_Z5spillPfPKf"),
    ]
    gemm, epilogue, spill = (k for _, k in found)
    assert (gemm.registers, gemm.shared_bytes, gemm.barriers, gemm.arch) == (128, 16384, 1, "sm_90")
    assert (epilogue.registers, epilogue.shared_bytes) == (24, 0)
    assert (spill.spill_store_bytes, spill.spill_load_bytes, spill.stack_frame_bytes) == (336, 512, 336)


def test_constant_banks_of_the_older_format_are_summed() -> None:
    ((source, relu),) = parse_ptxas(NVCC12_LOG)
    assert source is None and relu.registers == 10 and relu.constant_bytes == 1404 and relu.arch == "sm_80"


@pytest.mark.skipif(shutil.which("c++filt") is None, reason="c++filt is not installed")
def test_names_are_demangled_and_matched_to_their_launch_bounds() -> None:
    compiled, kernels = kernel_resources(
        NVCC13_LOG, sandbox_root="/workspace", sources={"kernels/gemm.cu": GEMM_SOURCE}
    )
    assert compiled == {"kernels/gemm.cu", "kernels/spill.cu"}
    by_name = {base_name(k.kernel): k for k in kernels}
    assert by_name["gemm_kernel"].kernel == "gemm_kernel(float const*, float const*, float*, int, int, int)"
    assert by_name["gemm_kernel"].source == "kernels/gemm.cu"
    gemm = by_name["gemm_kernel"].occupancy
    assert gemm is not None and (gemm.threads_per_block, gemm.block_size_from) == (128, "launch bounds")
    epilogue = by_name["epilogue"].occupancy
    assert by_name["epilogue"].kernel == "void fused::epilogue<4>(float*, float const*, int)"
    assert epilogue is not None and epilogue.threads_per_block == 64  # TILE, a #define
    spill = by_name["spill"].occupancy
    assert spill is not None and (spill.threads_per_block, spill.block_size_from) == (256, "assumed")


def test_launch_bounds_read_numbers_and_named_constants() -> None:
    text = "constexpr int kThreads = 512;\n__global__ void __launch_bounds__(kThreads) k(int* p) {}\n"
    # An expression (TILE * 4) is not evaluated: that kernel is shown at the assumed block size.
    assert launch_bounds({"a.cu": GEMM_SOURCE, "b.cu": text}) == {
        "gemm_kernel": 128,
        "epilogue": 64,
        "k": 512,
    }


@pytest.mark.parametrize(
    ("registers", "shared", "arch", "threads", "percent", "blocks", "limiter"),
    [
        (142, 0, "sm_90", 256, 12.5, 1, "registers"),  # 144 regs/thread: 3 warps per scheduler
        (32, 0, "sm_90", 256, 100.0, 8, "threads"),
        (64, 0, "sm_90", 256, 50.0, 4, "registers"),
        (16, 48 * 1024, "sm_86", 256, 100 * 16 / 48, 2, "shared memory"),  # 49 KiB with the reserved 1 KiB
        (16, 48 * 1024, "sm_80", 256, 100 * 24 / 64, 3, "shared memory"),
        (16, 0, "sm_90a", 32, 100 * 32 / 64, 32, "blocks per SM"),
        (16, 0, "sm_89", 1024, 100 * 32 / 48, 1, "threads"),
    ],
)
def test_theoretical_occupancy_follows_the_occupancy_calculator(
    registers: int, shared: int, arch: str, threads: int, percent: float, blocks: int, limiter: str
) -> None:
    result = occupancy(registers, shared, arch, threads, "assumed")
    assert result is not None
    assert (result.blocks_per_sm, result.limiter) == (blocks, limiter)
    assert 100 * result.fraction == pytest.approx(percent)


def test_an_unknown_architecture_has_no_occupancy() -> None:
    assert occupancy(32, 0, "sm_61", 256, "assumed") is None


def test_the_table_states_the_block_size_and_flags_spills() -> None:
    _, kernels = kernel_resources(NVCC13_LOG, sandbox_root="/workspace", sources={})
    table = render_resources(kernels)
    assert "regs | spill st/ld B | smem B" in table
    assert "at 256 threads/block" in table
    assert "| 336/512 |" in table
    assert "1 kernel(s) spill registers to local memory" in table
    assert render_resources([]) == ""


def test_a_failed_builds_error_summary_leaves_the_resource_lines_out() -> None:
    log = (
        NVCC13_LOG.split("[2/3]")[0]
        + 'FAILED: spill.cuda.o\n/workspace/kernels/spill.cu(3): error: identifier "n" is undefined\n'
        + "ptxas info    : Compiling entry function '_Z1kv' for 'sm_90'\n"
    )
    stripped = without_resource_lines(log)
    assert "ptxas info" not in stripped and "bytes spill stores" not in stripped
    assert 'error: identifier "n" is undefined' in stripped
    errors, _ = parse_log(stripped)
    assert [e.message for e in errors] == ['identifier "n" is undefined']


def test_an_incremental_build_keeps_the_facts_of_files_it_did_not_recompile(tmp_path: Path) -> None:
    ws = Workspace(tmp_path)
    (tmp_path / "kernels").mkdir()
    (tmp_path / "binding.cpp").write_text("")
    (tmp_path / "kernels" / "gemm.cu").write_text(GEMM_SOURCE)
    (tmp_path / "kernels" / "spill.cu").write_text("")
    first = workspace_resources(ws, NVCC13_LOG, "/workspace")
    assert len(first) == 3 and (tmp_path / RESOURCES_FILE).is_file()
    only_spill = "[1/2] nvcc -O3 -c /workspace/kernels/spill.cu -o spill.cuda.o\n" + NVCC12_LOG.replace(
        "_Z4reluPKfPfi", "_Z5spillPfPKf"
    )
    second = workspace_resources(ws, only_spill, "/workspace")
    assert sorted((k.source, k.registers) for k in second) == [
        ("kernels/gemm.cu", 24),
        ("kernels/gemm.cu", 128),
        ("kernels/spill.cu", 10),
    ]
    assert workspace_resources(ws, None, "/workspace") == second  # an unchanged build shows the same
    (tmp_path / "kernels" / "gemm.cu").unlink()
    assert [k.source for k in workspace_resources(ws, None, "/workspace")] == ["kernels/spill.cu"]


# ninja's output of a load_inline build routed through a cut-down copy (inline_build.py).
INLINE_LOG = """\
[1/3] /usr/bin/python3 /workers/nvcc_parallel.py /usr/local/cuda/bin/nvcc -DTORCH_EXTENSION_NAME=relu_ext \
-c /cache/build/abc/relu_ext/cuda.min.cu -o cuda.cuda.o --resource-usage
ptxas info    : Compiling entry function '_Z11relu_kernelPKfPfl' for 'sm_90'
ptxas info    : Function properties for _Z11relu_kernelPKfPfl
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 10 registers, used 0 barriers
[2/3] c++ -c /cache/build/abc/relu_ext/main.cpp -o main.o
[3/3] c++ main.o cuda.cuda.o -shared -o relu_ext.so
"""


def test_a_single_files_kernels_are_named_by_the_cu_load_inline_wrote_and_kept_per_extension() -> None:
    other = inline_resources(NVCC12_LOG.replace("sm_80", "sm_90"), build_dir="/x", solution_text="", kept=[])[
        0
    ].model_copy(update={"source": "gelu_ext/cuda.cu"})
    stale = other.model_copy(update={"source": "relu_ext/cuda.cu", "registers": 99})
    source = "__global__ void __launch_bounds__(512) relu_kernel(const float* x, float* y, long n) {}"

    kernels = inline_resources(
        INLINE_LOG, build_dir="/cache/build/abc", solution_text=source, kept=[other, stale]
    )

    assert [(base_name(k.kernel), k.source) for k in kernels] == [
        ("relu", "gelu_ext/cuda.cu"),  # an extension this build did not recompile keeps its facts
        ("relu_kernel", "relu_ext/cuda.cu"),  # the rebuilt one's replace what was kept
    ]
    relu = kernels[1]
    assert relu.registers == 10 and relu.occupancy is not None
    assert relu.occupancy.threads_per_block == 512  # launch bounds read from the .py's CUDA string
    assert inline_resources(None, build_dir="/cache/build/abc", solution_text=source, kept=kernels) == kernels


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_a_real_nvcc_build_reports_every_kernel(tmp_path: Path) -> None:
    source = tmp_path / "tiny.cu"
    source.write_text(
        "__global__ void __launch_bounds__(128) scale(float* x, float a, int n) {\n"
        "  __shared__ float tile[128];\n"
        "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "  tile[threadIdx.x] = i < n ? x[i] : 0.f;\n"
        "  __syncthreads();\n"
        "  if (i < n) x[i] = a * tile[127 - threadIdx.x];\n"
        "}\n"
    )
    done = subprocess.run(
        ["nvcc", "-c", "-O3", "-arch=sm_90", "--resource-usage", str(source), "-o", str(tmp_path / "t.o")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    log = f"[1/1] nvcc -c {source} -o t.o\n" + done.stdout + done.stderr
    compiled, kernels = kernel_resources(
        log, sandbox_root=str(tmp_path), sources={"tiny.cu": source.read_text()}
    )
    assert compiled == {"tiny.cu"}
    (scale,) = kernels
    assert base_name(scale.kernel) == "scale" and scale.arch == "sm_90"
    assert scale.registers > 0 and scale.shared_bytes == 512 and scale.spill_store_bytes == 0
    assert scale.occupancy is not None and scale.occupancy.threads_per_block == 128
