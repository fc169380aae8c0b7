"""What only the docker sandbox does. The request shape (GPUs, limits, mounts, hardening) is read
from a fake client, since no GPU machine here has Docker; the lifecycle (labels, removal on close
and at exit, leftover cleanup, recreation after a timeout or a dead keep-alive, the cache volume)
runs against the real daemon."""

from __future__ import annotations

import os
import signal
import socket
import struct
import subprocess
import sys
import textwrap
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, ClassVar

import pytest

import sandbox.docker as docker_module
from sandbox.base import SandboxError
from sandbox.docker import DockerSandbox
from sandbox.docker_host import (
    LABEL,
    OWNER_LABEL,
    gpu_device_requests,
    owner_label,
    remove_leftover_containers,
)
from tests.sandbox.conftest import TEST_CACHE_VOLUME, docker_options, raw_volumes

# -- request shape, no daemon ------------------------------------------------------------------------


class FakeSocket:
    def __init__(self, payload: bytes) -> None:
        self.data = struct.pack(">BxxxL", 1, len(payload)) + payload

    def settimeout(self, _: float) -> None: ...

    def recv(self, n: int) -> bytes:
        chunk, self.data = self.data[:n], self.data[n:]
        return chunk

    def sendall(self, _: bytes) -> None: ...

    def shutdown(self, _: int) -> None: ...

    def close(self) -> None: ...


class FakeContainer:
    id = short_id = "fake0000"
    attrs: ClassVar[dict[str, Any]] = {"State": {"Pid": 0}}

    def start(self) -> None: ...

    def reload(self) -> None: ...

    def remove(self, force: bool = False) -> None: ...


class FakeClient:
    """Just enough of docker.DockerClient to open a sandbox and record what it asked for."""

    def __init__(self, runtimes: dict[str, Any] | None = None) -> None:
        self.run_calls: list[dict[str, Any]] = []
        self.runtimes = runtimes or {"runc": {}}
        client = self

        class Images:
            def get(self, name: str) -> object:
                return object()

        class Containers:
            def list(self, **_: Any) -> list[Any]:
                return []

            def create(self, *args: Any, **kwargs: Any) -> FakeContainer:
                client.run_calls.append({"args": args, **kwargs})
                return FakeContainer()

        class Volumes:
            def get(self, name: str) -> object:
                return object()

        class Api:
            def exec_create(self, *_: Any, **__: Any) -> dict[str, str]:
                return {"Id": "exec0"}

            def exec_start(self, *_: Any, **__: Any) -> FakeSocket:
                return FakeSocket(b"7\n")

            def exec_inspect(self, _: str) -> dict[str, Any]:
                return {"Running": False, "ExitCode": 0}

        self.images, self.containers, self.volumes, self.api = Images(), Containers(), Volumes(), Api()

    def info(self) -> dict[str, Any]:
        return {"Runtimes": self.runtimes}


def run_request(tmp_path: Path, **options: Any) -> dict[str, Any]:
    client = FakeClient(options.pop("runtimes", None))
    box = DockerSandbox(workspace=tmp_path, image="some/image:1", client=client, **options)
    box.close()
    return client.run_calls[-1]


def test_gpu_requests_match_docker_run_gpus() -> None:
    (everything,) = gpu_device_requests("all")
    assert everything["Count"] == -1 and everything["Capabilities"] == [["gpu"]]
    (two,) = gpu_device_requests("0,1")
    assert two["DeviceIDs"] == ["0", "1"] and two["Capabilities"] == [["gpu"]]
    assert gpu_device_requests(None) == []
    with pytest.raises(SandboxError):
        gpu_device_requests(" , ")


def test_gpus_auto_follows_the_daemons_nvidia_runtime(tmp_path: Path) -> None:
    with_nvidia = run_request(tmp_path, runtimes={"nvidia": {}, "runc": {}})
    assert with_nvidia["device_requests"][0]["Count"] == -1
    assert run_request(tmp_path)["device_requests"] == []
    one = run_request(tmp_path, gpus="1", gpu_mode="runtime")  # no runtime: the daemon refuses it
    assert one["device_requests"][0]["DeviceIDs"] == ["1"]


def test_container_request_is_locked_down(tmp_path: Path) -> None:
    request = run_request(
        tmp_path, mem_limit="2g", pids_limit=99, cpus=1.5, ro_mounts={"/opt/x": "/x"}, gpus=None
    )
    assert request["command"] == ["sleep", "infinity"] and request["init"] is True
    assert request["network_mode"] == "none" and request["read_only"] is True
    assert request["tmpfs"]["/tmp"].startswith("rw,")
    assert request["cap_drop"] == ["ALL"] and request["security_opt"] == ["no-new-privileges"]
    assert (request["mem_limit"], request["memswap_limit"], request["pids_limit"]) == ("2g", "2g", 99)
    assert request["nano_cpus"] == 1_500_000_000
    assert request["user"] == f"{os.getuid()}:{os.getgid()}"
    volumes = request["volumes"]
    assert volumes[str(tmp_path.resolve())] == {"bind": "/workspace", "mode": "rw"}
    assert volumes["/opt/x"] == {"bind": "/x", "mode": "ro"}
    assert volumes[docker_module.CACHE_VOLUME] == {"bind": "/cache", "mode": "rw"}
    assert {"bind": "/opt/kernel-agent/workers", "mode": "ro"} in volumes.values()
    assert request["labels"][LABEL] == "1" and request["labels"][OWNER_LABEL] == owner_label()
    assert "OPENAI_API_KEY" not in request["environment"]


