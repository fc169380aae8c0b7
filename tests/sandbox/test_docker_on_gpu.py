"""The docker sandbox on a real GPU: only for a GPU machine with a Docker daemon
(benchmarks/docker_gpu/run_on_gpu.sh starts one from carried .debs). The image is
$KERNEL_AGENT_IMAGE when the daemon has it, else a host-stack image built here. Run with:

    pytest -m "gpu and docker" tests/sandbox/test_docker_on_gpu.py -v
"""

from __future__ import annotations

import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from sandbox.base import SandboxError
from sandbox.docker import DockerSandbox
from sandbox.docker_host import default_image
from sandbox.image import build_host_stack_image

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.docker,
    pytest.mark.skipif(
        not torch.cuda.is_available(), reason="needs a CUDA GPU (torch.cuda.is_available() is False)"
    ),
]

ROOT = Path(__file__).resolve().parents[2]
RELU_TASK = ROOT / "benchmarks" / "tasks" / "level1" / "19_ReLU.py"
RELU_EXAMPLE = ROOT / "skills" / "cuda-extension" / "examples" / "relu"
CACHE_VOLUME = "kernel-agent-gpu-test-cache"
CUDA_PROBE = (
    "import torch\n"
    "n = torch.cuda.device_count()\n"
    "p = torch.cuda.get_device_properties(0)\n"
    "x = torch.arange(1 << 20, device='cuda', dtype=torch.float32)\n"
    "print(n, str(p.uuid), float(x.sum()), p.name)\n"
)


@pytest.fixture(scope="module")
def gpu_image(docker_client: Any) -> Iterator[str]:
    tag = default_image()
    try:
        docker_client.images.get(tag)
        yield tag
        return
    except Exception:  # not there: a host-stack image of this machine's own stack
        pass
    tag = f"kernel-agent-test/host-stack-gpu:{uuid.uuid4().hex[:8]}"
    try:
        build_host_stack_image(tag, client=docker_client)
    except SandboxError as exc:
        pytest.skip(f"cannot build a host-stack image here: {exc}")
    yield tag
    docker_client.images.remove(tag, force=True)


def open_box(workspace: Path, client: Any, image: str, **options: Any) -> DockerSandbox:
    return DockerSandbox(
        workspace=workspace, image=image, client=client, cache_volume=CACHE_VOLUME, **options
    )


def host_uuids() -> list[str]:
    return [str(torch.cuda.get_device_properties(i).uuid) for i in range(torch.cuda.device_count())]


def test_the_container_gets_exactly_the_gpu_asked_for(
    tmp_path: Path, docker_client: Any, gpu_image: str
) -> None:
    uuids = host_uuids()
    for index in {0, len(uuids) - 1}:
        with open_box(tmp_path, docker_client, gpu_image, gpus=str(index)) as box:
            assert isinstance(box, DockerSandbox)
            mode = box.gpu_plan.mode
            print(box.describe())
            result = box.exec([box.python, "-I", "-c", CUDA_PROBE], timeout=180)
        assert result.ok, result.stderr[-3000:]
        count, seen_uuid, total, *_ = result.stdout.split()
        assert count == "1", result.stdout  # only the asked GPU, renumbered 0
        assert seen_uuid == uuids[index], (index, result.stdout, uuids)
        assert float(total) == float((1 << 20) * ((1 << 20) - 1) / 2)
        if "nvidia" not in (docker_client.info().get("Runtimes") or {}):
            assert mode == "host-devices"


