"""Host-stack images (`agent sandbox build --host-stack`): a skeleton root or a given root
filesystem imported with `docker import`, nothing fetched, the host's python with torch, CUDA
toolkit and (for the skeleton) /usr mounted read-only at run time. Plans from fake probes and a
fake host root; the import, a sandbox on the image and a real build against the real daemon."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import tarfile
import uuid
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import sandbox.image
from agent.cli.sandbox import sandbox_app
from sandbox.base import SandboxError
from sandbox.docker import DockerSandbox
from sandbox.image import (
    HOST_MOUNTS_LABEL,
    IMAGE_LABEL,
    build_host_stack_image,
    host_stack,
    host_stack_of,
    probe_python,
    skeleton_rootfs,
)
from tests.sandbox.conftest import TEST_CACHE_VOLUME
from tests.sandbox.test_docker import FakeClient

ROOT = Path(__file__).resolve().parents[2]
PROBE = {
    "executable": "/opt/py/bin/python3",
    "prefix": "/opt/py",
    "base_prefix": "/opt/py",
    "version": "3.12.3",
    "torch": "2.11.0+cu130",
    "torch_site": "/opt/py/lib/python3.12/site-packages",
    "torch_cuda": "13.0",
    "cuda_home": "/opt/cuda-13.0",
    "nvcc": "13.0",
}


def fake_root(tmp_path: Path, *, merged: bool = True) -> Path:
    root = tmp_path / "root"
    (root / "usr" / "bin").mkdir(parents=True)
    (root / "usr" / "lib").mkdir()
    (root / "etc" / "alternatives").mkdir(parents=True)
    (root / "etc" / "ld.so.cache").write_text("cache")
    for name in ("bin", "lib", "lib64", "sbin"):
        if merged:
            (root / name).symlink_to(f"usr/{name}")
        else:
            (root / name).mkdir()
    return root


def test_skeleton_plan_borrows_usr_and_keeps_merged_links(tmp_path: Path) -> None:
    root = fake_root(tmp_path)
    stack = host_stack(PROBE, host_root=root)
    assert stack.mounts == {
        f"{root}/usr": "/usr",
        f"{root}/etc/alternatives": "/etc/alternatives",
        f"{root}/etc/ld.so.cache": "/etc/ld.so.cache",
        "/opt/py": "/opt/py",  # prefix, torch's site under it
        "/opt/cuda-13.0": "/opt/cuda-13.0",
    }
    assert stack.skeleton_links == {
        "/bin": "usr/bin",
        "/lib": "usr/lib",
        "/lib64": "usr/lib64",
    }  # never /sbin
    assert stack.python == "/opt/py/bin/python3"
    assert stack.env["PATH"].startswith("/opt/py/bin:/opt/cuda-13.0/bin:")
    assert stack.env["CUDA_HOME"] == "/opt/cuda-13.0"
    assert "python 3.12.3" in stack.description and "torch 2.11.0+cu130" in stack.description


def test_skeleton_plan_on_a_split_usr_mounts_the_real_folders(tmp_path: Path) -> None:
    root = fake_root(tmp_path, merged=False)
    stack = host_stack(PROBE, host_root=root)
    assert {
        f"{root}/bin": "/bin",
        f"{root}/lib": "/lib",
        f"{root}/lib64": "/lib64",
    }.items() <= stack.mounts.items()
    assert f"{root}/sbin" not in stack.mounts and not stack.skeleton_links  # docker's init goes to /sbin


def test_the_system_python_is_covered_by_usr() -> None:
    system = {
        **PROBE,
        "executable": "/usr/bin/python3",
        "prefix": "/usr",
        "base_prefix": "/usr",
        "torch_site": "/usr/local/lib/python3.12/dist-packages",
        "cuda_home": "/usr/local/cuda-13.0",
    }
    stack = host_stack(system)  # the real / : nothing beyond /usr and /etc's two
    assert set(stack.mounts.values()) <= {
        "/usr",
        "/bin",
        "/lib",
        "/lib32",
        "/lib64",
        "/libx32",
        "/etc/alternatives",
        "/etc/ld.so.cache",
    }
    with pytest.raises(SandboxError, match="inside the system folders that --rootfs replaces"):
        host_stack(system, rootfs=True)


def test_rootfs_plan_mounts_only_the_python_and_the_toolkit(tmp_path: Path) -> None:
    stack = host_stack({**PROBE, "cuda_home": "/usr/local/cuda-13.0"}, rootfs=True)
    assert stack.mounts == {"/opt/py": "/opt/py", "/usr/local/cuda-13.0": "/usr/local/cuda-13.0"}
    assert not stack.skeleton_links and "own root filesystem" in stack.description


def test_a_link_out_of_a_borrowed_folder_is_followed(tmp_path: Path) -> None:
    root = fake_root(tmp_path)
    (tmp_path / "elsewhere").mkdir()
    (root / "usr" / "cuda").symlink_to(tmp_path / "elsewhere")
    stack = host_stack({**PROBE, "cuda_home": f"{root}/usr/cuda"}, host_root=root)
    assert stack.mounts[str(tmp_path / "elsewhere")] == str(tmp_path / "elsewhere")


def test_no_torch_is_refused_and_no_toolkit_is_noted() -> None:
    with pytest.raises(SandboxError, match="cannot import torch"):
        host_stack(
            {k: v for k, v in PROBE.items() if not k.startswith("torch")}
            | {"torch_error": "ModuleNotFoundError"}
        )
    stack = host_stack(
        {k: v for k, v in PROBE.items() if k != "cuda_home"} | {"cuda_error": "no CUDA toolkit found"}
    )
    assert any("no CUDA toolkit" in note for note in stack.notes)


def test_labels_round_trip_and_the_changes_quote_them(tmp_path: Path) -> None:
    stack = host_stack(PROBE, host_root=fake_root(tmp_path))
    again = host_stack_of(stack.labels())
    assert again is not None and again.mounts == stack.mounts and again.python == stack.python
    assert host_stack_of({IMAGE_LABEL: "gpu"}) is None and host_stack_of(None) is None
    changes = stack.changes()
    label = next(c for c in changes if c.startswith(f"LABEL {HOST_MOUNTS_LABEL}="))
    assert label.startswith(f'LABEL {HOST_MOUNTS_LABEL}="{{\\"')  # JSON inside escaped quotes
    assert 'CMD ["sleep", "infinity"]' in changes and "WORKDIR /workspace" in changes
    assert f'ENV CUDA_HOME="{PROBE["cuda_home"]}"' in changes


def test_skeleton_rootfs_holds_mount_points_users_and_links(tmp_path: Path) -> None:
    stack = host_stack(PROBE, host_root=fake_root(tmp_path))
    with tarfile.open(fileobj=io.BytesIO(skeleton_rootfs(stack, uid=1234, gid=1234))) as tar:
        members = {m.name: m for m in tar.getmembers()}
        passwd = tar.extractfile("etc/passwd")
        assert passwd is not None and "sandbox:x:1234:1234:" in passwd.read().decode()
    assert members["bin"].issym() and members["bin"].linkname == "usr/bin"
    assert members["sbin"].isdir() and members["usr"].isdir() and members["opt"].isdir()
    assert members["tmp"].mode == 0o1777 and members["workspace"].mode == 0o1777
    assert "lib64/x" not in members and not any(n.startswith("lib64/") for n in members)
    assert sum(m.size for m in members.values()) < 4096  # nothing but the skeleton


class ImportingClient(FakeClient):
    def __init__(self) -> None:
        super().__init__()
        self.imported: dict[str, Any] = {}
        client = self

        class Api(type(self.api)):  # type: ignore[misc]
            def import_image(self, **kwargs: Any) -> str:
                src = kwargs["src"]
                data = src if isinstance(src, bytes) else Path(src).read_bytes()
                with tarfile.open(fileobj=io.BytesIO(data)) as tar:
                    client.imported = {**kwargs, "names": tar.getnames()}
                return '{"status":"sha256:abc"}\r\n'

        class Images:
            def get(self, name: str) -> Any:
                return type("Image", (), {"id": "sha256:abc", "labels": {}})()

        self.api, self.images = Api(), Images()


def test_the_import_request(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(sandbox.image, "probe_python", lambda python: PROBE)
    client = ImportingClient()
    image_id, stack = build_host_stack_image("me/gpu:host", client=client)
    assert image_id == "sha256:abc"
    assert client.imported["repository"] == "me/gpu" and client.imported["tag"] == "host"
    assert client.imported["changes"] == stack.changes() and "usr" in client.imported["names"]
    rootfs = tmp_path / "rootfs"
    (rootfs / "usr" / "bin").mkdir(parents=True)
    (rootfs / "usr" / "bin" / "sh").write_text("#!")
    (rootfs / "var" / "cache" / "apt" / "archives").mkdir(parents=True)
    (rootfs / "var" / "cache" / "apt" / "archives" / "big.deb").write_text("deb")
    build_host_stack_image("me/gpu", rootfs=rootfs, client=client)
    assert client.imported["tag"] == "latest" and "./usr/bin/sh" in client.imported["names"]
    assert not any(n.endswith("big.deb") for n in client.imported["names"])
    with pytest.raises(SandboxError, match="neither a folder nor a tarball"):
        build_host_stack_image("me/gpu", rootfs=tmp_path / "nothing", client=client)


def test_import_errors_are_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sandbox.image, "probe_python", lambda python: PROBE)
    client = ImportingClient()
    client.api.import_image = lambda **_: '{"error":"no space left on device"}'  # type: ignore[method-assign]
    with pytest.raises(SandboxError, match="cannot import me/x:1: no space left on device"):
        build_host_stack_image("me/x:1", client=client)


def test_a_host_stack_image_brings_its_mounts_and_python(tmp_path: Path) -> None:
    stack = host_stack(
        {
            **PROBE,
            "prefix": str(tmp_path),
            "base_prefix": str(tmp_path),
            "executable": f"{tmp_path}/bin/python3",
            "torch_site": str(tmp_path),
            "cuda_home": str(tmp_path),
        },
        rootfs=True,
    )
    client = FakeClient()
    client.images.get = lambda name: type("Image", (), {"labels": stack.labels()})()  # type: ignore[method-assign]
    box = DockerSandbox(
        workspace=tmp_path, image="me/gpu:host", client=client, gpus=None, ro_mounts={"/opt/x": "/x"}
    )
    box.close()
    spec = client.run_calls[-1]
    assert box.python == f"{tmp_path}/bin/python3"
    assert spec["volumes"][str(tmp_path)] == {"bind": str(tmp_path), "mode": "ro"}
    assert spec["volumes"]["/opt/x"] == {"bind": "/x", "mode": "ro"}
    assert "me/gpu:host (python 3.12.3" in box.capabilities.runtime_identity
    gone = host_stack(PROBE, rootfs=True)
    client.images.get = lambda name: type("Image", (), {"labels": gone.labels()})()  # type: ignore[method-assign]
    with pytest.raises(SandboxError, match="borrows host folders this machine lacks"):
        DockerSandbox(workspace=tmp_path, image="me/gpu:host", client=client, gpus=None)


def test_cli_build_host_stack(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    calls: list[dict[str, Any]] = []

    def fake(tag: str, **kwargs: Any) -> tuple[str, Any]:
        calls.append({"tag": tag, **kwargs})
        kwargs["on_progress"]("probing python")
        return "sha256:0123456789abcdef0123", host_stack(PROBE, host_root=fake_root(tmp_path))

    monkeypatch.setattr(sandbox.image, "build_host_stack_image", fake)
    runner = CliRunner()
    result = runner.invoke(
        sandbox_app, ["build", "--host-stack", "--tag", "me/gpu:h", "--rootfs", str(tmp_path)]
    )
    assert result.exit_code == 0, result.output
    assert calls[0]["tag"] == "me/gpu:h" and calls[0]["rootfs"] == tmp_path
    assert "imported me/gpu:h" in result.output and "read-only from the host at run time" in result.output
    refused = runner.invoke(sandbox_app, ["build", "--rootfs", str(tmp_path)])
    assert refused.exit_code == 2 and "--rootfs needs --host-stack" in refused.output


# -- against the real daemon ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def host_stack_image(docker_client: Any) -> Any:
    tag = f"kernel-agent-test/host-stack:{uuid.uuid4().hex[:8]}"
    try:
        build_host_stack_image(tag, client=docker_client)
    except SandboxError as exc:
        pytest.skip(f"cannot build a host-stack image here: {exc}")
    yield tag
    docker_client.images.remove(tag, force=True)


@pytest.mark.slow
def test_probe_of_this_python() -> None:
    import sys

    probe = probe_python(sys.executable)
    assert probe["executable"] and probe["torch"] and probe["base_prefix"]


@pytest.mark.docker
def test_real_skeleton_image_runs_the_host_python(
    tmp_path: Path, docker_client: Any, host_stack_image: str
) -> None:
    labels = docker_client.images.get(host_stack_image).labels
    stack = host_stack_of(labels)
    assert stack is not None and json.loads(labels[HOST_MOUNTS_LABEL]).get("/usr") == "/usr"
    options = {"client": docker_client, "gpus": None, "mem_limit": "2g", "cache_volume": TEST_CACHE_VOLUME}
    with DockerSandbox(workspace=tmp_path, image=host_stack_image, **options) as box:
        probe = box.exec(
            [box.python, "-I", "-c", "import sys, torch; print(sys.executable, torch.__version__)"],
            timeout=120,
        )
        tools = box.exec(
            ["sh", "-c", "c++ --version | head -1; touch /usr/x 2>/dev/null || echo ro-usr; ls /sbin"],
            timeout=60,
        )
        text = box.describe()
    assert probe.ok, probe.stderr
    assert probe.stdout.split()[0] == stack.python
    assert tools.ok and "ro-usr" in tools.stdout and "docker-init" in tools.stdout
    assert "host-stack image:" in text and "network: network_mode=none" in text


@pytest.mark.docker
def test_real_skeleton_image_as_another_user(
    tmp_path: Path, docker_client: Any, host_stack_image: str
) -> None:
    """A fresh cache volume is chowned by a helper container, which needs the image's mounts too."""
    volume = f"kernel-agent-test-cache-{uuid.uuid4().hex[:8]}"
    tmp_path.chmod(0o777)
    try:
        with DockerSandbox(
            workspace=tmp_path,
            image=host_stack_image,
            client=docker_client,
            gpus=None,
            user="65534:65534",
            cache_volume=volume,
        ) as box:
            result = box.exec(["sh", "-c", "id -u; touch /cache/x && echo cache-writable"], timeout=60)
        assert result.ok and result.stdout.split() == ["65534", "cache-writable"], result
    finally:
        docker_client.volumes.get(volume).remove(force=True)