def test_image_name_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KERNEL_AGENT_IMAGE", "mine/gpu:7")
    client = FakeClient()
    DockerSandbox(workspace=tmp_path, client=client).close()
    assert client.run_calls[-1]["image"] == "mine/gpu:7"


# -- against the real daemon ---------------------------------------------------------------------------


def open_real(tmp_path: Path, client: Any, image: str, **overrides: Any) -> DockerSandbox:
    return DockerSandbox(workspace=tmp_path, **{**docker_options(image, client), **overrides})


def labelled(client: Any) -> set[str]:
    return {c.id for c in client.containers.list(all=True, filters={"label": LABEL})}


@pytest.mark.docker
def test_gpu_request_without_nvidia_runtime_fails_clearly(
    tmp_path: Path, docker_client: Any, test_image: str
) -> None:
    if "nvidia" in (docker_client.info().get("Runtimes") or {}):
        pytest.skip("this daemon has the nvidia runtime")
    before = {c.id for c in docker_client.containers.list(all=True)}
    with pytest.raises(SandboxError, match="NVIDIA Container Toolkit"):
        open_real(tmp_path, docker_client, test_image, gpus="all", gpu_mode="runtime")
    assert {c.id for c in docker_client.containers.list(all=True)} <= before  # nothing left behind


@pytest.mark.docker
def test_missing_image_says_how_to_build_it(tmp_path: Path, docker_client: Any) -> None:
    with pytest.raises(SandboxError, match="agent sandbox build --tag kernel-agent-missing:0"):
        DockerSandbox(workspace=tmp_path, image="kernel-agent-missing:0", client=docker_client)


@pytest.mark.docker
def test_container_is_labelled_and_removed_on_close(
    tmp_path: Path, docker_client: Any, test_image: str
) -> None:
    box = open_real(tmp_path, docker_client, test_image)
    container_id = box.container.id
    assert container_id in labelled(docker_client)
    attrs = docker_client.api.inspect_container(container_id)
    assert attrs["HostConfig"]["NetworkMode"] == "none" and attrs["HostConfig"]["ReadonlyRootfs"]
    assert attrs["HostConfig"]["CapDrop"] == ["ALL"] and attrs["HostConfig"]["PidsLimit"] == 128
    box.close()
    assert container_id not in labelled(docker_client)


@pytest.mark.docker
def test_leftovers_of_dead_owners_are_removed(tmp_path: Path, docker_client: Any, test_image: str) -> None:
    host = socket.gethostname()
    dead = subprocess.Popen(["true"])
    dead.wait()
    owners = {"dead": f"{host}:{dead.pid}:1", "alive": owner_label(), "elsewhere": "other-host:1:1"}
    made = {
        name: docker_client.containers.run(
            test_image,
            ["sleep", "infinity"],
            detach=True,
            network_mode="none",
            labels={LABEL: "1", OWNER_LABEL: owner},
            volumes=raw_volumes(docker_client, test_image),
        ).id
        for name, owner in owners.items()
    }
    try:
        box = open_real(tmp_path, docker_client, test_image)  # opening cleans up
        box.close()
        remaining = labelled(docker_client)
        assert made["dead"] not in remaining
        assert made["alive"] in remaining and made["elsewhere"] in remaining
    finally:
        for container_id in made.values():
            subprocess.run(["docker", "rm", "-f", container_id], capture_output=True, check=False)