def test_all_gpus_and_nvidia_smi(tmp_path: Path, docker_client: Any, gpu_image: str) -> None:
    with open_box(tmp_path, docker_client, gpu_image, gpus="all") as box:
        count = box.exec(
            [box.python, "-I", "-c", "import torch; print(torch.cuda.device_count())"], timeout=120
        )
        smi = box.exec(
            ["sh", "-c", "/opt/kernel-agent/nvidia/bin/nvidia-smi -L || nvidia-smi -L"], timeout=60
        )
        still = box.exec(
            ["sh", "-c", "touch /usr/x 2>/dev/null || echo ro; cat /proc/self/status | grep CapEff"],
            timeout=30,
        )
    assert count.ok and int(count.stdout) == torch.cuda.device_count(), count
    print("nvidia-smi in the container:", smi.returncode, smi.stdout, smi.stderr)
    assert smi.ok and "GPU 0" in smi.stdout, smi
    assert "ro" in still.stdout and "CapEff:\t0000000000000000" in still.stdout, still


def test_a_real_extension_builds_and_runs_on_the_gpu(
    tmp_path: Path, docker_client: Any, gpu_image: str
) -> None:
    (tmp_path / "kernel.cu").write_text(
        "#include <cuda_runtime.h>\n"
        "__global__ void fill(int* out, int n) {\n"
        "  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) out[i] = i; }\n"
        "int launch_fill(int n) {\n"
        "  int* d; if (cudaMalloc(&d, n * sizeof(int)) != cudaSuccess) return -1;\n"
        "  fill<<<(n + 255) / 256, 256>>>(d, n); int last = -1;\n"
        "  cudaMemcpy(&last, d + n - 1, sizeof(int), cudaMemcpyDeviceToHost); cudaFree(d); return last; }\n"
    )
    (tmp_path / "bind.cpp").write_text(
        "#include <pybind11/pybind11.h>\nint launch_fill(int n);\n"
        'PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("launch_fill", &launch_fill); }\n'
    )
    script = (
        "import os, torch\nfrom torch.utils.cpp_extension import load\n"
        "os.makedirs('/workspace/build', exist_ok=True)\n"
        "m = load('ka_gpu_probe', ['/workspace/bind.cpp', '/workspace/kernel.cu'], build_directory='/workspace/build')\n"
        "print('gpu', m.launch_fill(1000))\n"
    )
    with open_box(tmp_path, docker_client, gpu_image, gpus="0") as box:
        result = box.exec([box.python, "-I", "-c", script], timeout=600, env={"TORCH_CUDA_ARCH_LIST": "9.0"})
    assert result.ok, result.stderr[-3000:]
    assert "gpu 999" in result.stdout


def test_the_referee_judges_the_relu_example_in_docker_as_locally(
    tmp_path: Path, docker_client: Any, gpu_image: str
) -> None:
    from agent.referee import EvalOptions, evaluate
    from agent.referee.baselines import BaselineCache
    from agent.tasks import load_task
    from agent.workspace import materialize

    baselines = BaselineCache(tmp_path / "baselines.json")
    task = load_task(RELU_TASK, instantiate=False)
    verdicts = {}
    for kind in ("local", "docker"):
        # As the harness does: the example made into the workspace the referee builds in, and
        # the sandbox opened over that workspace.
        solution = materialize(task, Path(shutil.copytree(RELU_EXAMPLE, tmp_path / kind)))
        options = EvalOptions(trials=2, profile=False, run_timeout_s=300.0)  # type: ignore[call-arg]
        if kind == "docker":
            with open_box(solution.root, docker_client, gpu_image, gpus="0") as box:
                result = evaluate(task, solution, options, sandbox=box, baseline_cache=baselines)
        else:
            result = evaluate(task, solution, options, sandbox="local", baseline_cache=baselines)
        print(kind, result.verdict, result.feedback()[:2000])
        verdicts[kind] = result.verdict
    assert verdicts == {"local": "correct", "docker": "correct"}


def test_host_gpu_facts_for_the_log() -> None:
    """Not a check: what the host shows, for the log next to the results above."""
    for cmd in (
        ["sh", "-c", "ls -l /dev/nvidia* 2>&1"],
        ["sh", "-c", "ldconfig -p | grep -E 'libcuda|libnvidia-ml' 2>&1"],
    ):
        print(subprocess.run(cmd, capture_output=True, text=True, check=False).stdout)
