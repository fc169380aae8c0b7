"""Sandboxes for the contract suite: every test taking `sandbox` or `make_sandbox` runs once per
backend. Docker runs are marked `docker` and skip with the reason when no daemon answers or the
test image cannot be built ($KERNEL_AGENT_TEST_IMAGE names one to use instead)."""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from sandbox.base import Sandbox
from tests.sandbox.debian_image import (
    ImageUnavailable,
    ensure_test_image,
    host_python_env,
    host_python_mounts,
)

GiB = 1024**3
TEST_CACHE_VOLUME = "kernel-agent-test-cache"
LOCAL_OPTIONS: dict[str, Any] = {"pids_limit": 128, "memory_limit": 1 * GiB}
DOCKER_OPTIONS: dict[str, Any] = {
    "mem_limit": "1g",
    "pids_limit": 128,
    "gpus": None,
    "cache_volume": TEST_CACHE_VOLUME,
    "python": sys.executable,
}


@functools.cache
def docker_or_reason() -> tuple[Any, str]:
    try:
        import docker

        client = docker.from_env(timeout=120)
        client.ping()
        return client, ""
    except Exception as exc:  # any failure to reach a daemon means: skip, and say why
        return None, f"no Docker daemon answers ({type(exc).__name__}: {exc}); run .ci/setup-docker.sh"


@pytest.fixture(scope="session")
def docker_client() -> Any:
    client, reason = docker_or_reason()
    if client is None:
        pytest.skip(reason)
    return client


@pytest.fixture(scope="session")
def test_image(docker_client: Any) -> str:
    """The debootstrap test image, or $KERNEL_AGENT_TEST_IMAGE where debootstrap cannot reach a
    mirror (a host-stack image from `agent sandbox build --host-stack`, say, on a GPU machine)."""
    given = os.environ.get("KERNEL_AGENT_TEST_IMAGE")
    if given:
        try:
            docker_client.images.get(given)
        except Exception as exc:  # not there, or the daemon cannot say: skip, naming it
            pytest.skip(f"KERNEL_AGENT_TEST_IMAGE={given} is not on this daemon ({exc})")
        return given
    try:
        return ensure_test_image(docker_client)
    except ImageUnavailable as exc:
        pytest.skip(f"cannot build the Docker test image: {exc}")


def raw_volumes(client: Any, image: str) -> dict[str, dict[str, str]]:
    """For containers a test starts itself: what a host-stack image borrows (nothing for the
    debootstrap image), so that `sleep` and the rest exist in them."""
    from sandbox.image import host_stack_of

    stack = host_stack_of(client.images.get(image).labels)
    return {host: {"bind": inside, "mode": "ro"} for host, inside in (stack.mounts if stack else {}).items()}


def docker_options(image: str, client: Any) -> dict[str, Any]:
    return {
        **DOCKER_OPTIONS,
        "image": image,
        "client": client,
        "ro_mounts": host_python_mounts(),
        "env": host_python_env(),
    }


@pytest.fixture(params=["local", pytest.param("docker", marks=pytest.mark.docker)])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws


@pytest.fixture
def make_sandbox(
    kind: str, workspace: Path, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[Callable[..., Sandbox]]:
    """Opens sandboxes of the parametrized kind over `workspace`; closes them afterwards."""
    opened: list[Sandbox] = []

    def make(**overrides: Any) -> Sandbox:
        if kind == "docker":
            options = docker_options(
                request.getfixturevalue("test_image"), request.getfixturevalue("docker_client")
            )
            from sandbox.docker import DockerSandbox

            box: Sandbox = DockerSandbox(workspace=workspace, **{**options, **overrides})
        else:
            from sandbox.local import LocalSandbox

            box = LocalSandbox(
                workspace=workspace, cache_dir=tmp_path / "cache", **{**LOCAL_OPTIONS, **overrides}
            )
        opened.append(box)
        return box

    yield make
    for box in opened:
        box.close()


@pytest.fixture
def sandbox(make_sandbox: Callable[..., Sandbox]) -> Sandbox:
    return make_sandbox()


def processes_with(marker: str) -> list[int]:
    """Host pids whose command line contains `marker` (containers' processes included)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            with contextlib.suppress(OSError):
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
    return found


def wait_until_gone(marker: str, within: float = 5.0) -> list[int]:
    deadline = time.monotonic() + within
    while (left := processes_with(marker)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left