OPENER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    sys.path.insert(0, {root!r})
    from tests.sandbox.conftest import docker_options, docker_or_reason
    from sandbox.docker import DockerSandbox
    box = DockerSandbox(workspace=Path({ws!r}), **docker_options({image!r}, docker_or_reason()[0]))
    print(box.container.id, flush=True)
    if {hang}:
        time.sleep(600)
    """
)


@pytest.mark.docker
def test_containers_go_at_exit_and_after_a_crash(tmp_path: Path, docker_client: Any, test_image: str) -> None:
    root = str(Path(__file__).resolve().parents[2])
    clean = subprocess.run(
        [sys.executable, "-c", OPENER.format(root=root, ws=str(tmp_path), image=test_image, hang=False)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert clean.stdout.strip() not in labelled(docker_client)  # removed by atexit
    crashing = subprocess.Popen(
        [sys.executable, "-c", OPENER.format(root=root, ws=str(tmp_path), image=test_image, hang=True)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert crashing.stdout is not None
    container_id = crashing.stdout.readline().strip()
    crashing.send_signal(signal.SIGKILL)
    crashing.wait()
    assert container_id in labelled(docker_client)  # no atexit after SIGKILL...
    remove_leftover_containers(docker_client)
    assert container_id not in labelled(docker_client)  # ...so the next harness removes it


@pytest.mark.docker
def test_sandboxes_open_and_close_from_many_threads(
    tmp_path: Path, docker_client: Any, test_image: str
) -> None:
    """The batch and the adversarial suite open sandboxes from a thread pool: one closing (its
    container removed) while another lists the leftovers must not fail the other's opening."""

    def open_and_close(index: int) -> None:
        workspace = tmp_path / f"w{index}"
        workspace.mkdir()
        for _ in range(3):
            with open_real(workspace, docker_client, test_image) as box:
                assert box.exec(["echo", str(index)], timeout=30).stdout == f"{index}\n"

    with ThreadPoolExecutor(max_workers=6) as pool:
        list(pool.map(open_and_close, range(6)))  # re-raises the first failure
    mine = [
        c
        for c in docker_client.containers.list(all=True, filters={"label": LABEL})
        if c.labels.get("kernel-agent.workspace", "").startswith(str(tmp_path))
    ]
    assert not mine  # each removed on close


@pytest.mark.docker
def test_a_timeout_recreates_the_container(tmp_path: Path, docker_client: Any, test_image: str) -> None:
    box = open_real(tmp_path, docker_client, test_image)
    try:
        before = box.container.id
        box.exec(["sh", "-c", "echo kept > /workspace/kept.txt; echo lost > /tmp/lost.txt"], timeout=10)
        assert box.exec(["sleep", "60"], timeout=1).timed_out
        assert box.container.id != before and before not in labelled(docker_client)
        for _ in range(3):  # the fresh container stays up for the commands after it
            assert box.exec(["cat", "/workspace/kept.txt"], timeout=10).stdout == "kept\n"
            time.sleep(0.3)
        assert box.exec(["cat", "/tmp/lost.txt"], timeout=10).returncode != 0
    finally:
        box.close()


@pytest.mark.docker
def test_the_client_deadline_catches_a_stuck_exec(
    tmp_path: Path, docker_client: Any, test_image: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    box = open_real(tmp_path, docker_client, test_image)
    try:
        before = box.container.id
        # As if the in-container `timeout` never fired: only the harness's own deadline is left.
        monkeypatch.setattr(docker_module, "WRAPPER", 'shift 2; exec "$@"')
        monkeypatch.setattr(docker_module, "_CLIENT_GRACE_S", 1.0)
        start = time.monotonic()
        result = box.exec(["sleep", "60"], timeout=1)
        assert result.timed_out and time.monotonic() - start < 10
        assert box.container.id != before
        monkeypatch.undo()
        assert box.exec(["echo", "back"], timeout=10).stdout == "back\n"
    finally:
        box.close()


@pytest.mark.docker
def test_a_killed_keepalive_does_not_end_the_sandbox(
    tmp_path: Path, docker_client: Any, test_image: str
) -> None:
    box = open_real(tmp_path, docker_client, test_image)
    try:
        box.exec(["sh", "-c", "kill -9 $(cat /proc/1/task/1/children)"], timeout=10)
        time.sleep(0.5)
        assert box.exec(["echo", "recovered"], timeout=30).stdout == "recovered\n"
    finally:
        box.close()


@pytest.mark.docker
def test_the_cache_volume_outlives_containers(tmp_path: Path, docker_client: Any, test_image: str) -> None:
    name = f"/cache/probe-{uuid.uuid4().hex[:8]}"
    first = open_real(tmp_path, docker_client, test_image)
    first.put_file(name, b"compiled once")
    first.close()
    second = open_real(tmp_path, docker_client, test_image)
    try:
        assert second.get_file(name) == b"compiled once"
        mounts = docker_client.api.inspect_container(second.container.id)["Mounts"]
        assert {"Type": "volume", "Name": TEST_CACHE_VOLUME, "Destination": "/cache"}.items() <= next(
            m for m in mounts if m["Destination"] == "/cache"
        ).items()
        second.exec(["rm", "-f", name], timeout=10)
    finally:
        second.close()


@pytest.mark.docker
def test_binary_files_through_tmpfs(tmp_path: Path, docker_client: Any, test_image: str) -> None:
    box = open_real(tmp_path, docker_client, test_image)
    try:
        payload = os.urandom(300_000)
        box.put_file("/tmp/deep/er/blob.bin", payload)
        assert box.get_file("/tmp/deep/er/blob.bin") == payload
        with pytest.raises(FileNotFoundError):
            box.get_file("/tmp/absent.bin")
        with pytest.raises(OSError):
            box.put_file("/etc/refused.txt", b"x")
    finally:
        box.close()