@pytest.mark.docker
@pytest.mark.slow
def test_real_build_of_the_relu_example_in_a_host_stack_image(
    tmp_path: Path, docker_client: Any, host_stack_image: str
) -> None:
    from agent.build.compile import compile_solution
    from agent.workspace import open_solution

    workspace = tmp_path / "relu"
    shutil.copytree(ROOT / "skills" / "cuda-extension" / "examples" / "relu", workspace)
    options = {"client": docker_client, "gpus": None, "cache_volume": TEST_CACHE_VOLUME}
    with DockerSandbox(workspace=workspace, image=host_stack_image, **options) as box:
        result = compile_solution(open_solution(workspace), box, arch="9.0", timeout=900)
    assert result.ok, result.feedback()


@pytest.mark.docker
@pytest.mark.slow
def test_real_rootfs_tarball_import(tmp_path: Path, docker_client: Any, test_image: str) -> None:
    """--rootfs with a tarball: the debootstrap test image's root, exported, imported again."""
    if shutil.which("docker") is None:
        pytest.skip("no docker CLI to export the test image's root with")
    container = docker_client.containers.create(test_image, ["true"])
    tarball = tmp_path / "rootfs.tar"
    try:
        subprocess.run(["docker", "export", "-o", str(tarball), container.id], check=True, timeout=600)
    finally:
        container.remove(force=True)
    tag = f"kernel-agent-test/host-stack-rootfs:{uuid.uuid4().hex[:8]}"
    try:
        _, stack = build_host_stack_image(tag, rootfs=tarball, client=docker_client)
        assert "/usr" not in stack.mounts.values()
        workspace = tmp_path / "ws"
        workspace.mkdir()
        with DockerSandbox(
            workspace=workspace, image=tag, client=docker_client, gpus=None, cache_volume=TEST_CACHE_VOLUME
        ) as box:
            result = box.exec([box.python, "-I", "-c", "import torch; print(torch.__version__)"], timeout=120)
            own = box.exec(["sh", "-c", "grep -h PRETTY_NAME /etc/os-release"], timeout=30)
        assert result.ok, result.stderr
        assert "bookworm" in own.stdout
    finally:
        docker_client.images.remove(tag, force=True)
