"""nvcc's steps run as a graph (sandbox/workers/build/nvcc_parallel.py): what it builds is what nvcc
builds, a failing step reads as nvcc's failure, and what it does not plan goes to nvcc as is."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import sandbox.workers.siblings  # noqa: F401  (the workers import each other by name)
from sandbox.workers.build import nvcc_parallel

NVCC = Path("/usr/local/cuda/bin/nvcc")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not NVCC.is_file(), reason=f"no nvcc at {NVCC}"),
]
ARCH = "-gencode=arch=compute_90,code=sm_90"

SOURCE = """\
#include <cstdio>
template <typename T> __device__ T twice(T v) { return v + v; }
__global__ void scale(float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = twice(x[i]);
}
void launch(float* x, int n) { scale<<<(n + 255) / 256, 256>>>(x, n); }
"""


def compile_both(tmp_path: Path, source: str, *flags: str) -> tuple[subprocess.CompletedProcess, ...]:
    (tmp_path / "k.cu").write_text(source)
    runs = []
    for name, prefix in (
        ("nvcc", [str(NVCC)]),
        ("graph", [sys.executable, nvcc_parallel.__file__, str(NVCC)]),
    ):
        args = ["-MD", "-MF", f"{name}.d", ARCH, "-O3", *flags, "-c", "k.cu", "-o", f"{name}.o"]
        runs.append(subprocess.run([*prefix, *args], cwd=tmp_path, capture_output=True, text=True))
    return tuple(runs)


def defined_symbols(obj: Path) -> set[str]:
    out = subprocess.run(
        ["nm", "--defined-only", str(obj)], capture_output=True, text=True, check=True
    ).stdout
    # The static initializer is named after nvcc's temporary file, which differs by design.
    return {line.split()[-1] for line in out.splitlines() if "_GLOBAL__sub_I_" not in line}


def depfile_headers(path: Path) -> set[str]:
    text = path.read_text().replace("\\\n", " ")
    return set(text.split(":", 1)[1].split())


def test_it_builds_what_nvcc_builds_and_lists_the_same_headers(tmp_path: Path) -> None:
    nvcc, graph = compile_both(tmp_path, SOURCE, "-Xptxas", "-v")
    assert nvcc.returncode == graph.returncode == 0, graph.stderr
    assert defined_symbols(tmp_path / "graph.o") == defined_symbols(tmp_path / "nvcc.o")
    assert any("scale" in s for s in defined_symbols(tmp_path / "graph.o"))
    assert depfile_headers(tmp_path / "graph.d") == depfile_headers(tmp_path / "nvcc.d")
    assert (tmp_path / "graph.d").read_text().startswith("graph.o:")
    assert "Used" in graph.stdout + graph.stderr  # ptxas's report passes through, as nvcc's does


@pytest.mark.parametrize(
    "source",
    [
        pytest.param("__global__ void k(float* x) { x[0] = y; }\n", id="host_and_device"),
        pytest.param(
            '__global__ void k(float* x) { x[0] = 1; }\n#ifdef __CUDA_ARCH__\nstatic_assert(false, "device");\n#endif\n',
            id="device_only",
        ),
    ],
)
def test_a_failing_step_reads_as_nvcc_failing(tmp_path: Path, source: str) -> None:
    nvcc, graph = compile_both(tmp_path, source)
    assert nvcc.returncode != 0 and graph.returncode == nvcc.returncode
    assert graph.stderr == nvcc.stderr and graph.stdout == nvcc.stdout
    assert not (tmp_path / "graph.o").exists()


def test_differing_module_ids_run_the_device_branch_again_on_cudafes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(nvcc_parallel, "_same_module_id", lambda steps: False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "k.cu").write_text(SOURCE)
    rerun: list[list[str]] = []
    execute = nvcc_parallel._execute

    def recording(step: nvcc_parallel.Step, env: dict[str, str]) -> bool:
        rerun.append(list(step.argv)) if step.kind == "cicc" else None
        return execute(step, env)

    monkeypatch.setattr(nvcc_parallel, "_execute", recording)
    assert nvcc_parallel.main([str(NVCC), ARCH, "-c", "k.cu", "-o", "k.o"]) == 0
    assert len(rerun) == 2 and "--gen_module_id_file" in rerun[0] and "--gen_module_id_file" not in rerun[1]
    assert (tmp_path / "k.o").stat().st_size > 0


def test_what_it_does_not_plan_goes_to_nvcc_as_is(tmp_path: Path) -> None:
    two_archs = [ARCH, "-gencode=arch=compute_80,code=sm_80", "-c", "k.cu", "-o", "k.o"]
    (tmp_path / "k.cu").write_text(SOURCE)
    assert nvcc_parallel._plan(str(NVCC), two_archs, tmp_path) is None
    assert nvcc_parallel._plan(str(NVCC), ["-rdc=true", ARCH, "-c", "k.cu", "-o", "k.o"], tmp_path) is None
    done = subprocess.run(
        [sys.executable, nvcc_parallel.__file__, str(NVCC), *two_archs], cwd=tmp_path, capture_output=True
    )
    assert done.returncode == 0 and (tmp_path / "k.o").is_file()


def test_a_dry_run_it_cannot_read_goes_to_nvcc_as_is(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "k.cu").write_text(SOURCE)
    monkeypatch.chdir(tmp_path)
    run = subprocess.run

    def unbalanced_dry_run(argv: list[str], **kwargs: object) -> subprocess.CompletedProcess:
        if "--dryrun" in argv:
            return subprocess.CompletedProcess(argv, 0, "", '#$ gcc -E "k.cu -o k.cpp4.ii\n')
        return run(argv, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(subprocess, "run", unbalanced_dry_run)
    assert nvcc_parallel.main([str(NVCC), ARCH, "-c", "k.cu", "-o", "k.o"]) == 0
    assert (tmp_path / "k.o").is_file()
