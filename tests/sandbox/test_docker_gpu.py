"""GPUs in the docker sandbox without the NVIDIA runtime: the exact container request (the kwargs
given to docker-py's containers.create) built from fake /dev, /proc/driver/nvidia and library
folders in tmp_path; with the runtime, device requests as before. Against the real daemon the
mapping runs with stand-in device nodes (/dev/null's numbers): no GPU machine here has Docker."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import sandbox.docker_gpu as docker_gpu
from agent.cli.sandbox import sandbox_app
from sandbox.base import SandboxError
from sandbox.docker import DockerSandbox
from sandbox.docker_gpu import CONTAINER_LIB_DIR, MODE_ENV, NvidiaHost, plan_gpus
from tests.sandbox.conftest import docker_options
from tests.sandbox.test_docker import FakeClient

DRIVER = "580.159.04"
# Bus order differs from the minor numbers, as it can on real machines: index 0 is /dev/nvidia2.
BUSES = {"0000:19:00.0": 2, "0000:3b:00.0": 0, "0000:4c:00.0": 1, "0000:5d:00.0": 3}


def fake_host(
    root: Path, *, gpus: int = 4, uvm: bool = True, libcuda: bool = True, proc: bool = True
) -> NvidiaHost:
    dev = root / "dev"
    dev.mkdir(parents=True)
    minors = [minor for _, minor in sorted(BUSES.items())[:gpus]] if proc else range(gpus)
    names = [f"nvidia{i}" for i in minors] + ["nvidiactl", "nvidia-modeset", "null"]
    names += ["nvidia-uvm", "nvidia-uvm-tools"] if uvm else []
    for name in names:
        (dev / name).touch()
    (dev / "nvidia-caps").mkdir()
    if proc:
        for i, (bus, minor) in enumerate(sorted(BUSES.items())[:gpus]):
            folder = root / "proc" / "gpus" / bus
            folder.mkdir(parents=True)
            (folder / "information").write_text(
                f"Model: \t\t NVIDIA H200\nIRQ:   \t\t 42\nGPU UUID: \t GPU-{i}{i}{i}-fake\nDevice Minor: \t {minor}\n"
            )
    lib = root / "usr" / "lib" / "x86_64-linux-gnu"
    lib.mkdir(parents=True)
    lib32 = root / "usr" / "lib" / "i386-linux-gnu"
    lib32.mkdir(parents=True)
    real = [
        f"libnvidia-ml.so.{DRIVER}",
        f"libnvidia-ptxjitcompiler.so.{DRIVER}",
        "libfoo.so.1",
        "libcudart.so.13",
    ]
    real += [f"libcuda.so.{DRIVER}"] if libcuda else []
    for name in real:
        (lib / name).write_text(name)
    (lib32 / "libcuda.so.1").write_text("32-bit")
    links = {
        "libnvidia-ml.so.1": f"libnvidia-ml.so.{DRIVER}",
        "libnvidia-ptxjitcompiler.so.1": f"libnvidia-ptxjitcompiler.so.{DRIVER}",
    }
    if libcuda:
        links |= {"libcuda.so.1": f"libcuda.so.{DRIVER}", "libcuda.so": "libcuda.so.1"}
    for name, target in links.items():
        (lib / name).symlink_to(target)
    listed = [
        f"\tlibnvidia-ml.so.1 (libc6,x86-64) => {lib}/libnvidia-ml.so.1",
        f"\tlibfoo.so.1 (libc6,x86-64) => {lib}/libfoo.so.1",
        f"\tlibcuda.so.1 (libc6) => {lib32}/libcuda.so.1",  # 32-bit: skipped
        f"\tlibcudart.so.13 (libc6,x86-64) => {lib}/libcudart.so.13",  # the toolkit's, not the driver's
    ]
    if libcuda:
        listed.insert(0, f"\tlibcuda.so.1 (libc6,x86-64, OS ABI: Linux 3.2.0) => {lib}/libcuda.so.1")
    ldconfig = f"{len(listed)} libs found in cache `/etc/ld.so.cache'\n" + "\n".join(listed) + "\n"
    bin_dir = root / "usr" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "nvidia-smi").write_text("#!/bin/sh\n")
    return NvidiaHost(
        dev_dir=dev,
        proc_dir=root / "proc",
        lib_dirs=(lib,),
        ldconfig=lambda: ldconfig,
        bin_dirs=(bin_dir,),
    )


def request(tmp_path: Path, host: NvidiaHost, **options: Any) -> dict[str, Any]:
    client = FakeClient(options.pop("runtimes", None))
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    box = DockerSandbox(workspace=workspace, image="some/image:1", client=client, gpu_host=host, **options)
    box.close()
    return client.run_calls[-1]


@pytest.fixture(autouse=True)
def no_mode_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(MODE_ENV, raising=False)


def test_without_the_runtime_only_the_asked_gpus_are_mapped(tmp_path: Path) -> None:
    host = fake_host(tmp_path / "host")
    dev, lib = host.dev_dir, host.lib_dirs[0]
    spec = request(tmp_path, host, gpus="1,3", mem_limit="2g", pids_limit=99)
    # Host GPU 1 is the second on the bus (minor 0), GPU 3 the fourth (minor 3).
    assert spec["devices"] == [
        f"{dev}/nvidia0:/dev/nvidia0:rwm",
        f"{dev}/nvidia3:/dev/nvidia3:rwm",
        f"{dev}/nvidiactl:/dev/nvidiactl:rwm",
        f"{dev}/nvidia-uvm:/dev/nvidia-uvm:rwm",
        f"{dev}/nvidia-uvm-tools:/dev/nvidia-uvm-tools:rwm",
        f"{dev}/nvidia-modeset:/dev/nvidia-modeset:rwm",
    ]
    assert spec["device_requests"] == []
    libs = {
        host_path: mount
        for host_path, mount in spec["volumes"].items()
        if mount["bind"].startswith(CONTAINER_LIB_DIR)
    }
    assert libs == {
        f"{lib}/libcuda.so.1": {"bind": f"{CONTAINER_LIB_DIR}/libcuda.so.1", "mode": "ro"},
        f"{lib}/libnvidia-ml.so.1": {"bind": f"{CONTAINER_LIB_DIR}/libnvidia-ml.so.1", "mode": "ro"},
        f"{lib}/libcuda.so": {"bind": f"{CONTAINER_LIB_DIR}/libcuda.so", "mode": "ro"},
        f"{lib}/libcuda.so.{DRIVER}": {"bind": f"{CONTAINER_LIB_DIR}/libcuda.so.{DRIVER}", "mode": "ro"},
        f"{lib}/libnvidia-ml.so.{DRIVER}": {
            "bind": f"{CONTAINER_LIB_DIR}/libnvidia-ml.so.{DRIVER}",
            "mode": "ro",
        },
        f"{lib}/libnvidia-ptxjitcompiler.so.1": {
            "bind": f"{CONTAINER_LIB_DIR}/libnvidia-ptxjitcompiler.so.1",
            "mode": "ro",
        },
        f"{lib}/libnvidia-ptxjitcompiler.so.{DRIVER}": {
            "bind": f"{CONTAINER_LIB_DIR}/libnvidia-ptxjitcompiler.so.{DRIVER}",
            "mode": "ro",
        },
    }
    smi = host.bin_dirs[0] / "nvidia-smi"
    assert spec["volumes"][str(smi)] == {"bind": "/opt/kernel-agent/nvidia/bin/nvidia-smi", "mode": "ro"}
    assert spec["environment"]["LD_LIBRARY_PATH"] == CONTAINER_LIB_DIR
    assert "CUDA_VISIBLE_DEVICES" not in spec["environment"]  # the container sees only its GPUs
    # Today's limits hold.
    assert spec["network_mode"] == "none" and spec["read_only"] is True
    assert spec["cap_drop"] == ["ALL"] and spec["security_opt"] == ["no-new-privileges"]
    assert (spec["mem_limit"], spec["memswap_limit"], spec["pids_limit"]) == ("2g", "2g", 99)
    assert "privileged" not in spec and "cap_add" not in spec
    assert all(
        mount["mode"] == "ro"
        for path, mount in spec["volumes"].items()
        if path != str(tmp_path / "ws") and mount["bind"] != "/cache"
    )


def test_gpus_by_uuid_and_all(tmp_path: Path) -> None:
    host = fake_host(tmp_path / "host")
    one = request(tmp_path, host, gpus="GPU-222-fake")
    assert [d.split(":")[1] for d in one["devices"]][:2] == ["/dev/nvidia1", "/dev/nvidiactl"]
    every = request(tmp_path, host, gpus="all")
    nodes = [d.split(":")[1] for d in every["devices"]]
    assert nodes[:4] == ["/dev/nvidia2", "/dev/nvidia0", "/dev/nvidia1", "/dev/nvidia3"]  # bus order
    auto = request(tmp_path, host)  # gpus="auto": all of them, mapped
    assert auto["devices"] == every["devices"]


def test_the_box_says_which_gpu_mode_it_uses(tmp_path: Path) -> None:
    host = fake_host(tmp_path / "host")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    box = DockerSandbox(
        workspace=workspace, image="some/image:1", client=FakeClient(), gpu_host=host, gpus="2"
    )
    try:
        assert box.gpu_plan.mode == "host-devices" and box.gpus == "2"
        assert box.capabilities.pinned_gpus == ("2",)
        text = box.describe()
        assert "host devices /dev/nvidia1, /dev/nvidiactl" in text
        assert "GPU mode host-devices: the daemon has no nvidia runtime" in text
    finally:
        box.close()


def test_without_proc_the_minor_is_the_index(tmp_path: Path) -> None:
    host = fake_host(tmp_path / "host", gpus=2, proc=False)
    spec = request(tmp_path, host, gpus="1")
    assert spec["devices"][0] == f"{host.dev_dir}/nvidia1:/dev/nvidia1:rwm"


def test_with_the_runtime_device_requests_stay(tmp_path: Path) -> None:
    host = fake_host(tmp_path / "host")
    spec = request(tmp_path, host, gpus="0,1", runtimes={"nvidia": {}, "runc": {}})
    assert spec["device_requests"][0]["DeviceIDs"] == ["0", "1"]
    assert "devices" not in spec and "LD_LIBRARY_PATH" not in spec["environment"]
    assert not any(m["bind"].startswith("/opt/kernel-agent/nvidia") for m in spec["volumes"].values())
    auto = request(tmp_path, host, runtimes={"nvidia": {}})
    assert auto["device_requests"][0]["Count"] == -1 and "devices" not in auto


def test_the_mode_can_be_forced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    host = fake_host(tmp_path / "host")
    forced = request(tmp_path, host, gpus="0", runtimes={"nvidia": {}}, gpu_mode="devices")
    assert forced["device_requests"] == [] and forced["devices"][0].endswith(":/dev/nvidia2:rwm")
    monkeypatch.setenv(MODE_ENV, "runtime")
    asked = request(tmp_path, host, gpus="0")  # no runtime: the daemon will refuse, clearly
    assert asked["device_requests"][0]["DeviceIDs"] == ["0"] and "devices" not in asked
    assert request(tmp_path, host)["device_requests"] == []  # auto + runtime mode, no runtime: none
    monkeypatch.setenv(MODE_ENV, "magic")
    with pytest.raises(SandboxError, match="GPU mode 'magic'"):
        request(tmp_path, host, gpus="0")


def test_no_gpu_asked_maps_nothing(tmp_path: Path) -> None:
    spec = request(tmp_path, fake_host(tmp_path / "host"), gpus=None)
    assert spec["device_requests"] == [] and "devices" not in spec
    assert "LD_LIBRARY_PATH" not in spec["environment"]


def test_a_host_without_gpus(tmp_path: Path) -> None:
    host = fake_host(tmp_path / "host", gpus=0)
    assert "devices" not in request(tmp_path, host)  # auto: none, and said so
    plan = plan_gpus("auto", runtimes={}, host=host)
    assert plan.mode == "none" and "no nvidia runtime" in plan.reason and "nvidia<N>" in plan.reason
    with pytest.raises(SandboxError, match="gpus='0' asked for, but the daemon has no nvidia runtime"):
        request(tmp_path, host, gpus="0")


def test_unknown_gpu_and_missing_driver_are_errors(tmp_path: Path) -> None:
    host = fake_host(tmp_path / "host", gpus=2)
    with pytest.raises(SandboxError, match=r"no GPU '5' on this host \(it has 0 \(GPU-000-fake\), 1"):
        request(tmp_path, host, gpus="0,5")
    bare = fake_host(tmp_path / "bare", libcuda=False)
    with pytest.raises(SandboxError, match=r"no libcuda\.so was found"):
        request(tmp_path, bare, gpus="0")


def test_a_missing_uvm_node_is_said(tmp_path: Path) -> None:
    host = fake_host(tmp_path / "host", uvm=False)
    plan = plan_gpus("0", runtimes={}, host=host)
    assert [d.split(":")[1] for d in plan.devices] == [
        "/dev/nvidia2",
        "/dev/nvidiactl",
        "/dev/nvidia-modeset",
    ]
    assert any("nvidia-uvm is missing" in note for note in plan.notes)


def test_info_names_the_gpu_mode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    host = fake_host(tmp_path / "host")
    monkeypatch.setattr(docker_gpu, "default_host", lambda: host)

    class Client(FakeClient):
        def ping(self) -> bool:
            return True

        def close(self) -> None: ...

    import docker

    monkeypatch.setattr(docker, "from_env", lambda **_: Client())
    monkeypatch.setenv("KERNEL_AGENT_CACHE", str(tmp_path / "cache"))
    runner = CliRunner()
    result = runner.invoke(sandbox_app, ["info", "--workspace", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "docker gpus: host-devices: /dev/nvidia2, /dev/nvidia0" in result.output
    assert f"driver libraries read-only at {CONTAINER_LIB_DIR}" in result.output
    as_json = json.loads(runner.invoke(sandbox_app, ["info", "--workspace", str(tmp_path), "--json"]).output)
    assert as_json["docker_gpus"]["mode"] == "host-devices"
    assert "libcuda.so.1" in as_json["docker_gpus"]["libraries"]
    docked = runner.invoke(sandbox_app, ["info", "--workspace", str(tmp_path), "--sandbox", "docker"])
    assert docked.exit_code == 0, docked.output
    assert "docker sandbox" in docked.output and "host devices /dev/nvidia2" in docked.output


# -- against the real daemon, with stand-in device nodes ------------------------------------------------


def stand_in_host(root: Path) -> NvidiaHost:
    """/dev/nvidia0, nvidiactl and nvidia-uvm as character devices with /dev/null's numbers, and
    a libcuda.so.1 that is a text file: what docker does with them is real, the GPU is not."""
    dev = root / "dev"
    dev.mkdir(parents=True)
    null = os.stat("/dev/null").st_rdev
    try:
        for name in ("nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm"):
            os.mknod(dev / name, stat.S_IFCHR | 0o666, null)
    except OSError as exc:
        pytest.skip(f"cannot create device nodes here ({exc})")
    lib = root / "lib"
    lib.mkdir()
    (lib / "libcuda.so.1").write_text("not really libcuda\n")
    return NvidiaHost(dev_dir=dev, proc_dir=root / "proc", lib_dirs=(lib,), ldconfig=None, bin_dirs=())


@pytest.mark.docker
def test_real_daemon_takes_the_mapping(tmp_path: Path, docker_client: Any, test_image: str) -> None:
    if "nvidia" in (docker_client.info().get("Runtimes") or {}):
        pytest.skip("this daemon has the nvidia runtime")
    host = stand_in_host(tmp_path / "host")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    options = {**docker_options(test_image, docker_client), "gpus": "1", "gpu_host": host}
    with DockerSandbox(workspace=workspace, **options) as box:
        assert box.gpu_plan.mode == "host-devices"
        probe = box.exec(
            [
                "sh",
                "-c",
                "ls /dev | grep nvidia | sort | tr '\\n' ' '; echo; stat -c %t:%T /dev/nvidia1; "
                f'echo "$LD_LIBRARY_PATH"; cat {CONTAINER_LIB_DIR}/libcuda.so.1; '
                f"echo x > {CONTAINER_LIB_DIR}/libcuda.so.1 2>/dev/null || echo read-only; "
                "echo hi > /dev/nvidia1 && echo writable-node",
            ],
            timeout=60,
        )
    assert probe.ok, probe.stderr
    lines = probe.stdout.splitlines()
    # Not nvidia0; sorted here, as the image's locale orders `sort` its own way.
    assert sorted(lines[0].split()) == ["nvidia-uvm", "nvidia1", "nvidiactl"]
    null = os.stat("/dev/null").st_rdev
    assert lines[1] == f"{os.major(null):x}:{os.minor(null):x}"
    assert lines[2:] == [CONTAINER_LIB_DIR, "not really libcuda", "read-only", "writable-node"]


def test_with_gpus_the_gate_folder_is_mounted_read_only_at_its_host_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The referee passes gate paths as the host names them, so the folder keeps its path inside;
    read-only is all flock needs. Without GPUs there is no gate to take and no mount."""
    monkeypatch.setenv("KERNEL_AGENT_CACHE", str(tmp_path / "cache"))
    gates = tmp_path / "cache" / "harness" / "gpu-locks"
    host = fake_host(tmp_path / "host")
    spec = request(tmp_path, host, gpus="1")
    assert spec["volumes"][str(gates)] == {"bind": str(gates), "mode": "ro"} and gates.is_dir()
    assert str(gates) not in request(tmp_path, host, gpus=None)["volumes"]
    workspace = tmp_path / "ws"
    with DockerSandbox(
        workspace=workspace, image="some/image:1", client=FakeClient(), gpu_host=host, gpus="1"
    ) as box:
        assert box.capabilities.sees_gpu_gates
    with DockerSandbox(workspace=workspace, image="some/image:1", client=FakeClient(), gpus=None) as box:
        assert not box.capabilities.sees_gpu_gates


@pytest.mark.docker
def test_real_daemon_container_waits_at_the_hosts_gate(
    tmp_path: Path, docker_client: Any, test_image: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lock the host holds on a gate file is seen by a process in the container (flock across
    the read-only bind mount), so a candidate there cannot take the GPU while another times."""
    from sandbox.workers.gpu.gpu_gate import GpuGate

    if "nvidia" in (docker_client.info().get("Runtimes") or {}):
        pytest.skip("this daemon has the nvidia runtime")
    monkeypatch.setenv("KERNEL_AGENT_CACHE", str(tmp_path / "cache"))
    gate = tmp_path / "cache" / "harness" / "gpu-locks" / "gpu-1.lock"
    workspace = tmp_path / "ws"
    workspace.mkdir()
    options = {
        **docker_options(test_image, docker_client),
        "gpus": "1",
        "gpu_host": stand_in_host(tmp_path / "host"),
    }
    probe = (
        "import fcntl, os, sys\n"
        "fd = os.open(sys.argv[1], os.O_RDONLY)\n"
        "try:\n"
        "    fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)\n"
        "    print('taken')\n"
        "except BlockingIOError:\n"
        "    print('held by another')\n"
    )
    with DockerSandbox(workspace=workspace, **options) as box:
        gate.touch()
        with GpuGate(str(gate)) as host_side:
            host_side.hold("exclusive")
            held = box.exec([box.python, "-c", probe, str(gate)], timeout=60)
        free = box.exec([box.python, "-c", probe, str(gate)], timeout=60)
    assert held.ok and free.ok, held.stderr + free.stderr
    assert (held.stdout.strip(), free.stdout.strip()) == ("held by another", "taken")
